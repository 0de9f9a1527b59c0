"""The server adapter: the exact REST requests it sends, and how it maps the server's answers.

A scripted Qdrant REST server stands in for Qdrant behind ``httpx.MockTransport`` (which
``ServerStore`` forwards to qdrant-client's async client), so every assertion is on the wire.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from qdrant_client import models

from rag_runtime.embedding.types import SparseVectorData
from rag_runtime.store import (
    MIN_SERVER_VERSION,
    FacetCount,
    PointRecord,
    ServerStore,
    bootstrap_collection,
    chunk_point,
    collection_spec,
    tenant_filter,
)
from shared_contract import (
    CollectionMissingError,
    ContractSettings,
    ManifestMissingError,
    QdrantUnavailableError,
    StoreIncompatibleError,
    StoreRequestError,
    load_settings,
    manifest_for,
)
from shared_contract.manifest import MANIFEST_METADATA_KEY

pytestmark = pytest.mark.anyio

URL = "http://qdrant.test:6333"
COLLECTION = "ingestion_files"
POINT_A = "5b1f2f2e-0d6c-4a55-9a8f-2a3f0a4f1c01"
POINT_B = "5b1f2f2e-0d6c-4a55-9a8f-2a3f0a4f1c02"
# Point writes wait for every replica and go through one leader per shard, so replicas apply a
# file's version switches (claim, publish, sweep) in the same order.
WRITE_PARAMS = {"wait": "true", "ordering": "medium"}


@dataclass(frozen=True)
class Sent:
    """One request as it reached the server."""

    method: str
    path: str
    params: dict[str, str]
    body: Any


class ScriptedQdrant:
    """A minimal Qdrant REST server for the calls the adapter makes.

    Keeps the collection (the body it was created with) and its payload indexes, records every
    request, answers point calls with scripted results, and fails the next call when told to.
    """

    def __init__(self, version: str = "1.20.0") -> None:
        self.version = version
        self.requests: list[Sent] = []
        self.created: dict[str, Any] | None = None
        self.indexes: dict[str, dict[str, Any]] = {}
        self.results: dict[str, Any] = {}
        self.failure: tuple[int, str] | None = None
        self.create_rejection: tuple[int, str] | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        path = request.url.path
        self.requests.append(Sent(request.method, path, dict(request.url.params), body))
        if path == "/":
            return httpx.Response(200, json={"title": "qdrant - vector search engine", "version": self.version})
        if self.failure is not None:
            status, message = self.failure
            self.failure = None
            return httpx.Response(status, json={"status": {"error": message}, "time": 0.0})
        prefix = f"/collections/{COLLECTION}"
        if path == f"{prefix}/exists":
            return self._ok({"exists": self.created is not None})
        if request.method == "PUT" and path == prefix:
            if self.create_rejection is not None:
                status, message = self.create_rejection
                return httpx.Response(status, json={"status": {"error": message}, "time": 0.0})
            self.created = body
            return self._ok(True)
        if self.created is None:
            return httpx.Response(
                404, json={"status": {"error": f"Not found: Collection `{COLLECTION}` doesn't exist!"}, "time": 0.0}
            )
        if request.method == "GET" and path == prefix:
            return self._ok(self._collection_info())
        if request.method == "PATCH" and path == prefix:
            assert body is not None
            for name, diff in (body.get("vectors") or {}).items():
                self.created["vectors"][name].update(diff)
            return self._ok(True)
        if request.method == "PUT" and path == f"{prefix}/index":
            assert body is not None
            self.indexes[body["field_name"]] = body["field_schema"]
            return self._ok({"operation_id": len(self.indexes), "status": "completed"})
        endpoint = path.removeprefix(prefix + "/")
        if endpoint in self.results:
            return self._ok(self.results[endpoint])
        return self._ok({"operation_id": 99, "status": "completed"})

    @staticmethod
    def _ok(result: Any) -> httpx.Response:
        return httpx.Response(200, json={"result": result, "status": "ok", "time": 0.0})

    def _collection_info(self) -> dict[str, Any]:
        assert self.created is not None
        return {
            "status": "green",
            "optimizer_status": "ok",
            "segments_count": 1,
            "points_count": 0,
            "indexed_vectors_count": 0,
            "payload_schema": {
                name: {"data_type": schema["type"], "params": schema, "points": 0}
                for name, schema in self.indexes.items()
            },
            "config": {
                "params": {
                    "vectors": self.created["vectors"],
                    "sparse_vectors": self.created.get("sparse_vectors"),
                    "shard_number": 1,
                    "replication_factor": 1,
                    "write_consistency_factor": 1,
                    "on_disk_payload": True,
                },
                "hnsw_config": {"m": 0, "payload_m": 16, "ef_construct": 100, "full_scan_threshold": 10000},
                "optimizer_config": {
                    "deleted_threshold": 0.2,
                    "vacuum_min_vector_number": 1000,
                    "default_segment_number": 0,
                    "flush_interval_sec": 5,
                },
                "wal_config": {"wal_capacity_mb": 32, "wal_segments_ahead": 0},
                "metadata": self.created.get("metadata"),
                "quantization_config": self.created.get("quantization_config"),
            },
        }

    def sent(self, method: str, endpoint: str = "") -> list[Sent]:
        """Requests with ``method`` to ``/collections/<name>`` + ``endpoint``."""
        path = f"/collections/{COLLECTION}{endpoint}"
        return [request for request in self.requests if request.method == method and request.path == path]

    def writes(self) -> list[Sent]:
        return [request for request in self.requests if request.method in {"PUT", "POST", "DELETE", "PATCH"}]


@pytest.fixture
def server() -> ScriptedQdrant:
    return ScriptedQdrant()


@pytest.fixture
async def store(server: ScriptedQdrant) -> AsyncIterator[ServerStore]:
    instance = ServerStore(URL, COLLECTION, transport=httpx.MockTransport(server))
    yield instance
    await instance.close()


@pytest.fixture
def server_settings() -> ContractSettings:
    return load_settings(ContractSettings, qdrant_uri=URL)


def _keyword(tenant: bool = False) -> dict[str, Any]:
    return {"type": "keyword", "is_tenant": True} if tenant else {"type": "keyword"}


def _stemmed(language: str) -> dict[str, Any]:
    return {
        "type": "text",
        "tokenizer": "word",
        "lowercase": True,
        "stopwords": language,
        "stemmer": {"type": "snowball", "language": language},
        "scoring": {"type": "bm25"},
    }


# What bootstrap must send for each payload index, spelled out as Qdrant's REST API reads it.
EXPECTED_INDEXES: dict[str, dict[str, Any]] = {
    "meta.collection_name": _keyword(tenant=True),
    "meta.collection_type": _keyword(),
    "meta.languages": _keyword(),
    "meta.lexical_language": _keyword(),
    "meta.file_id": _keyword(),
    "meta.ingest_version": _keyword(),
    "meta.ingest_state": _keyword(),
    # Filtered on, never a source of HNSW links (the tenant key's per-tenant graphs serve its searches).
    "meta.live_in": {"type": "keyword", "enable_hnsw": False},
    "meta.ingest_seq": {"type": "integer", "lookup": False, "range": True},
    "meta.name": _keyword(),
    "meta.format": _keyword(),
    "meta.tags": _keyword(),
    "meta.category": _keyword(),
    "meta.extractor": _keyword(),
    "meta.source_sha256": _keyword(),
    "meta.path": _keyword(),
    "meta.folders": _keyword(),
    "meta.indexed_at": {"type": "datetime"},
    "meta.split_id": {"type": "integer", "lookup": True, "range": False},
    "lexical_da": _stemmed("danish"),
    "lexical_de": _stemmed("german"),
    "lexical_en": _stemmed("english"),
    "lexical_es": _stemmed("spanish"),
    "lexical_fi": _stemmed("finnish"),
    "lexical_fr": _stemmed("french"),
    "lexical_it": _stemmed("italian"),
    "lexical_nl": _stemmed("dutch"),
    "lexical_no": _stemmed("norwegian"),
    "lexical_pt": _stemmed("portuguese"),
    "lexical_sv": _stemmed("swedish"),
    "lexical_any": {"type": "text", "tokenizer": "multilingual", "lowercase": True, "scoring": {"type": "bm25"}},
}


# -- bootstrap ------------------------------------------------------------------------------


async def test_bootstrap_checks_the_server_version_before_anything_else(
    server: ScriptedQdrant, store: ServerStore, server_settings: ContractSettings
) -> None:
    await bootstrap_collection(store, server_settings)
    assert (server.requests[0].method, server.requests[0].path) == ("GET", "/")


async def test_bootstrap_refuses_a_server_older_than_the_minimum_and_changes_nothing(
    server: ScriptedQdrant, store: ServerStore, server_settings: ContractSettings
) -> None:
    assert MIN_SERVER_VERSION == (1, 20, 0)
    server.version = "1.19.4"
    with pytest.raises(StoreIncompatibleError, match=r"1\.19\.4.*>= 1\.20\.0"):
        await bootstrap_collection(store, server_settings)
    assert server.writes() == []


async def test_the_minimum_server_version_itself_is_accepted(server: ScriptedQdrant, store: ServerStore) -> None:
    server.version = "1.20.0"
    assert await store.check_version() == "1.20.0"


async def test_bootstrap_creates_the_collection_with_the_contract_layout(
    server: ScriptedQdrant, store: ServerStore, server_settings: ContractSettings
) -> None:
    manifest = await bootstrap_collection(store, server_settings)

    [create] = server.sent("PUT")
    expected_manifest = manifest_for(server_settings).model_dump(mode="json", exclude={"created_at"})
    stored_manifest = dict(create.body["metadata"][MANIFEST_METADATA_KEY])
    assert stored_manifest.pop("created_at")
    assert stored_manifest == expected_manifest
    assert {key: value for key, value in create.body.items() if key != "metadata"} == {
        "vectors": {
            "text-dense": {
                "size": 384,
                "distance": "Cosine",
                "quantization_config": {"scalar": {"type": "int8", "quantile": 0.99, "always_ram": True}},
            },
            "text-dense-multilingual": {"size": 384, "distance": "Cosine", "memory": "cold"},
        },
        "sparse_vectors": {"text-sparse": {"modifier": "idf"}},
        "hnsw_config": {"m": 0, "payload_m": 16},
    }
    assert manifest.dense_dim == 384
    assert manifest.sparse_model == server_settings.sparse_embedding_model


async def test_bootstrap_lays_the_collection_out_over_a_cluster_as_configured(
    server: ScriptedQdrant, store: ServerStore
) -> None:
    settings = load_settings(
        ContractSettings,
        qdrant_uri=URL,
        qdrant_shard_number=6,
        qdrant_replication_factor=2,
        qdrant_write_consistency_factor=2,
    )
    await bootstrap_collection(store, settings)
    [create] = server.sent("PUT")
    assert create.body["shard_number"] == 6
    assert create.body["replication_factor"] == 2
    assert create.body["write_consistency_factor"] == 2


async def test_bootstrap_without_sparse_creates_no_sparse_vector(server: ScriptedQdrant, store: ServerStore) -> None:
    settings = load_settings(ContractSettings, qdrant_uri=URL, enable_sparse_embeddings=False)
    await bootstrap_collection(store, settings)
    [create] = server.sent("PUT")
    assert create.body.get("sparse_vectors") is None
    assert set(create.body["vectors"]) == {"text-dense", "text-dense-multilingual"}
    assert create.body["metadata"][MANIFEST_METADATA_KEY]["sparse_model"] is None


async def test_bootstrap_creates_every_payload_index_with_its_exact_schema(
    server: ScriptedQdrant, store: ServerStore, server_settings: ContractSettings
) -> None:
    await bootstrap_collection(store, server_settings)

    sent = server.sent("PUT", "/index")
    # Bootstrap creates the keyword and integer indexes; a language's BM25 index comes with its first chunk.
    bootstrap_indexes = [name for name in EXPECTED_INDEXES if not name.startswith("lexical_")]
    assert [request.body["field_name"] for request in sent] == bootstrap_indexes
    for request in sent:
        assert request.body["field_schema"] == EXPECTED_INDEXES[request.body["field_name"]], request.body
        assert request.params == {"wait": "true"}
    # The spec and the wire agree: one request per index of the layout, nothing more.
    assert [index.field_name for index in collection_spec(server_settings).payload_indexes] == bootstrap_indexes


async def test_the_first_upsert_of_a_language_creates_its_bm25_index_with_its_exact_schema(
    server: ScriptedQdrant, store: ServerStore, server_settings: ContractSettings
) -> None:
    await bootstrap_collection(store, server_settings)
    server.requests.clear()
    norwegian = chunk_point(
        "c1", "Hundene løp", {"collection_name": "t", "languages": ["nb"]}, dense=[1.0] * 384, sparse=None
    )
    korean = chunk_point(
        "c2", "개가 달렸다", {"collection_name": "t", "languages": ["ko"]}, dense=[1.0] * 384, sparse=None
    )
    await store.upsert([norwegian, korean])
    indexes = server.sent("PUT", "/index")
    assert [(r.body["field_name"], r.body["field_schema"]) for r in indexes] == [
        ("lexical_any", EXPECTED_INDEXES["lexical_any"]),
        ("lexical_no", EXPECTED_INDEXES["lexical_no"]),
    ]
    assert server.requests.index(indexes[-1]) < server.requests.index(server.sent("PUT", "/points")[0])
    server.requests.clear()
    await store.upsert([norwegian])
    assert server.sent("PUT", "/index") == []  # known from now on


async def test_a_second_bootstrap_creates_nothing(
    server: ScriptedQdrant, store: ServerStore, server_settings: ContractSettings
) -> None:
    first = await bootstrap_collection(store, server_settings)
    writes = len(server.writes())
    second = await bootstrap_collection(store, server_settings)
    assert len(server.writes()) == writes
    assert second == first


async def test_bootstrap_adds_only_the_indexes_a_collection_lacks(
    server: ScriptedQdrant, store: ServerStore, server_settings: ContractSettings
) -> None:
    await bootstrap_collection(store, server_settings)
    del server.indexes["meta.ingest_state"]
    server.requests.clear()
    await bootstrap_collection(store, server_settings)
    assert [request.body["field_name"] for request in server.sent("PUT", "/index")] == ["meta.ingest_state"]
    assert server.sent("PUT") == []


INT8_COPIES = {"scalar": {"type": "int8", "quantile": 0.99, "always_ram": True}}


async def test_bootstrap_gives_a_collection_created_before_the_int8_copies_its_copies(
    server: ScriptedQdrant, store: ServerStore, server_settings: ContractSettings
) -> None:
    await bootstrap_collection(store, server_settings)
    assert server.created is not None
    del server.created["vectors"]["text-dense"]["quantization_config"]  # as collections created before
    server.requests.clear()
    await bootstrap_collection(store, server_settings)
    assert [request.body for request in server.sent("PATCH")] == [
        {"vectors": {"text-dense": {"quantization_config": INT8_COPIES}}}
    ]
    server.requests.clear()
    await bootstrap_collection(store, server_settings)
    assert server.sent("PATCH") == []


@pytest.mark.parametrize("where", ["vector", "collection"])
async def test_bootstrap_keeps_a_quantization_the_operator_chose(
    server: ScriptedQdrant, store: ServerStore, server_settings: ContractSettings, where: str
) -> None:
    await bootstrap_collection(store, server_settings)
    assert server.created is not None
    dense = server.created["vectors"]["text-dense"]
    binary = {"binary": {"always_ram": True}}
    if where == "vector":
        dense["quantization_config"] = binary
    else:
        del dense["quantization_config"]
        server.created["quantization_config"] = binary
    server.requests.clear()
    await bootstrap_collection(store, server_settings)
    assert server.sent("PATCH") == []


async def test_a_collection_created_by_another_tool_is_refused(
    server: ScriptedQdrant, store: ServerStore, server_settings: ContractSettings
) -> None:
    server.created = {"vectors": {"size": 384, "distance": "Cosine"}}
    with pytest.raises(ManifestMissingError):
        await bootstrap_collection(store, server_settings)
    assert server.sent("PUT") == []
    assert server.sent("PUT", "/index") == []


async def test_reading_the_manifest_of_a_missing_collection(store: ServerStore) -> None:
    with pytest.raises(CollectionMissingError):
        await store.read_manifest()


async def test_info_reads_sparse_and_scoring_text_indexes_from_the_server(
    server: ScriptedQdrant, store: ServerStore, server_settings: ContractSettings
) -> None:
    await bootstrap_collection(store, server_settings)
    server.indexes["plain_text"] = {"type": "text", "tokenizer": "word"}  # a text index without scoring
    server.indexes["lexical_no"] = EXPECTED_INDEXES["lexical_no"]
    server.indexes["lexical_en"] = EXPECTED_INDEXES["lexical_en"]
    info = await store.info()
    assert info.has_sparse is True
    assert info.has_multilingual is True
    assert info.text_index_fields == {"lexical_no", "lexical_en"}


async def test_info_of_a_dense_only_collection(server: ScriptedQdrant, store: ServerStore) -> None:
    settings = load_settings(
        ContractSettings, qdrant_uri=URL, enable_sparse_embeddings=False, multilingual_embedding_provider="none"
    )
    await bootstrap_collection(store, settings)
    info = await store.info()
    assert (info.has_sparse, info.has_multilingual) == (False, False)


# -- points ---------------------------------------------------------------------------------


@pytest.fixture
def created(server: ScriptedQdrant) -> ScriptedQdrant:
    server.created = {"vectors": {"text-dense": {"size": 3, "distance": "Cosine"}}}
    return server


async def test_upsert_sends_named_vectors_and_the_payload(created: ScriptedQdrant, store: ServerStore) -> None:
    point = chunk_point(
        "chunk-1",
        "Hundene løp",
        {"collection_name": "tenant-a", "languages": ["nb"]},
        dense=[0.5, 0.25, 0.0],
        sparse=SparseVectorData(indices=[3, 9], values=[0.5, 1.5]),
    )
    dense_only = chunk_point("chunk-2", "x", {"collection_name": "tenant-a"}, dense=[1.0, 0.0, 0.0], sparse=None)
    multilingual = chunk_point(
        "chunk-3",
        "Katten sov",
        {"collection_name": "tenant-a"},
        dense=[0.0, 1.0, 0.0],
        sparse=None,
        multilingual=[0.0, 0.0, 1.0],
    )
    await store.upsert([point, dense_only, multilingual])

    [sent] = created.sent("PUT", "/points")
    assert sent.params == WRITE_PARAMS
    assert sent.body["points"] == [
        {
            "id": point.point_id,
            "vector": {"text-dense": [0.5, 0.25, 0.0], "text-sparse": {"indices": [3, 9], "values": [0.5, 1.5]}},
            "payload": {
                "id": "chunk-1",
                "content": "Hundene løp",
                "meta": {"collection_name": "tenant-a", "languages": ["nb"], "lexical_language": "no"},
                "lexical_no": "Hundene løp",
            },
        },
        {
            "id": dense_only.point_id,
            "vector": {"text-dense": [1.0, 0.0, 0.0]},
            "payload": dict(dense_only.payload),
        },
        {
            "id": multilingual.point_id,
            "vector": {"text-dense": [0.0, 1.0, 0.0], "text-dense-multilingual": [0.0, 0.0, 1.0]},
            "payload": dict(multilingual.payload),
        },
    ]


async def test_an_empty_upsert_sends_nothing(created: ScriptedQdrant, store: ServerStore) -> None:
    await store.upsert([])
    assert created.requests == []


TENANT_FILTER_JSON = {
    "must": [{"key": "meta.collection_name", "match": {"any": ["tenant-a"]}}],
    "must_not": [{"key": "meta.ingest_state", "match": {"value": "pending"}}],
}


async def test_a_hybrid_query_goes_out_as_one_query_request(created: ScriptedQdrant, store: ServerStore) -> None:
    created.results["points/query"] = {
        "points": [
            {"id": POINT_A, "version": 3, "score": 0.75, "payload": {"content": "a"}},
            {"id": POINT_B, "version": 3, "score": 0.5, "payload": {"content": "b"}},
        ]
    }
    tenant = tenant_filter(["tenant-a"])
    idf = models.SearchParams(idf=models.IdfCorpusParams(corpus=tenant))
    request = models.QueryRequest(
        prefetch=[
            models.Prefetch(query=[0.1, 0.2, 0.3], using="text-dense", filter=tenant, limit=40),
            models.Prefetch(
                query=models.SparseVector(indices=[7], values=[1.0]),
                using="text-sparse",
                filter=tenant,
                params=idf,
                limit=40,
            ),
            models.Prefetch(
                query=models.TextQuery(text="hund bro"), using="lexical_no", filter=tenant, params=idf, limit=40
            ),
        ],
        query=models.RrfQuery(rrf=models.Rrf(k=60, weights=[1.0, 0.5, 0.5])),
        filter=tenant,
        params=idf,
        limit=8,
        with_payload=True,
    )
    hits = await store.query(request)

    [sent] = created.sent("POST", "/points/query")
    idf_json = {"idf": {"corpus": TENANT_FILTER_JSON}}
    assert sent.body == {
        "prefetch": [
            {"query": [0.1, 0.2, 0.3], "using": "text-dense", "filter": TENANT_FILTER_JSON, "limit": 40},
            {
                "query": {"indices": [7], "values": [1.0]},
                "using": "text-sparse",
                "filter": TENANT_FILTER_JSON,
                "params": idf_json,
                "limit": 40,
            },
            {
                "query": {"text": "hund bro"},
                "using": "lexical_no",
                "filter": TENANT_FILTER_JSON,
                "params": idf_json,
                "limit": 40,
            },
        ],
        "query": {"rrf": {"k": 60, "weights": [1.0, 0.5, 0.5]}},
        "filter": TENANT_FILTER_JSON,
        "params": idf_json,
        "limit": 8,
        "with_payload": True,
        "with_vector": False,
    }
    assert hits == [
        PointRecord(point_id=POINT_A, payload={"content": "a"}, score=0.75),
        PointRecord(point_id=POINT_B, payload={"content": "b"}, score=0.5),
    ]


async def test_a_query_batch_goes_out_as_one_batch_request(created: ScriptedQdrant, store: ServerStore) -> None:
    created.results["points/query/batch"] = [
        {"points": [{"id": POINT_A, "version": 3, "score": 0.75}]},
        {"points": [{"id": POINT_B, "version": 3, "score": 9.5}, {"id": POINT_A, "version": 3, "score": 2.0}]},
    ]
    tenant = tenant_filter(["tenant-a"])
    idf = models.SearchParams(idf=models.IdfCorpusParams(corpus=tenant))
    results = await store.query_batch(
        [
            models.QueryRequest(query=[0.1, 0.2, 0.3], using="text-dense", filter=tenant, limit=40, with_payload=False),
            models.QueryRequest(
                query=models.TextQuery(text="hund bro"),
                using="lexical_no",
                filter=tenant,
                params=idf,
                limit=40,
                with_payload=False,
            ),
        ]
    )

    [sent] = created.sent("POST", "/points/query/batch")
    assert sent.body == {
        "searches": [
            {
                # qdrant-client spells a raw vector as a nearest query in a batch; the server reads both.
                "query": {"nearest": [0.1, 0.2, 0.3]},
                "using": "text-dense",
                "filter": TENANT_FILTER_JSON,
                "limit": 40,
                "with_payload": False,
                "with_vector": False,
            },
            {
                "query": {"text": "hund bro"},
                "using": "lexical_no",
                "filter": TENANT_FILTER_JSON,
                "params": {"idf": {"corpus": TENANT_FILTER_JSON}},
                "limit": 40,
                "with_payload": False,
                "with_vector": False,
            },
        ]
    }
    assert results == [
        [PointRecord(point_id=POINT_A, score=0.75)],
        [PointRecord(point_id=POINT_B, score=9.5), PointRecord(point_id=POINT_A, score=2.0)],
    ]


async def test_a_query_asking_for_the_dense_vector_sends_with_vector_and_reads_it(
    created: ScriptedQdrant, store: ServerStore
) -> None:
    created.results["points/query"] = {
        "points": [{"id": POINT_A, "version": 3, "score": 0.5, "payload": {}, "vector": {"text-dense": [0.6, 0.8]}}]
    }
    hits = await store.query(
        models.QueryRequest(query=[0.6, 0.8], using="text-dense", limit=1, with_vector=["text-dense"])
    )
    [sent] = created.sent("POST", "/points/query")
    assert sent.body["with_vector"] == ["text-dense"]
    assert hits == [PointRecord(point_id=POINT_A, payload={}, score=0.5, vectors={"text-dense": [0.6, 0.8]})]


async def test_a_text_query_names_its_field_with_using(created: ScriptedQdrant, store: ServerStore) -> None:
    created.results["points/query"] = {"points": []}
    await store.query(models.QueryRequest(query=models.TextQuery(text="broene"), using="lexical_no", limit=5))
    [sent] = created.sent("POST", "/points/query")
    assert sent.body == {
        "query": {"text": "broene"},
        "using": "lexical_no",
        "limit": 5,
        "with_payload": True,
        "with_vector": False,
    }


async def test_set_payload_by_filter_under_a_key(created: ScriptedQdrant, store: ServerStore) -> None:
    await store.set_payload(tenant_filter(["tenant-a"]), {"ingest_state": "live"}, key="meta")
    [sent] = created.sent("POST", "/points/payload")
    assert sent.params == WRITE_PARAMS
    assert sent.body == {"payload": {"ingest_state": "live"}, "filter": TENANT_FILTER_JSON, "key": "meta"}


async def test_delete_by_filter(created: ScriptedQdrant, store: ServerStore) -> None:
    await store.delete(tenant_filter(["tenant-a"]))
    [sent] = created.sent("POST", "/points/delete")
    assert sent.params == WRITE_PARAMS
    assert sent.body == {"filter": TENANT_FILTER_JSON}


async def test_facet_is_exact_and_filtered(created: ScriptedQdrant, store: ServerStore) -> None:
    created.results["facet"] = {"hits": [{"value": "tenant-a", "count": 3}, {"value": "tenant-b", "count": 1}]}
    counts = await store.facet("meta.collection_name", tenant_filter(["tenant-a"]), limit=25)
    [sent] = created.sent("POST", "/facet")
    assert sent.body == {"key": "meta.collection_name", "limit": 25, "filter": TENANT_FILTER_JSON, "exact": True}
    assert counts == [FacetCount(value="tenant-a", count=3), FacetCount(value="tenant-b", count=1)]


async def test_count_is_exact(created: ScriptedQdrant, store: ServerStore) -> None:
    created.results["points/count"] = {"count": 17}
    assert await store.count(tenant_filter(["tenant-a"])) == 17
    assert await store.count(None) == 17
    first, second = created.sent("POST", "/points/count")
    assert first.body == {"filter": TENANT_FILTER_JSON, "exact": True}
    assert second.body == {"exact": True}


async def test_scroll_sends_the_offset_and_returns_the_next_one(created: ScriptedQdrant, store: ServerStore) -> None:
    created.results["points/scroll"] = {
        "points": [{"id": POINT_A, "payload": {"meta": {"file_id": "f1"}}}],
        "next_page_offset": POINT_B,
    }
    page, next_offset = await store.scroll(
        tenant_filter(["tenant-a"]), limit=1, offset=POINT_A, with_payload=["meta.file_id"]
    )
    [sent] = created.sent("POST", "/points/scroll")
    assert sent.body == {
        "offset": POINT_A,
        "limit": 1,
        "filter": TENANT_FILTER_JSON,
        "with_payload": ["meta.file_id"],
        "with_vector": False,
    }
    assert page == [PointRecord(point_id=POINT_A, payload={"meta": {"file_id": "f1"}})]
    assert next_offset == POINT_B


async def test_retrieve_posts_the_ids_and_the_payload_keys(created: ScriptedQdrant, store: ServerStore) -> None:
    created.results["points"] = [{"id": POINT_B, "payload": {"meta": {"file_id": "f2"}}}]
    records = await store.retrieve([POINT_A, POINT_B], with_payload=["meta.file_id"])
    [sent] = created.sent("POST", "/points")
    assert sent.body == {"ids": [POINT_A, POINT_B], "with_payload": ["meta.file_id"], "with_vector": False}
    assert records == [PointRecord(point_id=POINT_B, payload={"meta": {"file_id": "f2"}})]


async def test_the_last_scroll_page_has_no_next_offset(created: ScriptedQdrant, store: ServerStore) -> None:
    created.results["points/scroll"] = {"points": [], "next_page_offset": None}
    assert await store.scroll(None, limit=10) == ([], None)


# -- errors ---------------------------------------------------------------------------------


async def test_connection_refused_is_unavailable(server_settings: ContractSettings) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    store = ServerStore(URL, COLLECTION, transport=httpx.MockTransport(refuse))
    try:
        with pytest.raises(QdrantUnavailableError):
            await bootstrap_collection(store, server_settings)
        with pytest.raises(QdrantUnavailableError):
            await store.count(None)
    finally:
        await store.close()


async def test_a_missing_collection_is_typed(server: ScriptedQdrant, store: ServerStore) -> None:
    with pytest.raises(CollectionMissingError) as caught:
        await store.count(None)
    assert caught.value.collection == COLLECTION
    with pytest.raises(CollectionMissingError):
        await store.query(models.QueryRequest(query=[1.0, 0.0, 0.0], using="text-dense"))


async def test_a_rejected_text_query_marks_the_missing_text_index(created: ScriptedQdrant, store: ServerStore) -> None:
    created.failure = (400, "Bad request: Field lexical_xx has no text index with scoring, required by BM25")
    with pytest.raises(StoreRequestError, match="400") as caught:
        await store.query(models.QueryRequest(query=models.TextQuery(text="x"), using="lexical_xx"))
    assert caught.value.missing_text_index is True


async def test_another_rejected_request_is_not_a_missing_text_index(
    created: ScriptedQdrant, store: ServerStore
) -> None:
    created.failure = (400, "Bad request: Wrong input: Not existing vector name: text-sparse")
    with pytest.raises(StoreRequestError, match="Not existing vector name") as caught:
        await store.query(models.QueryRequest(query=[1.0], using="text-sparse"))
    assert caught.value.missing_text_index is False


async def test_a_server_error_is_unavailable(created: ScriptedQdrant, store: ServerStore) -> None:
    created.failure = (500, "Service internal error: RocksDB failure")
    with pytest.raises(QdrantUnavailableError, match="500"):
        await store.count(None)


async def test_a_layout_the_server_rejects_is_a_request_error_with_its_reason_not_an_outage(
    server: ScriptedQdrant, store: ServerStore, server_settings: ContractSettings
) -> None:
    server.create_rejection = (400, "Bad request: Wrong input: Replication factor 3 is larger than the peers (2)")
    with pytest.raises(StoreRequestError, match="Replication factor 3 is larger than the peers"):
        await bootstrap_collection(store, server_settings)
    assert server.created is None


async def test_the_store_names_its_kind_and_collection(store: ServerStore) -> None:
    assert store.kind == "server"
    assert store.collection == COLLECTION

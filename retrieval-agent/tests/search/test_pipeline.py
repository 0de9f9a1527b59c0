"""Golden rankings on fixed vectors in the embedded engine (qdrant-edge), one test per retrieval path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import anyio
import pytest
from qdrant_client import models

from rag_runtime.embedding import ContractEmbedder, QueryVectors, SparseVectorData
from rag_runtime.language_id import language_identifier
from rag_runtime.store import ChunkPoint, ChunkStore, chunk_point
from retrieval_agent.adapters.store import StoreSearch
from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.search import pipeline as pipeline_module
from retrieval_agent.search.pipeline import LinearSearch, RetrievedList
from retrieval_agent.search.postprocess import Hit, rrf_fuse
from retrieval_agent.search.query import FusionParams, hybrid_request
from shared_contract import EmbeddingError, StoreRequestError

from ..conftest import (  # noqa: TID252
    RecordingStore,
    add_chunk,
    as_written_by_2x,
    chunk_meta,
    create_collection,
    create_contract_2_collection,
    leg_fields,
    make_settings,
    without_lexical,
)

pytestmark = pytest.mark.anyio

DIM = 384


def unit(**components: float) -> list[float]:
    vector = [0.0] * DIM
    for key, value in components.items():
        vector[int(key[1:])] = value
    return vector


# name -> (dense, sparse {index: value}, content)
DOCS: dict[str, tuple[list[float], dict[int, float], str]] = {
    "A": (unit(d0=1.0), {5: 1.0}, "alpha apples"),
    "B": (unit(d0=0.8, d1=0.6), {2: 1.0}, "bravo bananas"),
    "C": (unit(d0=0.6, d1=0.8), {1: 1.0}, "charlie cherries zebra"),
    "D": (unit(d1=1.0), {1: 0.5, 3: 1.0}, "delta dates zebra zebra"),
}
QUERY = QueryVectors(dense=unit(d0=1.0), sparse=SparseVectorData(indices=[1], values=[1.0]))


class FixedMultilingual:
    """The multilingual model's stand-in: one fixed query vector; English chunks need no vector."""

    def __init__(self, vector: list[float]) -> None:
        self.vector = vector
        self.queries: list[str] = []

    async def aembed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return self.vector


class FixedEmbedder:
    """Returns the same query vectors for any text (the golden tests fix the vectors)."""

    sparse: Any = object()

    def __init__(self, vectors: QueryVectors = QUERY, multilingual: FixedMultilingual | None = None) -> None:
        self.vectors = vectors
        self.multilingual = multilingual
        self.calls: list[tuple[str, bool]] = []
        self.finished = False

    async def aembed_query(
        self, text: str, *, with_sparse: bool = True, on_model_run: Callable[[], None] | None = None
    ) -> QueryVectors:
        self.calls.append((text, with_sparse))
        if on_model_run is not None:
            on_model_run()
        return self.vectors if with_sparse else QueryVectors(dense=self.vectors.dense, sparse=None)

    def embed_sparse_query(self, text: str) -> SparseVectorData | None:
        return self.vectors.sparse


def meta(name: str, tenant: str, **extra: Any) -> dict[str, Any]:
    return chunk_meta(tenant, name, 1, 0, **extra)


async def make_store(
    store_factory: Callable[..., ChunkStore],
    *,
    sparse: bool,
    lexical: bool = True,
    extra: list[Any] | None = None,
    contract_2: bool = False,
) -> ChunkStore:
    """``contract_2``: a collection and points as 2.x services wrote them (no ``meta.live_in``)."""
    store = store_factory()
    if contract_2:
        await create_contract_2_collection(store, make_settings(enable_sparse_embeddings=sparse))
    else:
        await create_collection(store, make_settings(), sparse=sparse, lexical=lexical)
    points = [
        chunk_point(
            name,
            content,
            meta(name, "t"),
            dense=dense,
            sparse=SparseVectorData(indices=list(terms), values=list(terms.values())) if sparse else None,
        )
        for name, (dense, terms, content) in DOCS.items()
    ]
    # A twin of A that matches every leg best, in another tenant: must never show up for tenant "t".
    points.append(
        chunk_point(
            "X",
            "zebra zebra zebra other",
            meta("X", "other"),
            dense=unit(d0=1.0),
            sparse=SparseVectorData(indices=[1], values=[9.0]) if sparse else None,
        )
    )
    points.extend(extra or [])
    if not lexical:
        points = [without_lexical(point) for point in points]
    if contract_2:
        points = [as_written_by_2x(point) for point in points]
    await store.upsert(points)
    return store


def pipeline(
    store: ChunkStore, embedder: ContractEmbedder | FixedEmbedder | None = None, **overrides: Any
) -> LinearSearch:
    settings = make_settings(**overrides)
    return LinearSearch(
        settings,
        store=StoreSearch(store, settings),
        # FixedEmbedder stands in (duck-typed) for the one method the pipeline calls.
        embedder=cast(ContractEmbedder, embedder or FixedEmbedder()),
        metrics=SearchMetrics(),
    )


def names(hits: list[Hit]) -> list[str]:
    return [hit.meta["name"] for hit in hits]


async def retrieve(
    search: LinearSearch, limit: int = 4, query: str = "zebra", tenants: tuple[str, ...] = ("t",)
) -> RetrievedList:
    return await search.retrieve(query, list(tenants), limit)


async def test_native_hybrid_golden_ranking_matches_rrf_formula(store_factory: Callable[..., ChunkStore]) -> None:
    store = await make_store(store_factory, sparse=True)
    search = pipeline(
        store,
        hybrid_fusion="rrf",
        hybrid_rrf_k=60,
        hybrid_dense_weight=1.0,
        hybrid_sparse_weight=1.0,
        hybrid_lexical_weight=0.0,
    )
    result = await retrieve(search)
    assert result.path == "native_hybrid"
    # dense: A B C D; sparse: C D  ->  RRF(k=60): C D A B
    assert names(result.hits) == ["C", "D", "A", "B"]
    assert [round(hit.score, 6) for hit in result.hits] == [
        round(1 / 62 + 1 / 60, 6),
        round(1 / 63 + 1 / 61, 6),
        round(1 / 60, 6),
        round(1 / 61, 6),
    ]
    # Client-side fusion (BM25 fallback, cross-query merge) uses the same scale (the engine's is float32).
    hit = {name: Hit(point_id=name, content=name, meta={"name": name}) for name in "ABCD"}
    client_side = rrf_fuse([[hit["A"], hit["B"], hit["C"], hit["D"]], [hit["C"], hit["D"]]], k=60, limit=4)
    assert [h.meta["name"] for h in client_side] == names(result.hits)
    assert [h.score for h in client_side] == pytest.approx([h.score for h in result.hits], rel=1e-6)


async def test_three_legs_golden_ranking_with_rrf(store_factory: Callable[..., ChunkStore]) -> None:
    store = RecordingStore(await make_store(store_factory, sparse=True))
    search = pipeline(
        store,
        hybrid_fusion="rrf",
        hybrid_rrf_k=60,
        hybrid_dense_weight=1.0,
        hybrid_sparse_weight=1.0,
        hybrid_lexical_weight=1.0,
    )
    result = await retrieve(search)
    assert leg_fields(store.queries[-1]) == ["text-dense", "text-sparse", "lexical_en"]
    # dense: A B C D; sparse: C D; BM25 "zebra": D (tf 2) C
    assert names(result.hits) == ["C", "D", "A", "B"]
    assert [round(hit.score, 6) for hit in result.hits] == [
        round(1 / 62 + 1 / 60 + 1 / 61, 6),
        round(1 / 63 + 1 / 61 + 1 / 60, 6),
        round(1 / 60, 6),
        round(1 / 61, 6),
    ]


@pytest.mark.parametrize(
    ("dense_weight", "sparse_weight", "lexical_weight", "expected", "path"),
    [
        (1.0, 0.0, 0.0, ["A", "B", "C", "D"], "dense"),
        (0.0, 1.0, 0.0, ["C", "D"], "native_hybrid"),
        (0.0, 0.0, 1.0, ["D", "C"], "native_hybrid"),
        (3.0, 1.0, 0.0, ["C", "D", "A", "B"], "native_hybrid"),
    ],
)
async def test_hybrid_weights(
    store_factory: Callable[..., ChunkStore],
    dense_weight: float,
    sparse_weight: float,
    lexical_weight: float,
    expected: list[str],
    path: str,
) -> None:
    search = pipeline(
        await make_store(store_factory, sparse=True),
        hybrid_fusion="rrf",
        hybrid_dense_weight=dense_weight,
        hybrid_sparse_weight=sparse_weight,
        hybrid_lexical_weight=lexical_weight,
    )
    result = await retrieve(search)
    assert result.path == path
    assert names(result.hits) == expected


async def test_dense_path_scores_are_normalised_cosine(store_factory: Callable[..., ChunkStore]) -> None:
    embedder = FixedEmbedder()
    store = RecordingStore(await make_store(store_factory, sparse=True))
    result = await retrieve(pipeline(store, embedder, enable_hybrid_search=False))
    assert result.path == "dense"
    assert names(result.hits) == ["A", "B", "C", "D"]
    assert [round(hit.score, 4) for hit in result.hits] == [1.0, 0.9, 0.8, 0.5]
    assert embedder.calls == [("zebra", False)]
    # Hybrid off: the (cached) capabilities say how to filter; no language lookups, one store call.
    assert (store.infos, store.facets, len(store.queries)) == (1, [], 1)
    [request] = store.queries
    assert request.filter == models.Filter(
        must=[models.FieldCondition(key="meta.live_in", match=models.MatchAny(any=["t"]))]
    )


async def test_collection_without_sparse_fuses_dense_and_bm25_legs(store_factory: Callable[..., ChunkStore]) -> None:
    embedder = FixedEmbedder()
    store = RecordingStore(await make_store(store_factory, sparse=False))
    result = await retrieve(pipeline(store, embedder))
    assert result.path == "native_hybrid"
    assert store.hybrid_legs_sent() == [["lexical_en"], ["text-dense"]]
    # Defaults (z-score, dense 1.2, lexical 1): dense A B C D (cosine 1, 0.8, 0.6, 0), BM25 D C.
    assert names(result.hits) == ["A", "B", "D", "C"]
    assert embedder.calls == [("zebra", False)]


async def test_bm25_last_resort_without_sparse_or_text_indexes_is_cached(
    store_factory: Callable[..., ChunkStore],
) -> None:
    store = RecordingStore(await make_store(store_factory, sparse=False, lexical=False))
    search = pipeline(store)
    first = await retrieve(search)
    assert first.path == "bm25_fallback"
    # The same ranking the engine's dense + BM25 fusion gives (client BM25, same RRF formula).
    assert names(first.hits) == ["D", "C", "A", "B"]
    second = await retrieve(search)
    assert second.path == "bm25_fallback"
    text = search.metrics.render().decode()
    assert 'bm25_cache_total{result="miss"} 1.0' in text
    assert 'bm25_cache_total{result="hit"} 1.0' in text
    assert 'search_path_total{path="bm25_fallback"} 2.0' in text


def pending_point(*, sparse: bool) -> ChunkPoint:
    """A chunk of a run still writing that matches every leg best."""
    return chunk_point(
        "P",
        "zebra zebra zebra pending",
        meta("P", "t", ingest_state="pending"),
        dense=unit(d0=1.0),
        sparse=SparseVectorData(indices=[1], values=[9.0]) if sparse else None,
    )


@pytest.mark.parametrize(
    ("sparse", "lexical", "hybrid"),
    [(True, True, True), (True, True, False), (False, True, True), (True, False, True), (False, False, True)],
)
async def test_no_path_crosses_tenants_or_shows_pending_chunks(
    store_factory: Callable[..., ChunkStore], sparse: bool, lexical: bool, hybrid: bool
) -> None:
    store = await make_store(store_factory, sparse=sparse, lexical=lexical, extra=[pending_point(sparse=sparse)])
    result = await retrieve(pipeline(store, enable_hybrid_search=hybrid), limit=10)
    assert sorted(names(result.hits)) == ["A", "B", "C", "D"]


@pytest.mark.parametrize("hybrid", [True, False])
async def test_a_contract_2_store_is_searched_with_the_tenant_and_pending_conditions(
    store_factory: Callable[..., ChunkStore], hybrid: bool
) -> None:
    extra = [pending_point(sparse=True)]
    store = RecordingStore(await make_store(store_factory, sparse=True, extra=extra, contract_2=True))
    result = await retrieve(pipeline(store, enable_hybrid_search=hybrid), limit=10)
    assert sorted(names(result.hits)) == ["A", "B", "C", "D"]
    requests = [request for sent in store.queries for request in (sent if isinstance(sent, list) else [sent])]
    assert requests
    for request in requests:
        # Every leg, IDF corpus and read on the tenant and "not pending" conditions.
        wire = request.model_dump_json()
        assert "meta.live_in" not in wire
        assert "meta.ingest_state" in wire


async def test_multi_query_merge_is_rrf_across_queries(store_factory: Callable[..., ChunkStore]) -> None:
    search = pipeline(await make_store(store_factory, sparse=True))
    a, b, c = (Hit(point_id=n, content=n, meta={"name": n}) for n in "abc")
    merged = search.merge([[a, b], [c, b], [b]], limit=3)
    assert names(merged) == ["b", "a", "c"]
    assert merged[0].score == pytest.approx(1 / 61 + 1 / 61 + 1 / 60)


async def test_spare_hits_of_a_merge_never_reorder_the_first_ones(store_factory: Callable[..., ChunkStore]) -> None:
    search = pipeline(await make_store(store_factory, sparse=True))
    a, b, c, d = (Hit(point_id=n, content=n, meta={"name": n}) for n in "abcd")
    # Deep lists would put d (third in both) above a and c (first in one each).
    lists = [[a, b, d], [c, b, d]]
    assert names(search.merge(lists, limit=3)) == ["b", "d", "a"]
    # With depth 2 the first two are what lists of two give; the spare ones follow by the whole lists.
    assert names(search.merge([ranking[:2] for ranking in lists], limit=2)) == ["b", "a"]
    assert names(search.merge(lists, limit=4, depth=2)) == ["b", "a", "d", "c"]


def standardised_by_hand(scores: dict[str, float]) -> dict[str, float]:
    """(score - min) / population std over one leg's candidates (the z-score fusion's definition)."""
    values = list(scores.values())
    mean = sum(values) / len(values)
    std = (sum((value - mean) ** 2 for value in values) / len(values)) ** 0.5
    return {name: (value - min(values)) / std for name, value in scores.items()}


async def test_default_fusion_is_zscore_over_three_legs(store_factory: Callable[..., ChunkStore]) -> None:
    store = RecordingStore(await make_store(store_factory, sparse=True))
    result = await retrieve(pipeline(store))
    # The term legs in one batch (sent while the dense model runs), the dense leg, then one read of
    # the fused hits.
    assert store.hybrid_legs_sent() == [["text-sparse", "lexical_en"], ["text-dense"]]
    assert len(store.queries) == 3
    # English chunks and an English dense model: weights dense 1.2, sparse 0.6, BM25 1.0.
    dense = standardised_by_hand({"A": 1.0, "B": 0.8, "C": 0.6, "D": 0.0})  # cosines
    # Two candidates in a leg standardise to 2 and 0 whatever their raw scores.
    sparse = {"C": 2.0, "D": 0.0}
    bm25 = {"D": 2.0, "C": 0.0}  # "zebra" twice in D
    expected = {name: 1.2 * dense[name] + 0.6 * sparse.get(name, 0.0) + bm25.get(name, 0.0) for name in "ABCD"}
    assert names(result.hits) == ["A", "C", "B", "D"]
    assert [hit.score for hit in result.hits] == pytest.approx([expected[n] for n in names(result.hits)], rel=1e-5)
    # The cosine comes with the read: it feeds the calibrated relevance.
    assert [hit.cosine for hit in result.hits] == pytest.approx([1.0, 0.6, 0.8, 0.0], abs=1e-5)


class DenseWaitsForTheTermLegs(FixedEmbedder):
    """Signals that the dense model runs, then holds its vector back until the store has had the
    term legs: a pipeline that waited for the vector before sending them would wait forever."""

    def __init__(self, term_legs_sent: anyio.Event) -> None:
        super().__init__()
        self.term_legs_sent = term_legs_sent

    async def aembed_query(
        self, text: str, *, with_sparse: bool = True, on_model_run: Callable[[], None] | None = None
    ) -> QueryVectors:
        assert on_model_run is not None
        on_model_run()
        with anyio.fail_after(5):
            await self.term_legs_sent.wait()
        self.finished = True
        return self.vectors


class BatchSignallingStore(RecordingStore):
    """Sets ``batch_sent`` when a batch of legs reaches the store; ``reject`` fails every batch."""

    def __init__(self, inner: ChunkStore, batch_sent: anyio.Event, *, reject: bool = False) -> None:
        super().__init__(inner)
        self.batch_sent = batch_sent
        self.reject = reject

    async def query_batch(self, requests: Any) -> Any:
        self.batch_sent.set()
        if self.reject:
            self.queries.append(list(requests))
            raise StoreRequestError("embedded store rejected query batch: bad request")
        return await super().query_batch(requests)


async def test_the_term_legs_are_sent_while_the_dense_model_runs(store_factory: Callable[..., ChunkStore]) -> None:
    sent = anyio.Event()
    store = BatchSignallingStore(await make_store(store_factory, sparse=True), sent)
    result = await retrieve(pipeline(store, DenseWaitsForTheTermLegs(sent)))
    assert store.hybrid_legs_sent() == [["text-sparse", "lexical_en"], ["text-dense"]]
    assert names(result.hits) == ["A", "C", "B", "D"]  # the z-score ranking above


async def test_an_embedding_that_fails_before_the_model_runs_sends_no_leg(
    store_factory: Callable[..., ChunkStore],
) -> None:
    class FailingEmbedder(FixedEmbedder):
        async def aembed_query(self, text: str, **_: Any) -> QueryVectors:
            raise EmbeddingError("dense embedding failed: the model is gone")

    store = RecordingStore(await make_store(store_factory, sparse=True))
    with pytest.raises(EmbeddingError, match="the model is gone"):
        await retrieve(pipeline(store, FailingEmbedder()))
    assert store.queries == []


async def test_a_rejected_term_leg_is_raised_once_the_dense_model_is_done(
    store_factory: Callable[..., ChunkStore],
) -> None:
    sent = anyio.Event()
    store = BatchSignallingStore(await make_store(store_factory, sparse=True), sent, reject=True)
    embedder = DenseWaitsForTheTermLegs(sent)
    with pytest.raises(StoreRequestError, match="bad request"):
        await retrieve(pipeline(store, embedder))
    assert embedder.finished  # the worker's run is waited for, never left running behind the error
    assert store.hybrid_legs_sent() == [["text-sparse", "lexical_en"]]


async def test_zscore_weights_trade_the_legs(store_factory: Callable[..., ChunkStore]) -> None:
    store = await make_store(store_factory, sparse=True)
    lexical_heavy = await retrieve(
        pipeline(store, hybrid_dense_weight=1.0, hybrid_sparse_weight=0.0, hybrid_lexical_weight=2.0)
    )
    # dense A 2.67, B 2.14, C 1.60, D 0; BM25 x2: D 4, C 0
    assert names(lexical_heavy.hits) == ["D", "A", "B", "C"]
    dense_heavy = await retrieve(
        pipeline(store, hybrid_dense_weight=2.0, hybrid_sparse_weight=0.0, hybrid_lexical_weight=1.0)
    )
    assert names(dense_heavy.hits) == ["A", "B", "C", "D"]


async def test_default_fusion_with_rrf(store_factory: Callable[..., ChunkStore]) -> None:
    # dense: A B C D; sparse: C D; BM25: D C. English chunks and an English dense model:
    # k=5, weights dense 1.2 / sparse 0.6 / lexical 1.0.
    result = await retrieve(pipeline(await make_store(store_factory, sparse=True), hybrid_fusion="rrf"))
    assert names(result.hits) == ["C", "D", "A", "B"]
    # Weighted RRF: 1 / ((rank + 1) / w + k - 1), 0-based rank.
    assert round(result.hits[0].score, 6) == round(1 / (3 / 1.2 + 4) + 1 / (1 / 0.6 + 4) + 1 / (2 / 1.0 + 4), 6)


async def test_a_vanished_text_index_retries_without_bm25_legs_and_is_counted(
    store_factory: Callable[..., ChunkStore],
) -> None:
    store = RecordingStore(await make_store(store_factory, sparse=True), fail_text_queries=True)
    search = pipeline(store)
    result = await retrieve(search)
    assert result.path == "native_hybrid"
    # dense (x1.2) and sparse (x0.6) alone: A 3.21, C 1.92 + 1.2, B 2.57, D 0
    assert names(result.hits) == ["A", "C", "B", "D"]
    assert store.hybrid_legs_sent() == [["text-sparse", "lexical_en"], ["text-sparse"], ["text-dense"]]
    # Marked unsupported for a while: the next query sends no BM25 leg at all.
    await retrieve(search)
    assert store.hybrid_legs_sent()[3:] == [["text-sparse"], ["text-dense"]]
    assert "lexical_retries_total 1.0" in search.metrics.render().decode()


async def test_a_vanished_text_index_without_sparse_falls_back_to_client_bm25(
    store_factory: Callable[..., ChunkStore],
) -> None:
    store = RecordingStore(await make_store(store_factory, sparse=False), fail_text_queries=True)
    search = pipeline(store)
    first = await retrieve(search)
    assert first.path == "bm25_fallback"
    assert names(first.hits) == ["D", "C", "A", "B"]
    assert (await retrieve(search)).path == "bm25_fallback"
    assert "lexical_retries_total 1.0" in search.metrics.render().decode()


async def test_other_store_rejections_are_raised_not_retried(store_factory: Callable[..., ChunkStore]) -> None:
    store = await make_store(store_factory, sparse=True)
    search = pipeline(store, embedder=FixedEmbedder(QueryVectors(dense=[1.0, 0.0], sparse=QUERY.sparse)))
    with pytest.raises(StoreRequestError) as caught:
        await retrieve(search)
    assert caught.value.missing_text_index is False


# -- language-aware BM25 with the real models --------------------------------------------------


async def test_norwegian_inflections_are_found_only_through_the_stemmed_leg(
    store_factory: Callable[..., ChunkStore], embedder: ContractEmbedder
) -> None:
    inner = store_factory()
    await create_collection(inner, make_settings())
    text = "Hundene løp over broene"
    await add_chunk(inner, embedder, "no-1", text, chunk_meta("kb-no", "no.txt", 1, 0, languages=["no"]))
    await add_chunk(inner, embedder, "no-2", "Katten sov i sola", chunk_meta("kb-no", "no.txt", 2, 1, languages=["no"]))
    # The same text where no stemmer applies: the unstemmed fallback field.
    await add_chunk(inner, embedder, "raw-1", text, chunk_meta("kb-raw", "raw.txt", 1, 0, languages=["ja"]))
    store = RecordingStore(inner)
    search = pipeline(
        store, embedder, hybrid_dense_weight=0.0, hybrid_multilingual_weight=0.0, hybrid_sparse_weight=0.0
    )

    stemmed = await search.retrieve("hund bro", ["kb-no"], 5)
    assert store.hybrid_legs_sent()[-1] == ["lexical_no"]
    assert [hit.content for hit in stemmed.hits] == [text]

    unstemmed = await search.retrieve("hund bro", ["kb-raw"], 5)
    assert store.hybrid_legs_sent()[-1] == ["lexical_any"]
    assert unstemmed.hits == []


async def test_bm25_and_sparse_idf_are_per_tenant(
    store_factory: Callable[..., ChunkStore], embedder: ContractEmbedder
) -> None:
    store = store_factory()
    await create_collection(store, make_settings())
    tenant_a = [
        "The reactor cooling pump failed during the night shift.",
        "Quarterly budget review for the marketing department.",
        "Replace the pump seal before restarting the reactor.",
    ]
    for index, text in enumerate(tenant_a):
        await add_chunk(store, embedder, f"a-{index}", text, chunk_meta("kb-a", f"a{index}.txt", 1, index))
    query = "reactor pump"
    vectors = embedder.embed_query(query, with_sparse=True)
    request = hybrid_request(
        dense=vectors.dense,
        sparse=vectors.sparse,
        text=query,
        lexical_fields=["lexical_en"],
        collection_names=["kb-a"],
        limit=3,
        params=FusionParams(k=10, dense_weight=1.0, sparse_weight=1.0, lexical_weight=1.0, prefetch_limit=3),
        sparse_idf=True,
    )
    assert request is not None
    assert isinstance(request.prefetch, list)
    sparse_leg, bm25_leg = request.prefetch[1], request.prefetch[2]

    async def top_score(leg: models.Prefetch, *, scoped: bool = True) -> float:
        # The leg on its own, as the engine scores it before fusion.
        alone = models.QueryRequest(
            query=leg.query, using=leg.using, filter=leg.filter, params=leg.params if scoped else None, limit=1
        )
        return (await store.query(alone))[0].score

    before = {name: await top_score(leg) for name, leg in (("sparse", sparse_leg), ("bm25", bm25_leg))}
    global_before = await top_score(bm25_leg, scoped=False)
    # Tenant B: many documents full of the query terms, which would change a collection-wide IDF.
    for index in range(12):
        text = f"reactor pump reactor pump maintenance log {index}"
        await add_chunk(store, embedder, f"b-{index}", text, chunk_meta("kb-b", f"b{index}.txt", 1, index))
    after = {name: await top_score(leg) for name, leg in (("sparse", sparse_leg), ("bm25", bm25_leg))}
    assert after == before
    # Without the IDF scope tenant B's documents do change tenant A's scores.
    assert await top_score(bm25_leg, scoped=False) != global_before


# -- the multilingual leg (text-dense-multilingual) --------------------------------------------


async def multilingual_store(store_factory: Callable[..., ChunkStore]) -> RecordingStore:
    """Norwegian chunks N1-N3 with multilingual vectors (the order the leg must give: N2, N3, N1),
    their English twins E1-E3 without, each language in its own tenant plus both in "mixed"."""
    store = store_factory()
    await create_collection(store, make_settings())
    points = []
    multilingual = {"N1": unit(d10=1.0), "N2": unit(d11=1.0), "N3": unit(d10=0.6, d11=0.8)}
    for tenant_names in (("kb-no", "N"), ("kb-en", "E"), ("mixed", "N"), ("mixed", "E")):
        tenant, prefix = tenant_names
        for index in (1, 2, 3):
            name = f"{prefix}{index}"
            points.append(
                chunk_point(
                    f"{tenant}/{name}",
                    f"tekst nummer {index}" if prefix == "N" else f"text number {index}",
                    meta(name, tenant, languages=["nb"] if prefix == "N" else ["en"]),
                    dense=unit(d0=1.0 / index),
                    sparse=None,
                    multilingual=multilingual[name] if prefix == "N" else None,
                )
            )
    await store.upsert(points)
    return RecordingStore(store)


async def test_a_norwegian_tenant_is_searched_on_the_multilingual_vector_not_the_english_one(
    store_factory: Callable[..., ChunkStore],
) -> None:
    store = await multilingual_store(store_factory)
    model = FixedMultilingual(unit(d11=1.0))
    search = pipeline(store, FixedEmbedder(multilingual=model), hybrid_sparse_weight=0.0, hybrid_lexical_weight=0.0)

    result = await search.retrieve("hvilken tekst", ["kb-no"], 3)

    # The English model's weight over Norwegian is 0: its leg is not sent; the multilingual one is.
    assert store.hybrid_legs_sent() == [["text-dense-multilingual"]]
    assert model.queries == ["hvilken tekst"]
    assert names(result.hits) == ["N2", "N3", "N1"]


async def test_an_english_tenant_never_embeds_or_sends_the_multilingual_leg(
    store_factory: Callable[..., ChunkStore],
) -> None:
    store = await multilingual_store(store_factory)
    model = FixedMultilingual(unit(d11=1.0))
    search = pipeline(store, FixedEmbedder(multilingual=model))

    await search.retrieve("which text", ["kb-en"], 3)

    assert store.hybrid_legs_sent() == [["text-sparse", "lexical_en"], ["text-dense"]]
    assert model.queries == []  # not even embedded: an English store never loads the second model


async def test_over_a_mixed_tenant_each_dense_leg_is_weighted_by_the_share_of_its_chunks(
    store_factory: Callable[..., ChunkStore],
) -> None:
    store = await multilingual_store(store_factory)
    # Without routing by the query's language ("tekst" reads as Norwegian), the tenants' share alone.
    search = pipeline(store, FixedEmbedder(multilingual=FixedMultilingual(unit(d11=1.0))), query_language_routing=False)

    params = search.fusion(10, {"en": 3, "no": 1}, multilingual=True)
    assert (params.dense_weight, params.multilingual_weight) == pytest.approx((1.2 * 0.75, 1.2 * 0.25))
    result = await search.retrieve("tekst", ["mixed"], 6)
    assert store.hybrid_legs_sent()[-2:] == [
        ["text-sparse", "lexical_en", "lexical_no"],
        ["text-dense", "text-dense-multilingual"],
    ]
    assert set(names(result.hits)) == {"N1", "N2", "N3", "E1", "E2", "E3"}


async def test_over_a_mixed_tenant_a_question_is_read_by_the_dense_model_of_its_language(
    store_factory: Callable[..., ChunkStore],
) -> None:
    store = await multilingual_store(store_factory)
    search = pipeline(store, FixedEmbedder(multilingual=FixedMultilingual(unit(d11=1.0))))

    await search.retrieve("Hvor mange tekster står det i samlingen vår?", ["mixed"], 6)
    assert store.hybrid_legs_sent()[-1] == ["text-dense-multilingual"]
    await search.retrieve("How many texts are there in our collection?", ["mixed"], 6)
    assert store.hybrid_legs_sent()[-1] == ["text-dense"]


async def test_over_tenants_the_dense_model_reads_no_query_is_sent_to_the_language_detector(
    store_factory: Callable[..., ChunkStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    detected: list[str] = []
    detector = language_identifier()

    class Spy:
        def query_language(self, text: str) -> str | None:
            detected.append(text)
            return detector.query_language(text)

    monkeypatch.setattr(pipeline_module, "language_identifier", Spy)
    store = await multilingual_store(store_factory)
    search = pipeline(store, FixedEmbedder(multilingual=FixedMultilingual(unit(d11=1.0))))

    await search.retrieve("How many texts are there in our collection?", ["kb-en"], 3)
    assert detected == []
    await search.retrieve("How many texts are there in our collection?", ["mixed"], 3)
    assert detected == ["How many texts are there in our collection?"]


async def test_a_collection_without_the_multilingual_vector_is_searched_without_that_leg(
    store_factory: Callable[..., ChunkStore],
) -> None:
    inner = store_factory()
    await create_collection(inner, make_settings(multilingual_embedding_provider="none"))
    await inner.upsert(
        [chunk_point("kb-no/N1", "tekst", meta("N1", "kb-no", languages=["nb"]), dense=unit(d0=1.0), sparse=None)]
    )
    store = RecordingStore(inner)
    model = FixedMultilingual(unit(d11=1.0))
    search = pipeline(store, FixedEmbedder(multilingual=model))

    result = await search.retrieve("tekst", ["kb-no"], 3)

    assert store.hybrid_legs_sent() == [["text-sparse", "lexical_no"]]
    assert model.queries == []
    assert names(result.hits) == ["N1"]


async def test_a_language_written_after_the_capabilities_were_read_is_searched_at_once(
    store_factory: Callable[..., ChunkStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first chunks of a language create its text index: a search right after must not wait for
    # the cached capabilities (CAPABILITY_CACHE_TTL_SECONDS) to see it, nor skip the tenants' mix.
    monkeypatch.setattr(pipeline_module, "CAPABILITY_REFRESH_SECONDS", 0.0)
    inner = store_factory()
    await create_collection(inner, make_settings())
    store = RecordingStore(inner)
    search = pipeline(
        store, FixedEmbedder(multilingual=FixedMultilingual(unit(d11=1.0))), capability_cache_ttl_seconds=600
    )
    assert (await search.retrieve("biler", ["kb-no"], 3)).hits == []  # no text index exists yet
    await inner.upsert(
        [
            chunk_point(
                "kb-no/N1",
                "biler og busser",
                meta("N1", "kb-no", languages=["nb"]),
                dense=unit(d0=1.0),
                sparse=None,
                multilingual=unit(d11=1.0),
            )
        ]
    )
    result = await search.retrieve("biler", ["kb-no"], 3)
    assert store.hybrid_legs_sent()[-2:] == [["text-sparse", "lexical_no"], ["text-dense-multilingual"]]
    assert names(result.hits) == ["N1"]

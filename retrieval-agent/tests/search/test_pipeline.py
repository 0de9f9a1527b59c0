"""Golden rankings on fixed vectors in an embedded Qdrant, one test per retrieval path."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from qdrant_client import QdrantClient, models

from retrieval_agent.adapters.qdrant import QdrantSearch
from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.search.pipeline import LinearSearch
from retrieval_agent.search.postprocess import Hit, rrf_fuse
from shared_contract import (
    DENSE_VECTOR,
    PAYLOAD_CONTENT,
    SPARSE_VECTOR,
    QueryVectors,
    SparseVectorData,
    bootstrap_collection,
)

from ..conftest import make_settings  # type: ignore[import-not-found]  # noqa: TID252

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


class FixedEmbedder:
    """Returns the same query vectors for any text (the golden tests fix the vectors)."""

    sparse: Any = object()

    def __init__(self, vectors: QueryVectors = QUERY) -> None:
        self.vectors = vectors
        self.calls: list[tuple[str, bool]] = []

    async def aembed_query(self, text: str, *, with_sparse: bool = True) -> QueryVectors:
        self.calls.append((text, with_sparse))
        return self.vectors if with_sparse else QueryVectors(dense=self.vectors.dense, sparse=None)


def make_client(*, sparse: bool, tenant_of: dict[str, str] | None = None) -> QdrantClient:
    client = QdrantClient(location=":memory:")
    bootstrap_collection(client, make_settings(enable_sparse_embeddings=sparse))
    points = []
    for index, (name, (dense, sparse_vector, content)) in enumerate(DOCS.items()):
        vector: dict[str, Any] = {DENSE_VECTOR: dense}
        if sparse:
            vector[SPARSE_VECTOR] = models.SparseVector(
                indices=list(sparse_vector), values=list(sparse_vector.values())
            )
        tenant = (tenant_of or {}).get(name, "t")
        points.append(
            models.PointStruct(
                id=index + 1,
                vector=vector,
                payload={"id": name, "content": content, "meta": {"name": name, "collection_name": tenant}},
            )
        )
    # A twin of A in another tenant: must never show up for tenant "t".
    twin: dict[str, Any] = {DENSE_VECTOR: unit(d0=1.0)}
    if sparse:
        twin[SPARSE_VECTOR] = models.SparseVector(indices=[1], values=[9.0])
    points.append(
        models.PointStruct(
            id=99, vector=twin, payload={"content": "zebra other", "meta": {"name": "X", "collection_name": "other"}}
        )
    )
    client.upsert("ingestion_files", points=points, wait=True)
    return client


def pipeline(client: QdrantClient, embedder: FixedEmbedder | None = None, **overrides: Any) -> LinearSearch:
    settings = make_settings(**overrides)
    return LinearSearch(
        settings,
        qdrant=QdrantSearch(client, settings),
        embedder=embedder or FixedEmbedder(),  # type: ignore[arg-type]
        metrics=SearchMetrics(),
    )


def names(hits: list[Hit]) -> list[str]:
    return [hit.meta["name"] for hit in hits]


def retrieve(search: LinearSearch, limit: int = 4) -> Any:
    return anyio.run(lambda: search.retrieve("zebra", ["t"], limit))


def test_native_hybrid_golden_ranking_matches_rrf_formula() -> None:
    search = pipeline(make_client(sparse=True), hybrid_rrf_k=60, hybrid_dense_weight=1.0, hybrid_sparse_weight=1.0)
    result = retrieve(search)
    assert result.path == "native_hybrid"
    # dense: A B C D; sparse: C D  ->  RRF(k=60): C D A B
    assert names(result.hits) == ["C", "D", "A", "B"]
    assert [round(hit.score, 6) for hit in result.hits] == [
        round(1 / 62 + 1 / 60, 6),
        round(1 / 63 + 1 / 61, 6),
        round(1 / 60, 6),
        round(1 / 61, 6),
    ]
    # Client-side fusion (BM25 fallback, cross-query merge) uses the same scale.
    hit = {name: Hit(point_id=name, content=name, meta={"name": name}) for name in "ABCD"}
    client_side = rrf_fuse([[hit["A"], hit["B"], hit["C"], hit["D"]], [hit["C"], hit["D"]]], k=60, limit=4)
    assert [(h.meta["name"], round(h.score, 9)) for h in client_side] == [
        (h.meta["name"], round(h.score, 9)) for h in result.hits
    ]


@pytest.mark.parametrize(
    ("dense_weight", "sparse_weight", "expected"),
    [(1.0, 0.0, ["A", "B", "C", "D"]), (0.0, 1.0, ["C", "D"]), (3.0, 1.0, ["C", "D", "A", "B"])],
)
def test_hybrid_weights(dense_weight: float, sparse_weight: float, expected: list[str]) -> None:
    search = pipeline(make_client(sparse=True), hybrid_dense_weight=dense_weight, hybrid_sparse_weight=sparse_weight)
    hits = [hit for hit in retrieve(search).hits if hit.score > 0]
    assert names(hits) == expected


def test_dense_path_scores_are_normalised_cosine() -> None:
    embedder = FixedEmbedder()
    result = retrieve(pipeline(make_client(sparse=True), embedder, enable_hybrid_search=False))
    assert result.path == "dense"
    assert names(result.hits) == ["A", "B", "C", "D"]
    assert [round(hit.score, 4) for hit in result.hits] == [1.0, 0.9, 0.8, 0.5]
    assert embedder.calls == [("zebra", False)]


def test_lexical_fallback_uses_qdrant_text_query_when_indexed() -> None:
    client = make_client(sparse=False)
    client.create_payload_index(
        "ingestion_files",
        PAYLOAD_CONTENT,
        models.TextIndexParams(
            type=models.TextIndexType.TEXT, tokenizer=models.TokenizerType.WORD, lowercase=True, scoring=True
        ),
    )
    embedder = FixedEmbedder()
    result = retrieve(pipeline(client, embedder))
    assert result.path == "lexical_fallback"
    # dense: A B C D; BM25 "zebra": D (tf 2) C  ->  C D A B by RRF
    assert names(result.hits)[:2] in (["C", "D"], ["D", "C"])
    assert set(names(result.hits)) == {"A", "B", "C", "D"}
    assert embedder.calls == [("zebra", False)]


def test_bm25_last_resort_without_scoring_index_is_cached() -> None:
    search = pipeline(make_client(sparse=False))
    first = retrieve(search)
    assert first.path == "bm25_fallback"
    assert names(first.hits)[:2] in (["C", "D"], ["D", "C"])
    assert "X" not in names(first.hits)
    second = retrieve(search)
    assert second.path == "bm25_fallback"
    text = search.metrics.render().decode()
    assert 'bm25_cache_total{result="miss"} 1.0' in text
    assert 'bm25_cache_total{result="hit"} 1.0' in text


@pytest.mark.parametrize(("sparse", "hybrid"), [(True, True), (True, False), (False, True)])
def test_no_path_crosses_tenants(sparse: bool, hybrid: bool) -> None:
    result = retrieve(pipeline(make_client(sparse=sparse), enable_hybrid_search=hybrid), limit=10)
    assert "X" not in names(result.hits)
    assert len(result.hits) == 4


def test_multi_query_merge_is_rrf_across_queries() -> None:
    search = pipeline(make_client(sparse=True))
    a, b, c = (Hit(point_id=n, content=n, meta={"name": n}) for n in "abc")
    merged = search.merge([[a, b], [c, b], [b]], limit=3)
    assert names(merged) == ["b", "a", "c"]
    assert merged[0].score == pytest.approx(1 / 61 + 1 / 61 + 1 / 60)


def test_default_fusion_is_the_one_tuned_on_scifact_train() -> None:
    # dense: A B C D; sparse: C D. k=10, weights dense 0.5 / sparse 1: the sparse leg leads.
    result = retrieve(pipeline(make_client(sparse=True)))
    assert names(result.hits) == ["C", "D", "A", "B"]
    # Qdrant's weighted RRF: 1 / ((rank + 1) / w + k - 1), 0-based rank.
    assert round(result.hits[0].score, 6) == round(1 / (1 / 1.0 + 9) + 1 / (3 / 0.5 + 9), 6)

"""The embedded fast path returns exactly what qdrant-client's local mode returns."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import numpy as np
import pytest
from qdrant_client import QdrantClient, models

from retrieval_agent.adapters.embedded_index import EmbeddedIndex
from retrieval_agent.adapters.qdrant import QdrantSearch
from retrieval_agent.search.query import FusionParams, dense_request, hybrid_request, tenant_filter
from shared_contract import QdrantUnavailableError, SparseVectorData, close_qdrant, open_qdrant

from ..conftest import make_settings  # type: ignore[import-not-found]  # noqa: TID252

COLLECTION = "fast-path"
DENSE = "text-dense"
SPARSE = "text-sparse"
KEY = "meta.collection_name"
DIM = 16
VOCAB = 40
TENANTS = ["t0", "t1", "t2", "t3", "t4"]


def _point(index: int, rng: np.random.Generator, dense: np.ndarray[Any, Any]) -> models.PointStruct:
    vector: dict[str, Any] = {DENSE: [float(x) for x in dense]}
    if index % 9:  # every ninth point has no sparse vector
        count = int(rng.integers(1, 8))
        indices = sorted(int(i) for i in rng.choice(VOCAB, count, replace=False))
        # coarse values: many equal sparse scores, so ties are exercised
        vector[SPARSE] = models.SparseVector(indices=indices, values=[round(float(v), 1) for v in rng.random(count)])
    tenant: Any = TENANTS[min(int(rng.exponential(1.2)), len(TENANTS) - 1)]
    if index % 50 == 0:
        tenant = ["t1", "t2"]  # a point listed under two tenants
    return models.PointStruct(
        id=index, vector=vector, payload={"content": f"chunk {index}", "meta": {"collection_name": tenant}}
    )


@pytest.fixture
def store() -> Iterator[tuple[QdrantClient, list[list[float]]]]:
    """~400 points over five uneven tenants, duplicated vectors (ties) and some deleted points."""
    client = open_qdrant(make_settings())  # the process-wide embedded ":memory:" store
    if client.collection_exists(COLLECTION):
        client.delete_collection(COLLECTION)
    client.create_collection(
        COLLECTION,
        vectors_config={DENSE: models.VectorParams(size=DIM, distance=models.Distance.COSINE)},
        sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
    )
    rng = np.random.default_rng(7)
    dense = rng.standard_normal((400, DIM))
    dense[36::37] = dense[35::37][: len(dense[36::37])]  # exact duplicates: equal dense scores
    client.upsert(COLLECTION, [_point(index, rng, dense[index]) for index in range(400)])
    client.delete(COLLECTION, models.PointIdsList(points=list(range(0, 400, 23))))
    yield client, [[float(x) for x in row] for row in dense]
    client.delete_collection(COLLECTION)
    close_qdrant(client)


def _local(client: QdrantClient, request: models.QueryRequest) -> list[models.ScoredPoint]:
    return client.query_points(
        COLLECTION,
        query=request.query,
        using=request.using,
        prefetch=request.prefetch,
        query_filter=request.filter,
        limit=request.limit or 10,
    ).points


def _assert_same(fast: list[models.ScoredPoint] | None, local: list[models.ScoredPoint]) -> None:
    assert fast is not None, "the fast path did not answer"
    assert [point.id for point in fast] == [point.id for point in local]
    assert [point.score for point in fast] == pytest.approx([point.score for point in local], abs=1e-5)
    assert [point.payload for point in fast] == [point.payload for point in local]


def _requests(dense: list[float], sparse: models.SparseVector, tenants: list[str]) -> dict[str, models.QueryRequest]:
    flt = tenant_filter(tenants)
    legs = [
        models.Prefetch(query=dense, using=DENSE, filter=flt, limit=15),
        models.Prefetch(query=sparse, using=SPARSE, filter=flt, limit=15),
    ]
    return {
        "dense": models.QueryRequest(query=dense, using=DENSE, filter=flt, limit=7, with_payload=True),
        "sparse": models.QueryRequest(query=sparse, using=SPARSE, filter=flt, limit=9, with_payload=True),
        "hybrid": models.QueryRequest(
            prefetch=legs, query=models.RrfQuery(rrf=models.Rrf(k=5, weights=[0.7, 1.3])), limit=8, with_payload=True
        ),
        "hybrid-default": models.QueryRequest(prefetch=legs, query=models.FusionQuery(fusion=models.Fusion.RRF)),
        "unfiltered": models.QueryRequest(query=dense, using=DENSE, limit=12),
    }


def test_same_results_as_local_mode(store: tuple[QdrantClient, list[list[float]]]) -> None:
    client, vectors = store
    index = EmbeddedIndex(client, COLLECTION, KEY)
    rng = np.random.default_rng(11)
    for case in range(12):
        tenants = [TENANTS[case % 5], *TENANTS[1 : case % 3]]
        # every third query is a stored (duplicated) vector: equal top scores
        dense = vectors[35] if case % 3 == 0 else [float(x) for x in rng.standard_normal(DIM)]
        count = int(rng.integers(1, 6))
        sparse = models.SparseVector(
            indices=[int(i) for i in rng.choice(VOCAB, count, replace=False)],  # unsorted, like any caller
            values=[float(v) for v in rng.random(count)],
        )
        for name, request in _requests(dense, sparse, tenants).items():
            local = _local(client, request)
            if name != "hybrid-default":
                assert local, f"case {case} {name}: an empty result proves nothing"
            _assert_same(index.query(request), local)


def test_the_pipelines_requests_through_the_adapter(store: tuple[QdrantClient, list[list[float]]]) -> None:
    client, vectors = store
    search = QdrantSearch(client, make_settings(qdrant_index=COLLECTION))
    sparse = SparseVectorData(indices=[3, 5, 8], values=[0.4, 0.9, 0.2])
    params = FusionParams(k=60, weights=(1.0, 1.0), prefetch_limit=20)
    for request in (
        hybrid_request(vectors[3], sparse, ["t0", "t2"], 5, params),
        dense_request(vectors[3], ["t1"], 5),
    ):
        fast = anyio.run(search.query, request)
        _assert_same(fast, _local(client, request))
    assert search.embedded.snapshot() is not None  # answered from the cache, not by local mode


def test_cache_follows_upserts_and_deletes(store: tuple[QdrantClient, list[list[float]]]) -> None:
    client, _ = store
    index = EmbeddedIndex(client, COLLECTION, KEY)
    probe = [1.0] + [0.0] * (DIM - 1)
    request = dense_request(probe, ["t3"], 3)
    before = index.snapshot()
    assert before is not None
    _assert_same(index.query(request), _local(client, request))

    sparse = models.SparseVector(indices=[VOCAB + 1], values=[1.0])
    client.upsert(
        COLLECTION,
        [
            models.PointStruct(
                id=1000,
                vector={DENSE: probe, SPARSE: sparse},
                payload={"content": "new", "meta": {"collection_name": "t3"}},
            )
        ],
    )
    after = index.snapshot()
    assert after is not None
    assert after.generation != before.generation
    fast = index.query(request)
    assert fast is not None
    assert fast[0].id == 1000
    _assert_same(fast, _local(client, request))
    sparse_request = models.QueryRequest(query=sparse, using=SPARSE, filter=tenant_filter(["t3"]), limit=3)
    _assert_same(index.query(sparse_request), _local(client, sparse_request))

    client.delete(COLLECTION, models.PointIdsList(points=[1000]))
    fast = index.query(request)
    assert fast is not None
    assert 1000 not in [point.id for point in fast]
    _assert_same(fast, _local(client, request))
    assert index.query(sparse_request) == []


def test_other_request_shapes_go_to_local_mode(store: tuple[QdrantClient, list[list[float]]]) -> None:
    client, vectors = store
    index = EmbeddedIndex(client, COLLECTION, KEY)
    flt = tenant_filter(["t0"])
    leg = models.Prefetch(query=vectors[0], using=DENSE, filter=flt, limit=5)
    other_key = models.Filter(must=[models.FieldCondition(key="meta.file_id", match=models.MatchAny(any=["x"]))])
    for request in (
        models.QueryRequest(query=vectors[0], using=DENSE, filter=flt, score_threshold=0.5),
        models.QueryRequest(query=vectors[0], using=DENSE, filter=other_key),
        models.QueryRequest(query=models.TextQuery(text="chunk"), using="content", filter=flt),
        models.QueryRequest(prefetch=[leg], query=models.RrfQuery(rrf=models.Rrf(k=2)), filter=flt),
        models.QueryRequest(query=vectors[0][:3], using=DENSE, filter=flt),  # wrong size: local mode raises
    ):
        assert index.query(request) is None


def test_a_server_client_keeps_the_query_api() -> None:
    server = QdrantClient(url="http://127.0.0.1:9", check_compatibility=False, timeout=1)
    request = dense_request([0.1] * DIM, ["t0"], 3)
    assert EmbeddedIndex(server, COLLECTION, KEY).query(request) is None
    # Not through open_qdrant: no shared lock to read under, so no fast path either.
    assert EmbeddedIndex(QdrantClient(location=":memory:"), COLLECTION, KEY).query(request) is None
    search = QdrantSearch(server, make_settings(qdrant_uri="http://127.0.0.1:9", qdrant_index=COLLECTION))
    with pytest.raises(QdrantUnavailableError):  # the request went out over HTTP
        anyio.run(search.query, request)

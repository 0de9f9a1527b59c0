"""Nearest-neighbour legs over several tenants on an optimized embedded store.

The collection builds one HNSW graph per tenant and none over the whole collection, so a graph
search filtered to several tenants walks one tenant's links only. These tests build the graphs
(``optimize``) over two tenants large enough that the engine searches the graph rather than
scanning, and check that the legs search sends find the true neighbours in both tenants.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import anyio
import numpy as np
import pytest
from qdrant_client import models

from rag_runtime.store import ChunkStore, EdgeStore, bootstrap_collection, chunk_point, close_store, open_store
from retrieval_agent.search.query import FusionParams, dense_request, hybrid_legs, leg_requests

from ..conftest import chunk_meta, make_settings  # noqa: TID252

pytestmark = pytest.mark.anyio

DIM = 384
# Past the engine's full-scan threshold (10,000 KB of 384-d float vectors is ~6,700 points) for
# the two tenants together, below it for each: a filter over both takes the graph path, one over a
# single tenant the exact scan, so searching tenant by tenant finds the exact neighbours here.
PER_TENANT = 6_000
TENANTS = ("kb-graph-a", "kb-graph-b")
QUERIES_PER_TENANT = 8


def unit(rows: np.ndarray) -> np.ndarray:
    normalized: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalized


async def optimized_store() -> tuple[ChunkStore, np.ndarray]:
    settings = make_settings()
    store = open_store(settings)
    await bootstrap_collection(store, settings)
    vectors = unit(np.random.default_rng(7).normal(size=(PER_TENANT * len(TENANTS), DIM)).astype(np.float32))
    for start in range(0, len(vectors), 1_000):
        await store.upsert(
            [
                chunk_point(
                    f"p-{index}",
                    f"chunk {index}",
                    chunk_meta(TENANTS[index % len(TENANTS)], f"doc-{index}", 1, 0),
                    dense=vectors[index].tolist(),
                    sparse=None,
                )
                for index in range(start, min(start + 1_000, len(vectors)))
            ]
        )
    assert isinstance(store, EdgeStore)
    await anyio.to_thread.run_sync(store.optimize)
    return store, vectors


@pytest.fixture(scope="module")
def optimized() -> Iterator[tuple[ChunkStore, np.ndarray]]:
    """One optimized store for the module: writing and indexing the points takes seconds."""
    store, vectors = anyio.run(optimized_store)
    yield store, vectors
    anyio.run(close_store, store)


def queries(vectors: np.ndarray) -> list[tuple[int, list[float]]]:
    """Near-copies of points of both tenants, with the index of the point each was made from."""
    rng = np.random.default_rng(11)
    # Point ``index`` is in TENANTS[index % len(TENANTS)]: every 97th point of each tenant.
    picked = [tenant + len(TENANTS) * 97 * step for tenant in range(len(TENANTS)) for step in range(QUERIES_PER_TENANT)]
    noisy = unit(vectors[picked] + rng.normal(scale=0.02, size=(len(picked), DIM)).astype(np.float32))
    return [(index, row.tolist()) for index, row in zip(picked, noisy, strict=True)]


def exact_top(vectors: np.ndarray, query: Sequence[float], k: int) -> list[str]:
    return [f"p-{index}" for index in np.argsort(-(vectors @ np.asarray(query, dtype=np.float32)))[:k]]


async def found(store: ChunkStore, request: models.QueryRequest) -> list[str]:
    """The chunk ids a request finds, best first."""
    points = await store.query(request.model_copy(update={"with_payload": ["id"]}))
    return [str(point.payload["id"]) for point in points]


async def test_a_dense_search_over_two_tenants_finds_the_neighbours_in_both(
    optimized: tuple[ChunkStore, np.ndarray],
) -> None:
    store, vectors = optimized
    recalls: list[float] = []
    for source, query in queries(vectors):
        hits = await found(store, dense_request(query, list(TENANTS), 10))
        assert hits[0] == f"p-{source}"  # its own near-copy first, whichever tenant it is in
        recalls.append(len(set(hits) & set(exact_top(vectors, query, 10))) / 10)
    assert recalls == [1.0] * len(recalls)


async def test_the_hybrid_dense_leg_over_two_tenants_finds_the_neighbours_in_both(
    optimized: tuple[ChunkStore, np.ndarray],
) -> None:
    store, vectors = optimized
    params = FusionParams(k=60, dense_weight=1.0, sparse_weight=0.0, lexical_weight=1.0, prefetch_limit=10)
    for source, query in queries(vectors):
        legs = hybrid_legs(
            dense=query,
            sparse=None,
            text="chunk",
            lexical_fields=["lexical_en"],
            collection_names=list(TENANTS),
            params=params,
            sparse_idf=True,
        )
        assert legs is not None
        dense_leg = leg_requests(legs)[0]
        assert dense_leg.using == "text-dense"
        hits = await found(store, dense_leg)
        assert hits[0] == f"p-{source}"
        assert set(hits) == set(exact_top(vectors, query, 10))


async def test_one_tenant_of_the_two_is_searched_on_its_own_graph(optimized: tuple[ChunkStore, np.ndarray]) -> None:
    store, vectors = optimized
    for source, query in queries(vectors):
        tenant = TENANTS[source % len(TENANTS)]
        hits = await found(store, dense_request(query, [tenant], 10))
        assert hits[0] == f"p-{source}"
        assert all(int(point_id.split("-")[1]) % len(TENANTS) == source % len(TENANTS) for point_id in hits)

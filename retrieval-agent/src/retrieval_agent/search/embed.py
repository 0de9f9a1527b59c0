"""Query embedding through the shared contract (same code and prefixes as ingestion)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from rag_runtime.embedding import ContractEmbedder, QueryVectors, SparseVectorData
from retrieval_agent.errors import first_leaf
from retrieval_agent.metrics import SearchMetrics

T = TypeVar("T")

ModelRunCallback = Callable[[], None]

# A query's vectors: the dense model's (and its sparse one when asked) and the multilingual model's.
EmbeddedQuery = tuple[QueryVectors, list[float] | None]


class QueryVectorMemo:
    """The vectors one request computed for each of its queries.

    When identical texts leave fewer than k distinct hits, search fetches the same query again,
    deeper: those fetches reuse the vectors instead of running the models again. One per request,
    so it never outlives the models or serves one caller another's query.
    """

    def __init__(self) -> None:
        self._vectors: dict[tuple[str, bool, bool], EmbeddedQuery] = {}

    def get(self, text: str, *, with_sparse: bool, with_multilingual: bool) -> EmbeddedQuery | None:
        return self._vectors.get((text, with_sparse, with_multilingual))

    def put(self, text: str, *, with_sparse: bool, with_multilingual: bool, vectors: EmbeddedQuery) -> None:
        self._vectors[(text, with_sparse, with_multilingual)] = vectors


async def embed_query(
    embedder: ContractEmbedder,
    text: str,
    *,
    with_sparse: bool,
    metrics: SearchMetrics,
    on_model_run: ModelRunCallback | None = None,
    memo: QueryVectorMemo | None = None,
) -> QueryVectors:
    """Dense (query prefix applied) and, when asked and configured, sparse vectors for ``text``.

    ``on_model_run``: see :meth:`ContractEmbedder.embed_query` (called from the worker thread).
    Raises the contract's EmbeddingError / SparseEmbeddingError / ModelUnavailableError.
    """
    known = memo.get(text, with_sparse=with_sparse, with_multilingual=False) if memo is not None else None
    if known is not None:
        return known[0]
    with metrics.time_stage("embed"):
        vectors = await embedder.aembed_query(text, with_sparse=with_sparse, on_model_run=on_model_run)
    if memo is not None:
        memo.put(text, with_sparse=with_sparse, with_multilingual=False, vectors=(vectors, None))
    return vectors


async def embed_hybrid_query(
    embedder: ContractEmbedder,
    text: str,
    *,
    with_sparse: bool,
    with_multilingual: bool,
    metrics: SearchMetrics,
    on_model_run: ModelRunCallback | None = None,
    memo: QueryVectorMemo | None = None,
) -> EmbeddedQuery:
    """:func:`embed_query`, and the ``text-dense-multilingual`` vector when asked (None otherwise).

    The two models run side by side in worker threads: the query waits for the slower one only.
    """
    multilingual_model = embedder.multilingual if with_multilingual else None
    if multilingual_model is None:
        vectors = await embed_query(
            embedder, text, with_sparse=with_sparse, metrics=metrics, on_model_run=on_model_run, memo=memo
        )
        return vectors, None
    known = memo.get(text, with_sparse=with_sparse, with_multilingual=True) if memo is not None else None
    if known is not None:
        return known
    multilingual: list[list[float]] = []

    async def second() -> None:
        multilingual.append(await multilingual_model.aembed_query(text))

    with metrics.time_stage("embed"):
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(second)
                vectors = await embedder.aembed_query(text, with_sparse=with_sparse, on_model_run=on_model_run)
        except BaseExceptionGroup as failure:
            raise first_leaf(failure) from None
    if memo is not None:
        memo.put(text, with_sparse=with_sparse, with_multilingual=True, vectors=(vectors, multilingual[0]))
    return vectors, multilingual[0]


async def embed_beside(
    embedder: ContractEmbedder,
    text: str,
    *,
    with_sparse: bool,
    with_multilingual: bool,
    metrics: SearchMetrics,
    beside: Callable[[SparseVectorData | None], Awaitable[T]],
    memo: QueryVectorMemo | None = None,
) -> tuple[QueryVectors, list[float] | None, T]:
    """:func:`embed_hybrid_query`, running ``beside`` with the query's sparse vector while the dense
    model runs.

    The worker thread tokenizes and signals just before the dense network runs (ONNX Runtime
    releases the GIL there). The event loop then computes the sparse vector (BM42 hashes tokens,
    ~0.2 ms: a worker thread's hop would cost as much) and runs ``beside`` (the term legs of a
    search), which the engine serves on the other core meanwhile, instead of after the model. An
    embedding that fails before that signal raises its error and ``beside`` never runs; one that ends
    without signalling (a backend that gives no signal) gets ``beside`` run afterwards. Vectors the
    ``memo`` holds are not computed again: ``beside`` runs at once.
    """
    known = memo.get(text, with_sparse=with_sparse, with_multilingual=with_multilingual) if memo is not None else None
    if known is not None:
        return known[0], known[1], await beside(known[0].sparse)
    loop = asyncio.get_running_loop()
    model_running: asyncio.Future[None] = loop.create_future()

    def signal() -> None:  # called in the worker thread
        loop.call_soon_threadsafe(_settle, model_running)

    embedding = asyncio.ensure_future(
        embed_hybrid_query(
            embedder,
            text,
            with_sparse=False,
            with_multilingual=with_multilingual,
            metrics=metrics,
            on_model_run=signal,
        )
    )
    try:
        await asyncio.wait((model_running, embedding), return_when=asyncio.FIRST_COMPLETED)
        if not model_running.done():
            embedding.result()  # raises the embedding's error, if it failed
        sparse = embedder.embed_sparse_query(text) if with_sparse else None
        side = await beside(sparse)
    except BaseException:
        model_running.cancel()
        # The worker thread cannot be stopped: wait for it, its outcome no longer wanted.
        await asyncio.gather(embedding, return_exceptions=True)
        raise
    vectors, multilingual = await embedding
    embedded = QueryVectors(dense=vectors.dense, sparse=sparse)
    if memo is not None:
        memo.put(text, with_sparse=with_sparse, with_multilingual=with_multilingual, vectors=(embedded, multilingual))
    return embedded, multilingual, side


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)

"""Query embedding through the shared contract (same code and prefixes as ingestion)."""

from __future__ import annotations

import anyio

from retrieval_agent.errors import first_leaf
from retrieval_agent.metrics import SearchMetrics
from shared_contract import ContractEmbedder, QueryVectors


async def embed_query(
    embedder: ContractEmbedder, text: str, *, with_sparse: bool, metrics: SearchMetrics
) -> QueryVectors:
    """Dense (query prefix applied) and, when asked and configured, sparse vectors for ``text``.

    Raises the contract's EmbeddingError / SparseEmbeddingError / ModelUnavailableError.
    """
    with metrics.time_stage("embed"):
        return await embedder.aembed_query(text, with_sparse=with_sparse)


async def embed_hybrid_query(
    embedder: ContractEmbedder, text: str, *, with_sparse: bool, with_multilingual: bool, metrics: SearchMetrics
) -> tuple[QueryVectors, list[float] | None]:
    """:func:`embed_query`, and the ``text-dense-multilingual`` vector when asked (None otherwise).

    The two models run side by side in worker threads: the query waits for the slower one only.
    """
    multilingual_model = embedder.multilingual if with_multilingual else None
    if multilingual_model is None:
        return await embed_query(embedder, text, with_sparse=with_sparse, metrics=metrics), None
    multilingual: list[list[float]] = []

    async def second() -> None:
        multilingual.append(await multilingual_model.aembed_query(text))

    with metrics.time_stage("embed"):
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(second)
                vectors = await embedder.aembed_query(text, with_sparse=with_sparse)
        except BaseExceptionGroup as failure:
            raise first_leaf(failure) from None
    return vectors, multilingual[0]

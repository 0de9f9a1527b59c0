"""Query embedding through the shared contract (same code and prefixes as ingestion)."""

from __future__ import annotations

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

"""Pure builders of the Qdrant requests the pipeline sends; no client involved.

Every request carries the tenant filter on each leg, so no query can return another tenant's
chunk (fusion only sees what its prefetch legs returned).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qdrant_client import models

from shared_contract import DENSE_VECTOR, PAYLOAD_CONTENT, SPARSE_VECTOR, MetaKey, SparseVectorData, meta_path


@dataclass(frozen=True, slots=True)
class FusionParams:
    """Weighted RRF over two prefetch legs; Qdrant scores ``sum(1 / ((rank + 1) / w + k - 1))`` (0-based rank)."""

    k: int
    weights: tuple[float, float]
    prefetch_limit: int


def tenant_filter(collection_names: Sequence[str]) -> models.Filter:
    """Only points whose ``meta.collection_name`` is one of ``collection_names``."""
    if not collection_names:
        raise ValueError("at least one collection name is required")
    return models.Filter(
        must=[
            models.FieldCondition(
                key=meta_path(MetaKey.COLLECTION_NAME), match=models.MatchAny(any=list(collection_names))
            )
        ]
    )


def dense_request(dense: Sequence[float], collection_names: Sequence[str], limit: int) -> models.QueryRequest:
    """Nearest neighbours on ``text-dense`` (raw cosine scores)."""
    return models.QueryRequest(
        query=list(dense),
        using=DENSE_VECTOR,
        filter=tenant_filter(collection_names),
        limit=limit,
        with_payload=True,
    )


def _rrf(params: FusionParams) -> models.RrfQuery:
    return models.RrfQuery(rrf=models.Rrf(k=params.k, weights=list(params.weights)))


def hybrid_request(
    dense: Sequence[float],
    sparse: SparseVectorData,
    collection_names: Sequence[str],
    limit: int,
    params: FusionParams,
) -> models.QueryRequest:
    """Dense and sparse prefetch legs fused server-side with weighted RRF (weights: dense, sparse)."""
    flt = tenant_filter(collection_names)
    return models.QueryRequest(
        prefetch=[
            models.Prefetch(query=list(dense), using=DENSE_VECTOR, filter=flt, limit=params.prefetch_limit),
            models.Prefetch(
                query=models.SparseVector(indices=list(sparse.indices), values=list(sparse.values)),
                using=SPARSE_VECTOR,
                filter=flt,
                limit=params.prefetch_limit,
            ),
        ],
        query=_rrf(params),
        limit=limit,
        with_payload=True,
    )


def lexical_request(
    dense: Sequence[float],
    text: str,
    collection_names: Sequence[str],
    limit: int,
    params: FusionParams,
) -> models.QueryRequest:
    """Dense leg plus a server-side BM25 leg over the ``content`` full-text index, fused with RRF.

    Needs a text index with ``scoring`` on ``content``; Qdrant answers with an error otherwise.
    Weights: dense, lexical.
    """
    flt = tenant_filter(collection_names)
    return models.QueryRequest(
        prefetch=[
            models.Prefetch(query=list(dense), using=DENSE_VECTOR, filter=flt, limit=params.prefetch_limit),
            models.Prefetch(
                query=models.TextQuery(text=text), using=PAYLOAD_CONTENT, filter=flt, limit=params.prefetch_limit
            ),
        ],
        query=_rrf(params),
        limit=limit,
        with_payload=True,
    )


def rrf_max_score(params: FusionParams) -> float:
    """The best score Qdrant's weighted RRF can give (first in every leg): documents the scale."""
    return sum(1.0 / (1.0 / weight + params.k - 1.0) for weight in params.weights if weight > 0)

"""Rerank candidates with a cross-encoder; fail open (unranked) on any reranker failure."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from retrieval_agent.adapters.reranker import Reranker
from retrieval_agent.errors import RerankerError
from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.search.postprocess import Hit
from retrieval_agent.search.relevance import RelevanceCalibrator

logger = logging.getLogger(__name__)


async def rerank(
    reranker: Reranker,
    query: str,
    candidates: Sequence[Hit],
    k: int,
    metrics: SearchMetrics,
    *,
    calibrator: RelevanceCalibrator,
) -> list[Hit]:
    """The ``k`` best candidates by cross-encoder score (scores replaced by the reranker's, and
    relevance by the cross-encoder's probability).

    On a reranker failure the first ``k`` candidates are returned in retrieval order with their
    retrieval scores; the failure is counted in ``reranker_failures_total`` and logged.
    """
    if not candidates:
        return []
    with metrics.time_stage("rerank"):
        try:
            scores = await reranker.score(query, [hit.content for hit in candidates])
        except RerankerError as exc:
            metrics.reranker_failures.labels(reason=exc.reason).inc()
            logger.warning("reranker failed (%s), returning unranked candidates: %s", exc.reason, exc)
            return list(candidates[:k])
    order = sorted(range(len(candidates)), key=lambda index: (-scores[index], index))
    return calibrator.reranked([replace(candidates[index], score=scores[index]) for index in order[:k]])

"""Z-score fusion: the hybrid default, fused here from the legs' raw scores.

Each leg's scores are standardised over the candidates it returned, shifted so that its weakest
candidate scores 0: ``z' = (score - min) / std``. A candidate a leg did not return counts 0 there,
like its weakest one. The fused score is ``sum(weight * z')`` over the legs. A leg whose scores do
not spread (one candidate, or all equal) gives each of its candidates 2, what the better of two
candidates gets: a lone BM25 match still stands out from every chunk the leg did not return.

Unlike rank fusion (RRF) it keeps how far a leg's best candidates stand out: a BM25 leg with one
exact match far above the rest outweighs a dense leg whose cosines are all alike. Tuned on SciFact
train and NorQuAD dev, it beats Qdrant's weighted RRF on both test splits and on the real-document
questions (docs/benchmarks.md, "Fusion"). No Qdrant query can standardise per request, so the legs
come back from one batch request and are fused here (``benchmarks/tune.py`` has the same function).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from shared_contract.store import PointRecord

# What each candidate of a leg without spread gets: the better of two candidates' value.
NO_SPREAD = 2.0


@dataclass(frozen=True, slots=True)
class FusedCandidate:
    """One candidate and its fused score."""

    point_id: str
    score: float


def standardised(scores: Sequence[float]) -> list[float]:
    """``(score - min) / std`` over one leg's candidates; :data:`NO_SPREAD` for each when the scores do not spread."""
    if not scores:
        return []
    mean = math.fsum(scores) / len(scores)
    std = math.sqrt(math.fsum((score - mean) ** 2 for score in scores) / len(scores))
    if std <= 0.0 or not math.isfinite(std):
        return [NO_SPREAD] * len(scores)
    low = min(scores)
    return [(score - low) / std for score in scores]


def zscore_fuse(legs: Sequence[Sequence[PointRecord]], weights: Sequence[float], limit: int) -> list[FusedCandidate]:
    """The ``limit`` best candidates of the legs by weighted, standardised score.

    ``legs``: each leg's candidates, best first, as the store returned them. Ties keep the order
    in which candidates were first seen (legs in order, each best first).
    """
    if len(legs) != len(weights):
        raise ValueError("one weight per leg")
    fused: dict[str, float] = {}
    for leg, weight in zip(legs, weights, strict=True):
        if weight <= 0:
            continue
        for point, z in zip(leg, standardised([point.score for point in leg]), strict=True):
            fused[point.point_id] = fused.get(point.point_id, 0.0) + weight * z
    ranked = sorted(fused.items(), key=lambda item: item[1], reverse=True)[: max(limit, 0)]
    return [FusedCandidate(point_id, score) for point_id, score in ranked]

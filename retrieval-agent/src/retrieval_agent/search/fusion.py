"""Z-score fusion: the hybrid default, fused here from the legs' raw scores.

Each leg's scores are standardised over the candidates it returned, shifted so that its weakest
candidate scores 0: ``z' = (score - min) / std``. A candidate a leg did not return counts 0 there,
like its weakest one. The fused score is ``sum(weight * z')`` over the legs. A leg whose scores do
not spread (one candidate, or all equal) gives each of its candidates 2, what the better of two
candidates gets: a lone BM25 match still stands out from every chunk the leg did not return.

The candidates are ranked by that score. The score each one carries (the calibrated relevance's
feature) is standardised over the first ``depth`` candidates of each leg only, the depth a 10-hit
search fetches: a larger k fetches deeper, which ranks better (SciFact test nDCG@10 0.7414 with
the whole pool, 0.7378 with only the first 20), but would inflate the scores of the same hits and
so their relevance. With the depth fixed, a hit's score is the same at every k.

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

from rag_runtime.store import PointRecord

# What each candidate of a leg without spread gets: the better of two candidates' value.
NO_SPREAD = 2.0


@dataclass(frozen=True, slots=True)
class FusedCandidate:
    """One candidate and its fused score."""

    point_id: str
    score: float


def standardised(scores: Sequence[float], depth: int | None = None) -> tuple[list[float], float]:
    """``(score - min) / std`` of one leg's candidates (best first), mean, std and min taken over the
    first ``depth`` of them; and what a candidate the leg did not return counts (its weakest
    candidate's value). :data:`NO_SPREAD` for each of those first candidates when they do not spread
    (0 for the rest, and for a candidate not returned)."""
    if not scores:
        return [], 0.0
    head = scores[:depth] if depth is not None and depth > 0 else scores
    mean = math.fsum(head) / len(head)
    std = math.sqrt(math.fsum((score - mean) ** 2 for score in head) / len(head))
    if std <= 0.0 or not math.isfinite(std):
        return [NO_SPREAD] * len(head) + [0.0] * (len(scores) - len(head)), 0.0
    low = min(head)
    return [(score - low) / std for score in scores], (min(scores) - low) / std


def zscore_fuse(
    legs: Sequence[Sequence[PointRecord]], weights: Sequence[float], limit: int, *, depth: int | None = None
) -> list[FusedCandidate]:
    """The ``limit`` best candidates of the legs by weighted, standardised score.

    ``legs``: each leg's candidates, best first, as the store returned them. Ties keep the order
    in which candidates were first seen (legs in order, each best first). Each candidate's ``score``
    is standardised over the first ``depth`` candidates of each leg (the ranking's own score when
    None or when no leg returned more).
    """
    if len(legs) != len(weights):
        raise ValueError("one weight per leg")
    ranking: dict[str, float] = {}
    anchored: dict[str, float] = {}
    not_returned = 0.0  # what every candidate's anchored score gets from the legs that missed it
    for leg, weight in zip(legs, weights, strict=True):
        if weight <= 0:
            continue
        scores = [point.score for point in leg]
        head_values, absent = standardised(scores, depth)
        # Within the depth (every search of k 10 or less) the two standardisations are one.
        values = head_values if depth is None or depth >= len(scores) else standardised(scores)[0]
        not_returned += weight * absent
        for point, z, z_head in zip(leg, values, head_values, strict=True):
            ranking[point.point_id] = ranking.get(point.point_id, 0.0) + weight * z
            anchored[point.point_id] = anchored.get(point.point_id, 0.0) + weight * (z_head - absent)
    ranked = sorted(ranking.items(), key=lambda item: item[1], reverse=True)[: max(limit, 0)]
    return [FusedCandidate(point_id, anchored[point_id] + not_returned) for point_id, _ in ranked]

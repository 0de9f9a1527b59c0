"""Pure ranking helpers for recalled facts: cosines and maximal marginal relevance (MMR)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


def _unit_rows(vectors: Sequence[Sequence[float]]) -> npt.NDArray[np.float64]:
    matrix = np.asarray(vectors, dtype=np.float64).reshape(len(vectors), -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    # A zero vector has no direction: its cosine to anything is 0, not NaN.
    unit: npt.NDArray[np.float64] = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return unit


def cosines(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> list[float]:
    """The cosine of ``query`` to each of ``vectors``, in order."""
    if not vectors:
        return []
    return [float(value) for value in _unit_rows(vectors) @ _unit_rows([query])[0]]


def normalized(scores: Sequence[float]) -> list[float]:
    """``scores`` divided by the pool's best, so the best is 1.0.

    Not min-max: that pins the weakest candidate to 0 however close it is, and a recall pool after
    the cosine floor is often two or three facts.
    """
    best = max(scores, default=0.0)
    if best <= 0:
        return [1.0 for _ in scores]
    return [max(0.0, score / best) for score in scores]


def mmr(scores: Sequence[float], vectors: Sequence[Sequence[float]], *, k: int, mmr_lambda: float) -> list[int]:
    """The indices of ``k`` candidates picked by maximal marginal relevance, in pick order.

    Each pick maximises ``lambda * relevance - (1 - lambda) * max cosine to the picks so far``, with
    relevance = :func:`normalized` ``scores``. ``mmr_lambda`` 1 keeps the score order; ties go to the
    earlier candidate (the store's order).
    """
    if len(scores) != len(vectors):
        raise ValueError(f"{len(scores)} scores for {len(vectors)} vectors")
    count = min(k, len(scores))
    if count <= 0:
        return []
    relevance = np.asarray(normalized(scores), dtype=np.float64)
    unit = _unit_rows(vectors)
    similarity = unit @ unit.T
    # The first pick has nothing to be redundant with.
    picked = [int(np.argmax(relevance))]
    redundancy = similarity[picked[0]].copy()  # each candidate's highest cosine to a pick
    available = np.ones(len(scores), dtype=bool)
    available[picked[0]] = False
    while len(picked) < count:
        gain = mmr_lambda * relevance - (1.0 - mmr_lambda) * redundancy
        gain[~available] = -np.inf
        choice = int(np.argmax(gain))
        picked.append(choice)
        available[choice] = False
        redundancy = np.maximum(redundancy, similarity[choice])
    return picked

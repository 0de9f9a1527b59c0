"""MMR and its helpers on hand-made vectors."""

from __future__ import annotations

import math

import pytest

from retrieval_agent.memory.ranking import cosines, mmr, normalized

# Two near-duplicates along x, a distinct candidate along y, a weak one in between.
DUPLICATE_A = [1.0, 0.0, 0.0]
DUPLICATE_B = [0.99, 0.05, 0.0]
DISTINCT = [0.0, 1.0, 0.0]
WEAK = [0.6, 0.0, 0.8]


def test_cosines_are_scale_free_and_zero_for_a_zero_vector() -> None:
    values = cosines([2.0, 0.0, 0.0], [DUPLICATE_A, DISTINCT, [0.0, 0.0, 0.0], [-3.0, 0.0, 0.0]])
    assert values == pytest.approx([1.0, 0.0, 0.0, -1.0])
    assert cosines([1.0, 0.0], []) == []


def test_normalized_divides_by_the_best() -> None:
    assert normalized([0.5, 0.25, 0.0]) == [1.0, 0.5, 0.0]
    assert normalized([]) == []
    # No positive score: nothing to tell the candidates apart by.
    assert normalized([0.0, 0.0]) == [1.0, 1.0]


def test_mmr_skips_a_near_duplicate_for_a_distinct_candidate() -> None:
    scores = [1.0, 0.95, 0.8]
    vectors = [DUPLICATE_A, DUPLICATE_B, DISTINCT]
    assert mmr(scores, vectors, k=2, mmr_lambda=0.7) == [0, 2]
    assert mmr(scores, vectors, k=3, mmr_lambda=0.7) == [0, 2, 1]


def test_lambda_one_keeps_the_score_order() -> None:
    scores = [0.8, 1.0, 0.95]
    vectors = [DISTINCT, DUPLICATE_A, DUPLICATE_B]
    assert mmr(scores, vectors, k=3, mmr_lambda=1.0) == [1, 2, 0]


def test_lambda_zero_picks_the_best_then_the_least_similar() -> None:
    scores = [1.0, 0.95, 0.1, 0.5]
    vectors = [DUPLICATE_A, DUPLICATE_B, DISTINCT, WEAK]
    assert mmr(scores, vectors, k=3, mmr_lambda=0.0) == [0, 2, 3]


def test_the_gain_is_lambda_relevance_minus_the_closest_pick() -> None:
    # Candidate 1: 0.5 * 0.9 - 0.5 * 0.6 = 0.15; candidate 2: 0.5 * 0.5 - 0.5 * 0.0 = 0.25.
    scores = [1.0, 0.9, 0.5]
    vectors = [DUPLICATE_A, WEAK, DISTINCT]
    assert math.isclose(cosines(DUPLICATE_A, [WEAK])[0], 0.6)
    assert mmr(scores, vectors, k=2, mmr_lambda=0.5) == [0, 2]
    assert mmr(scores, vectors, k=2, mmr_lambda=0.8) == [0, 1]


def test_ties_go_to_the_earlier_candidate_and_k_is_capped() -> None:
    assert mmr([0.5, 0.5], [DISTINCT, DUPLICATE_A], k=5, mmr_lambda=0.7) == [0, 1]
    assert mmr([], [], k=3, mmr_lambda=0.7) == []
    assert mmr([1.0], [DISTINCT], k=0, mmr_lambda=0.7) == []


def test_scores_and_vectors_must_pair_up() -> None:
    with pytest.raises(ValueError, match="2 scores for 1 vectors"):
        mmr([1.0, 0.5], [DISTINCT], k=1, mmr_lambda=0.7)

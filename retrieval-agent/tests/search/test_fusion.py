from __future__ import annotations

import pytest

from rag_runtime.store import PointRecord
from retrieval_agent.search.fusion import FusedCandidate, standardised, zscore_fuse


def leg(**scores: float) -> list[PointRecord]:
    return [PointRecord(point_id=name, score=score) for name, score in scores.items()]


def test_standardised_shifts_the_weakest_candidate_to_zero_and_divides_by_the_population_std() -> None:
    # mean 2, population std sqrt(2/3)
    values, absent = standardised([3.0, 2.0, 1.0])
    assert values == pytest.approx([2 / (2 / 3) ** 0.5, 1 / (2 / 3) ** 0.5, 0.0])
    assert absent == 0.0


def test_standardised_does_not_depend_on_the_scale_of_a_leg() -> None:
    assert standardised([30.0, 20.0, 10.0])[0] == pytest.approx(standardised([3.0, 2.0, 1.0])[0])
    assert standardised([0.9, 0.8, 0.1])[0] == pytest.approx(standardised([9.0, 8.0, 1.0])[0])


def test_candidates_past_the_depth_keep_the_first_ones_values_and_set_what_a_missed_one_counts() -> None:
    head = [3.0, 2.0, 1.0]
    values, absent = standardised([*head, 0.5, -1.0], depth=3)
    assert values[:3] == standardised(head)[0]
    unit = (2 / 3) ** 0.5  # the first three's population std
    assert values[3:] == pytest.approx([-0.5 / unit, -2.0 / unit])
    assert absent == pytest.approx(-2.0 / unit)  # the weakest candidate returned


@pytest.mark.parametrize("scores", [[7.5], [2.0, 2.0, 2.0]])
def test_a_leg_whose_scores_do_not_spread_gives_each_candidate_what_the_better_of_two_gets(
    scores: list[float],
) -> None:
    assert standardised(scores) == ([2.0] * len(scores), 0.0)
    assert standardised([5.0, 1.0])[0][0] == 2.0


def test_no_candidates_standardise_to_nothing() -> None:
    assert standardised([]) == ([], 0.0)


def test_fused_score_is_the_weighted_sum_and_a_missed_candidate_counts_zero_in_that_leg() -> None:
    dense = leg(a=0.9, b=0.5, c=0.1)  # z' = a 2.449, b 1.225, c 0
    lexical = leg(c=12.0, d=4.0)  # z' = c 2, d 0
    fused = zscore_fuse([dense, lexical], [1.0, 2.0], limit=10)
    z = 0.4 / (0.32 / 3) ** 0.5  # b's distance above c over the dense leg's population std
    assert [candidate.point_id for candidate in fused] == ["c", "a", "b", "d"]
    assert [candidate.score for candidate in fused] == pytest.approx([2 * 2.0, 2 * z, z, 0.0])


def test_a_deeper_fetch_keeps_the_fused_scores_of_the_candidates_within_the_depth() -> None:
    """What makes a hybrid hit's calibrated relevance the same at every k: the legs fetch deeper for a
    larger k, and standardising over a fixed depth leaves the first candidates' fused scores as they were."""
    dense = leg(a=0.9, b=0.7, c=0.5, d=0.3)
    lexical = leg(b=9.0, a=6.0, e=5.0, c=1.0)
    shallow = zscore_fuse([dense[:2], lexical[:2]], [1.0, 2.0], limit=2, depth=2)
    deep = zscore_fuse([dense, lexical], [1.0, 2.0], limit=2, depth=2)
    assert [candidate.point_id for candidate in shallow] == [candidate.point_id for candidate in deep] == ["b", "a"]
    assert [candidate.score for candidate in deep] == pytest.approx([candidate.score for candidate in shallow])
    # Without a depth the same deeper fetch standardises over more candidates: other scores.
    unanchored = zscore_fuse([dense, lexical], [1.0, 2.0], limit=2)
    assert [candidate.score for candidate in unanchored] != pytest.approx([candidate.score for candidate in shallow])


def test_a_zero_weight_leg_adds_nothing_not_even_candidates() -> None:
    fused = zscore_fuse([leg(a=0.9, b=0.1), leg(c=5.0, b=1.0)], [1.0, 0.0], limit=10)
    assert [candidate.point_id for candidate in fused] == ["a", "b"]


def test_ties_keep_the_order_candidates_were_first_seen() -> None:
    # Each leg ranks its own candidate first with the same standardised score.
    fused = zscore_fuse([leg(a=1.0, x=0.0), leg(b=3.0, y=1.0)], [1.0, 1.0], limit=4)
    assert fused == [
        FusedCandidate("a", 2.0),
        FusedCandidate("b", 2.0),
        FusedCandidate("x", 0.0),
        FusedCandidate("y", 0.0),
    ]


def test_limit_cuts_the_fused_list() -> None:
    fused = zscore_fuse([leg(a=3.0, b=2.0, c=1.0)], [1.0], limit=2)
    assert [candidate.point_id for candidate in fused] == ["a", "b"]


def test_one_weight_per_leg() -> None:
    with pytest.raises(ValueError, match="one weight per leg"):
        zscore_fuse([leg(a=1.0)], [1.0, 1.0], limit=1)

"""The offline fusion must reproduce Qdrant's weighted RRF, or tuning optimises the wrong thing."""

from __future__ import annotations

import pytest
from qdrant_client import models
from qdrant_client.hybrid.fusion import reciprocal_rank_fusion

from benchmarks.tune import Legs, fused_run, qdrant_rrf


def points(ids: list[int]) -> list[models.ScoredPoint]:
    return [models.ScoredPoint(id=i, version=0, score=1.0 - n / 100) for n, i in enumerate(ids)]


@pytest.mark.parametrize(("k", "weights"), [(60, (1.0, 1.0)), (2, (1.0, 0.5)), (10, (0.25, 1.0)), (30, (0.0, 1.0))])
def test_matches_qdrant_client_fusion(k: int, weights: tuple[float, float]) -> None:
    dense, sparse = [1, 2, 3, 4, 5, 6], [6, 3, 7, 1, 8]
    expected = reciprocal_rank_fusion(
        [points(dense), points(sparse)], limit=5, ranking_constant_k=k, weights=list(weights)
    )
    ours = qdrant_rrf([[(str(i), f"f{i}") for i in dense], [(str(i), f"f{i}") for i in sparse]], weights, k, 5)
    assert [score for _, _, score in ours] == pytest.approx([p.score for p in expected])
    # Equal scores may come in either order; compare the id sets per distinct score.
    by_score_ours: dict[float, set[str]] = {round(s, 12): set() for _, _, s in ours}
    for pid, _, s in ours:
        by_score_ours[round(s, 12)].add(pid)
    by_score_qdrant: dict[float, set[str]] = {round(p.score, 12): set() for p in expected}
    for p in expected:
        by_score_qdrant[round(p.score, 12)].add(str(p.id))
    assert by_score_ours == by_score_qdrant


def test_fused_run_maps_chunks_to_best_doc_score_and_cuts_prefetch() -> None:
    # Two chunks of doc A (files f-a); B only in the sparse leg, beyond a depth-1 prefetch.
    legs = Legs(dense=[("p1", "f-a"), ("p2", "f-a")], sparse=[("p3", "f-c"), ("p4", "f-b")], lexical=[])
    run = fused_run(legs, k=60, weights=(1.0, 1.0, 1.0), multiplier=8, id_map={"f-a": "A", "f-b": "B", "f-c": "C"})
    assert set(run) == {"A", "B", "C"}
    assert run["A"] == pytest.approx(1 / 60)  # the best chunk, rank 1 of the dense leg
    assert run["B"] == pytest.approx(1 / 61)


def test_fused_run_weights_the_bm25_leg_with_the_lexical_weight() -> None:
    legs = Legs(dense=[("p2", "f-b")], sparse=[], lexical=[("p1", "f-a"), ("p2", "f-b")])
    run = fused_run(legs, k=10, weights=(1.0, 1.0, 0.5), multiplier=8, id_map={"f-a": "A", "f-b": "B"})
    assert run["A"] == pytest.approx(1 / (1 / 0.5 + 9))
    assert run["B"] == pytest.approx(1 / (1 + 9) + 1 / (2 / 0.5 + 9))

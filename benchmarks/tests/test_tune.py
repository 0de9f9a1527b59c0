"""The offline fusion must reproduce the agent's: Qdrant's weighted RRF and the agent's z-score
fusion, or tuning optimises the wrong thing."""

from __future__ import annotations

import math
import random

import pytest
from qdrant_client import models
from qdrant_client.hybrid.fusion import reciprocal_rank_fusion

from benchmarks import tune
from benchmarks.quality import SEARCH_K
from benchmarks.tune import Leg, Legs, fused_run, point_env, qdrant_rrf, zscore_candidates, zscore_run
from rag_runtime.store import PointRecord
from retrieval_agent.search.fusion import NO_SPREAD, zscore_fuse


def points(ids: list[int]) -> list[models.ScoredPoint]:
    return [models.ScoredPoint(id=i, version=0, score=1.0 - n / 100) for n, i in enumerate(ids)]


@pytest.mark.parametrize(("k", "weights"), [(60, (1.0, 1.0)), (2, (1.0, 0.5)), (10, (0.25, 1.0)), (30, (0.0, 1.0))])
def test_matches_qdrant_client_fusion(k: int, weights: tuple[float, float]) -> None:
    dense, sparse = [1, 2, 3, 4, 5, 6], [6, 3, 7, 1, 8]
    expected = reciprocal_rank_fusion(
        [points(dense), points(sparse)], limit=5, ranking_constant_k=k, weights=list(weights)
    )
    ours = qdrant_rrf(
        [[(str(i), f"f{i}", 0.0) for i in dense], [(str(i), f"f{i}", 0.0) for i in sparse]], weights, k, 5
    )
    assert [score for _, _, score in ours] == pytest.approx([p.score for p in expected])
    # Equal scores may come in either order; compare the id sets per distinct score.
    by_score_ours: dict[float, set[str]] = {round(s, 12): set() for _, _, s in ours}
    for pid, _, s in ours:
        by_score_ours[round(s, 12)].add(pid)
    by_score_qdrant: dict[float, set[str]] = {round(p.score, 12): set() for p in expected}
    for p in expected:
        by_score_qdrant[round(p.score, 12)].add(str(p.id))
    assert by_score_ours == by_score_qdrant


def test_rrf_ranks_by_position_only_and_a_zero_weight_leg_adds_nothing() -> None:
    # k = 1, weights (1, 1, 0): a = 1/1, b = 1/2 + 1/1, c = 1/2 + 0. The raw scores play no part.
    legs: list[Leg] = [
        [("a", "f-a", 0.1), ("b", "f-b", 0.2)],
        [("b", "f-b", 0.1), ("c", "f-c", 100.0)],
        [("c", "f-c", 1.0)],
    ]
    assert qdrant_rrf(legs, (1.0, 1.0, 0.0), 1, 10) == [("b", "f-b", 1.5), ("a", "f-a", 1.0), ("c", "f-c", 0.5)]
    assert qdrant_rrf(legs, (1.0, 1.0, 0.0), 1, 2) == [("b", "f-b", 1.5), ("a", "f-a", 1.0)]


def test_fused_run_maps_chunks_to_best_doc_score_and_cuts_prefetch() -> None:
    # Two chunks of doc A (files f-a); B only in the sparse leg, beyond a depth-1 prefetch.
    legs = Legs(
        dense=[("p1", "f-a", 0.9), ("p2", "f-a", 0.8)], sparse=[("p3", "f-c", 3.0), ("p4", "f-b", 1.0)], lexical=[]
    )
    run = fused_run(legs, k=60, weights=(1.0, 1.0, 1.0), multiplier=8, id_map={"f-a": "A", "f-b": "B", "f-c": "C"})
    assert set(run) == {"A", "B", "C"}
    assert run["A"] == pytest.approx(1 / 60)  # the best chunk, rank 1 of the dense leg
    assert run["B"] == pytest.approx(1 / 61)


def test_fused_run_weights_the_bm25_leg_with_the_lexical_weight() -> None:
    legs = Legs(dense=[("p2", "f-b", 0.5)], sparse=[], lexical=[("p1", "f-a", 7.0), ("p2", "f-b", 3.0)])
    run = fused_run(legs, k=10, weights=(1.0, 1.0, 0.5), multiplier=8, id_map={"f-a": "A", "f-b": "B"})
    assert run["A"] == pytest.approx(1 / (1 / 0.5 + 9))
    assert run["B"] == pytest.approx(1 / (1 + 9) + 1 / (2 / 0.5 + 9))


ZLEGS = Legs(
    dense=[("p1", "f-a", 0.9), ("p2", "f-b", 0.7), ("p3", "f-c", 0.6), ("p4", "f-a", 0.1)],
    sparse=[("p5", "f-e", 4.0), ("p3", "f-c", 2.0)],
    lexical=[("p3", "f-c", 11.0), ("p6", "f-d", 5.0), ("p2", "f-b", 4.5)],
)
ZMAP = {"f-a": "A", "f-b": "B", "f-c": "C", "f-d": "D", "f-e": "E"}


def as_records(leg: list[tuple[str, str, float]]) -> list[PointRecord]:
    return [PointRecord(point_id=point_id, score=score) for point_id, _, score in leg]


@pytest.mark.parametrize("weights", [(1.0, 1.0, 1.0), (1.2, 0.6, 1.0), (2.0, 0.0, 1.0), (0.0, 1.0, 1.0)])
def test_zscore_run_ranks_as_the_agents_fusion(weights: tuple[float, float, float]) -> None:
    legs = [ZLEGS.dense, ZLEGS.sparse, ZLEGS.lexical]
    sent = [(leg, weight) for leg, weight in zip(legs, weights, strict=True) if weight > 0]
    agent = zscore_fuse([as_records(leg) for leg, _ in sent], [weight for _, weight in sent], limit=100)
    file_of = {point_id: file_id for leg in legs for point_id, file_id, _ in leg}
    expected: dict[str, float] = {}
    for candidate in agent:  # the agent's chunks, mapped to documents by their best chunk
        expected.setdefault(ZMAP[file_of[candidate.point_id]], candidate.score)
    run = zscore_run(zscore_candidates(ZLEGS, depth=100), weights, ZMAP)
    assert list(run) == list(expected)
    assert list(run.values()) == pytest.approx(list(expected.values()))


def test_zscore_candidates_respect_the_depth() -> None:
    candidates = zscore_candidates(ZLEGS, depth=1)
    # One candidate per leg: each alone, so each gets the no-spread value.
    assert candidates.files == ["f-a", "f-e", "f-c"]
    assert candidates.z.tolist() == [[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]]


def test_a_zscore_point_sets_the_fusion_and_no_k() -> None:
    env = point_env(None, (1.2, 0.6, 1.0), 2)
    assert env["HYBRID_FUSION"] == "zscore"
    assert "HYBRID_RRF_K" not in env
    assert point_env(5, (0.75, 0.25, 0.5), 2)["HYBRID_FUSION"] == "rrf"


# Hand-computed z-score cases. Dense scores 3, 2, 1: mean 2, population std sqrt(2/3), so
# z' = (s - 1) / std = sqrt(6), sqrt(6) / 2, 0. Lexical 10, 4: mean 7, std 3, z' = 2, 0. The sparse
# leg has one result: no spread, so NO_SPREAD.
HAND = [
    [("d1", "f-a", 3.0), ("d2", "f-b", 2.0), ("d3", "f-c", 1.0)],
    [("s1", "f-e", 0.4)],
    [("d3", "f-c", 10.0), ("l4", "f-d", 4.0)],
]


def test_zscore_fuse_two_legs_and_a_point_missing_from_a_leg_counts_zero_there() -> None:
    fused = tune.zscore_fuse(HAND, (1.0, 0.25, 1.0), 10)
    assert [point_id for point_id, _, _ in fused] == ["d1", "d3", "d2", "s1", "l4"]
    # d1 only in dense, d3 the weakest of dense (0) and the best of lexical (2), l4 the weakest of lexical.
    assert [score for _, _, score in fused] == pytest.approx([math.sqrt(6), 2.0, math.sqrt(6) / 2, 0.25 * NO_SPREAD, 0])
    assert [file_id for _, file_id, _ in fused] == ["f-a", "f-c", "f-b", "f-e", "f-d"]


def test_zscore_fuse_weights_each_leg_and_cuts_to_the_limit() -> None:
    fused = tune.zscore_fuse(HAND, (0.5, 0.0, 1.0), 3)
    assert [point_id for point_id, _, _ in fused] == ["d3", "d1", "d2"]
    assert [score for _, _, score in fused] == pytest.approx([2.0, math.sqrt(6) / 2, math.sqrt(6) / 4])


def test_zscore_fuse_a_zero_weight_leg_is_not_sent() -> None:
    # s1 is only in the sparse leg: with its weight at 0 it is no candidate at all (not one at 0).
    fused = tune.zscore_fuse(HAND, (0.5, 0.0, 1.0), 10)
    assert [point_id for point_id, _, _ in fused] == ["d3", "d1", "d2", "l4"]
    assert tune.zscore_fuse(HAND, (0.0, 0.0, 0.0), 10) == []


def test_zscore_fuse_a_leg_without_spread_gives_each_candidate_the_no_spread_value() -> None:
    legs: list[Leg] = [[("a", "f-a", 0.7), ("b", "f-b", 0.7)], [], [("c", "f-c", 3.0)]]
    fused = tune.zscore_fuse(legs, (1.0, 1.0, 0.5), 10)
    assert fused == [("a", "f-a", NO_SPREAD), ("b", "f-b", NO_SPREAD), ("c", "f-c", 0.5 * NO_SPREAD)]
    assert NO_SPREAD > 0


def test_zscore_fuse_ties_keep_the_first_seen_order_over_the_legs_sent() -> None:
    one = [("a", "f-a", 0.5)], [("b", "f-b", 9.0)], [("c", "f-c", 1.0)]
    assert [p for p, _, _ in tune.zscore_fuse(one, (1.0, 1.0, 1.0), 10)] == ["a", "b", "c"]
    assert [p for p, _, _ in tune.zscore_fuse([one[0], one[2], one[1]], (1.0, 1.0, 1.0), 10)] == ["a", "c", "b"]
    # Dense (weight 0) saw b first, but it is not sent: the sparse leg's order decides the tie.
    legs: list[Leg] = [[("b", "f-b", 0.9), ("a", "f-a", 0.8)], [("a", "f-a", 3.0), ("b", "f-b", 3.0)], []]
    assert [p for p, _, _ in tune.zscore_fuse(legs, (0.0, 1.0, 1.0), 10)] == ["a", "b"]
    ids = {"f-a": "A", "f-b": "B"}
    assert list(zscore_run(zscore_candidates(Legs(*legs), depth=10), (0.0, 1.0, 1.0), ids)) == ["A", "B"]
    assert list(zscore_run(zscore_candidates(Legs(*legs), depth=10), (1.0, 1.0, 1.0), ids)) == ["B", "A"]


def test_zscore_run_equals_zscore_fuse_bit_for_bit_on_random_legs() -> None:
    """The vectorised grid path ranks (and scores) exactly as the reference, ties and zero weights included."""
    rng = random.Random(7)
    pool = [f"p{i}" for i in range(40)]
    id_map = {f"f-{point_id}": point_id for point_id in pool}  # one document per chunk: the chunk order shows
    for _ in range(500):
        legs: list[Leg] = []
        for _leg in range(3):
            ids = rng.sample(pool, rng.randint(0, 15))
            scores = sorted((rng.choice([1.0, 2.0, 3.0, rng.random()]) for _ in ids), reverse=True)
            legs.append([(point_id, f"f-{point_id}", score) for point_id, score in zip(ids, scores, strict=True)])
        weights = (rng.choice([0.0, 0.5, 1.2]), rng.choice([0.0, 0.25, 0.6, 1.0]), rng.choice([0.0, 1.0, 1.4]))
        depth = rng.choice([3, 8, 100])
        expected = tune.zscore_fuse([leg[:depth] for leg in legs], weights, SEARCH_K)
        run = zscore_run(zscore_candidates(Legs(*legs), depth), weights, id_map)
        assert list(run.items()) == [(point_id, score) for point_id, _, score in expected]

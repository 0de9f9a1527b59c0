"""Metrics against hand-computed cases. log2(3) = 1.5849625, log2(4) = 2, log2(5) = 2.3219281."""

from __future__ import annotations

import pytest

from benchmarks.metrics import evaluate, mrr_at_k, ndcg_at_k, rank, recall_at_k, score_query


def ranked(*doc_ids: str) -> dict[str, float]:
    """A run whose scores put the docs in the given order."""
    return {doc_id: float(len(doc_ids) - i) for i, doc_id in enumerate(doc_ids)}


def test_single_relevant_at_top_is_perfect() -> None:
    scores = score_query(ranked("a", "b", "c"), {"a": 1})
    assert (scores.ndcg_10, scores.recall_100, scores.mrr_10) == (1.0, 1.0, 1.0)


def test_single_relevant_at_rank_three() -> None:
    scores = score_query(ranked("x", "y", "a"), {"a": 1})
    assert scores.ndcg_10 == pytest.approx(1 / 2)  # 1/log2(4)
    assert scores.mrr_10 == pytest.approx(1 / 3)
    assert scores.recall_100 == 1.0


def test_two_relevant_documents() -> None:
    # DCG = 1/log2(3) + 1/log2(5) = 0.6309298 + 0.4306766 = 1.0616063; IDCG = 1 + 0.6309298 = 1.6309298
    scores = score_query(ranked("x", "a", "y", "b"), {"a": 1, "b": 1})
    assert scores.ndcg_10 == pytest.approx(1.0616063 / 1.6309298, abs=1e-6)
    assert scores.ndcg_10 == pytest.approx(0.6509209, abs=1e-6)
    assert scores.mrr_10 == pytest.approx(0.5)
    assert scores.recall_100 == 1.0


def test_relevant_documents_never_retrieved_count_in_the_ideal() -> None:
    # Three relevant, one retrieved at rank 1: DCG = 1; IDCG = 1 + 0.6309298 + 0.5 = 2.1309298
    scores = score_query(ranked("a", "x"), {"a": 1, "b": 1, "c": 1})
    assert scores.ndcg_10 == pytest.approx(1 / 2.1309298, abs=1e-6)
    assert scores.recall_100 == pytest.approx(1 / 3)
    assert scores.mrr_10 == 1.0


def test_no_relevant_retrieved_scores_zero() -> None:
    scores = score_query(ranked("x", "y", "z"), {"a": 1})
    assert (scores.ndcg_10, scores.recall_100, scores.mrr_10) == (0.0, 0.0, 0.0)


def test_cutoffs() -> None:
    eleventh = [f"d{i:02d}" for i in range(10)] + ["a"]
    scores = score_query(ranked(*eleventh), {"a": 1})
    assert scores.ndcg_10 == 0.0  # rank 11 is past the nDCG@10 cut
    assert scores.mrr_10 == 0.0
    assert scores.recall_100 == 1.0
    hundred_first = [f"d{i:03d}" for i in range(100)] + ["a"]
    assert recall_at_k(hundred_first, {"a": 1}, 100) == 0.0


def test_ideal_dcg_is_cut_at_k() -> None:
    # Twelve relevant docs, all at the top: nDCG@10 is 1 (the ideal is cut at 10 too).
    docs = [f"r{i:02d}" for i in range(12)]
    assert ndcg_at_k(docs, dict.fromkeys(docs, 1), 10) == pytest.approx(1.0)
    assert recall_at_k(docs[:6], dict.fromkeys(docs, 1), 100) == pytest.approx(0.5)


def test_ties_are_broken_by_doc_id_whatever_the_returned_order() -> None:
    assert rank({"b": 0.5, "a": 0.5, "c": 0.9}) == ["c", "a", "b"]
    assert rank({"a": 0.5, "c": 0.9, "b": 0.5}) == ["c", "a", "b"]
    scores = score_query({"b": 0.5, "a": 0.5, "c": 0.9}, {"b": 1})
    assert scores.ndcg_10 == pytest.approx(1 / 2)  # b is third: 1/log2(4)
    assert scores.mrr_10 == pytest.approx(1 / 3)


def test_graded_gains_linear_and_exponential() -> None:
    qrels = {"a": 2, "b": 1}
    order = ["b", "a"]
    # linear: DCG = 1 + 2/log2(3) = 2.2618595; IDCG = 2 + 1/log2(3) = 2.6309298
    assert ndcg_at_k(order, qrels, 10, "linear") == pytest.approx(2.2618595 / 2.6309298, abs=1e-6)
    # exponential: DCG = 1 + 3/log2(3) = 2.8927893; IDCG = 3 + 1/log2(3) = 3.6309298
    assert ndcg_at_k(order, qrels, 10, "exponential") == pytest.approx(2.8927893 / 3.6309298, abs=1e-6)
    # the two agree on binary qrels
    assert ndcg_at_k(order, {"a": 1}, 10, "linear") == ndcg_at_k(order, {"a": 1}, 10, "exponential")


def test_grade_zero_is_judged_non_relevant() -> None:
    scores = score_query(ranked("n", "a"), {"a": 1, "n": 0})
    assert scores.mrr_10 == pytest.approx(0.5)
    assert scores.ndcg_10 == pytest.approx(0.6309298 / 1.0, abs=1e-6)
    assert mrr_at_k(["n"], {"n": 0}) == 0.0


def test_evaluate_means_counts_missing_queries_as_zero_and_skips_unjudged() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    summary, per_query = evaluate({"q1": ranked("a")}, qrels)
    assert set(per_query) == {"q1", "q2"}  # q3 has no relevant judgement
    assert summary.queries == 2
    assert summary.ndcg_10 == pytest.approx(0.5)
    assert summary.recall_100 == pytest.approx(0.5)
    assert summary.mrr_10 == pytest.approx(0.5)

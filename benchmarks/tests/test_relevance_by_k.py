from __future__ import annotations

from benchmarks.relevance_by_k import Answer, summarise


def test_summary_pairs_each_k_with_the_reference_and_counts_prefix_agreement() -> None:
    answers = [
        {3: Answer(["a", "b", "c"], [0.4, 0.3, 0.2]), 10: Answer(["a", "b", "c", "d"], [0.7, 0.5, 0.4, 0.1])},
        {3: Answer(["x", "y", "z"], [0.9, 0.8, 0.1]), 10: Answer(["x", "z", "y"], [0.9, 0.2, 0.1])},
    ]
    report = summarise(answers, reference=10)
    three = report["by_k"]["3"]
    assert three["prefix_of_reference"] == 1
    assert three["minus_reference_mean"] == -0.15
    assert three["minus_reference_largest"] == 0.3
    assert report["by_k"]["10"]["top_relevance_median"] == 0.8
    assert "prefix_of_reference" not in report["by_k"]["10"]

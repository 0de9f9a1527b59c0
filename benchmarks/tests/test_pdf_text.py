"""The PDF text-layer benchmark's counting (no engine, no documents)."""

from __future__ import annotations

from benchmarks.pdf_text import Totals, words


def test_words_are_letter_runs_of_four_or_more_case_folded_with_counts() -> None:
    assert words("The Table 1: tables, TABLE and a 2024 caption") == {"table": 2, "tables": 1, "caption": 1}


def test_recall_counts_each_reference_word_as_often_as_it_occurs_and_extra_words_apart() -> None:
    totals = Totals()
    recall, extra = totals.add(words("alpha alpha bravo charlie"), "alpha bravo delta delta", pages=2, cited=1)
    assert (recall, extra) == (0.5, 2)
    totals.add(words("echo"), "echo", pages=1, cited=1)
    assert (totals.recall, totals.extra, totals.cited, totals.pages) == (0.6, 2, 2, 3)

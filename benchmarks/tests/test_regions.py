"""The chunk regions benchmark's measuring (no stack, no models, no documents)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.regions import Char, alnum, coverage, empty_share, ground_truth, page_chars


def line_chars(text: str, top: float, left: float = 0.1, width: float = 0.01, height: float = 0.02) -> list[Char]:
    """One char per character of ``text`` on one line, ``width`` apart (spaces included)."""
    return [Char(ch, left + i * width, top, left + (i + 1) * width, top + height) for i, ch in enumerate(text)]


def test_alnum_case_folds_and_keeps_letters_and_digits_only() -> None:
    assert alnum("## The Straße, 2024 | *x*") == "thestrasse2024x"


def test_page_chars_are_fractions_of_the_page_bbox() -> None:
    raw: list[dict[str, Any]] = [{"text": "A", "x0": 10.0, "x1": 20.0, "top": 50.0, "bottom": 60.0}]
    (char,) = page_chars(raw, (0.0, 0.0, 100.0, 200.0))
    assert (char.text, char.x0, char.y0, char.x1, char.y1) == ("A", 0.1, 0.25, 0.2, 0.3)


def test_coverage_counts_char_centres_inside_a_box_with_tolerance() -> None:
    chars = line_chars("abcd", top=0.5)  # centres x 0.105 .. 0.135, y 0.51
    assert coverage(chars, [(0.1, 0.5, 0.14, 0.52)]) == 1.0
    assert coverage(chars, [(0.1, 0.5, 0.12, 0.52)]) == 0.5
    assert coverage(chars, [(0.1, 0.5, 0.1235, 0.52)]) == 0.75  # centre 0.125 is within the 0.002 tolerance
    assert coverage(chars, [(0.1, 0.5, 0.1235, 0.52)], tolerance=0.0) == 0.5
    assert coverage(chars, [(0.1, 0.5, 0.14, 0.52)], tolerance=0.0) == 1.0
    assert coverage(chars, [(0.1, 0.515, 0.14, 0.52)], tolerance=0.0) == 0.0  # centres y 0.51 above the box
    assert coverage(chars, [(0.5, 0.5, 0.6, 0.52), (0.1, 0.5, 0.12, 0.52)]) == 0.5
    assert coverage([], [(0.0, 0.0, 1.0, 1.0)]) is None


def test_empty_share_is_the_union_of_boxes_outside_the_text() -> None:
    page = (100.0, 100.0)
    assert empty_share([(0.1, 0.1, 0.5, 0.2)], [(0.1, 0.1, 0.5, 0.2)], page) == 0.0
    assert empty_share([(0.1, 0.1, 0.5, 0.2)], [(0.1, 0.1, 0.3, 0.2)], page) == pytest.approx(0.5)
    assert empty_share([(0.1, 0.1, 0.5, 0.2)], [], page) == 1.0
    # Overlapping boxes count once: union 0.1..0.6 x 0.1..0.2, text covers 0.1..0.35.
    assert empty_share([(0.1, 0.1, 0.5, 0.2), (0.3, 0.1, 0.6, 0.2)], [(0.1, 0.1, 0.35, 0.2)], page) == pytest.approx(
        0.5
    )
    assert empty_share([(0.2, 0.2, 0.2, 0.3)], [], page) is None


def test_ground_truth_aligns_chunk_chars_and_draws_one_footprint_per_line_run() -> None:
    chars = (
        line_chars("Header 12", top=0.05) + line_chars("The quick brown", top=0.2) + line_chars("fox jumps.", top=0.25)
    )
    truth = ground_truth(chars, "## The **quick** brown fox\n\njumps")
    page_text = "".join(c.text for c in chars)
    assert "".join(page_text[i] for i in truth.chars) == "Thequickbrownfoxjumps"
    assert len(truth.footprint) == 2
    first, second = truth.footprint
    # Spaces between matched words are inside the footprint (first to last char of the run).
    assert first == pytest.approx((0.1, 0.2, 0.1 + 15 * 0.01, 0.22))
    assert second == pytest.approx((0.1, 0.25, 0.1 + 9 * 0.01, 0.27))


def test_ground_truth_leaves_out_short_chance_matches() -> None:
    chars = line_chars("abc unrelated words here", top=0.3)
    assert ground_truth(chars, "abc xyz").chars == []
    assert ground_truth(chars, "").chars == []


def test_ground_truth_finds_text_out_of_page_order_and_leaves_claimed_repeats_to_later_chunks() -> None:
    chars = line_chars("left column text", top=0.1) + line_chars("right column text", top=0.1, left=0.5)
    page_text = "".join(c.text for c in chars)
    both = ground_truth(chars, "right column text left column text")
    assert "".join(page_text[i] for i in both.chars) == "leftcolumntextrightcolumntext"
    repeated = line_chars("same words again", top=0.1) + line_chars("same words again", top=0.3)
    first = ground_truth(repeated, "same words again")
    second = ground_truth(repeated, "same words again", frozenset(first.positions))
    assert first.footprint[0][1] == 0.1
    assert second.footprint[0][1] == 0.3

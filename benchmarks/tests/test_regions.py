"""The chunk regions benchmark's measuring (no stack, no models, no documents)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.regions import (
    Char,
    alnum,
    coverage,
    empty_share,
    ground_truth,
    is_rtl,
    measure_chunk,
    page_chars,
    reversed_lines,
    word_chars,
)


class StaticTruth:
    """One page's chars, as a truth source."""

    def __init__(self, chars: list[Char], size: tuple[float, float]) -> None:
        self._page = (chars, size)

    def page(self, number: int) -> tuple[list[Char], tuple[float, float]]:
        return self._page if number == 0 else ([], (1.0, 1.0))


def line_chars(text: str, top: float, left: float = 0.1, width: float = 0.01, height: float = 0.02) -> list[Char]:
    """One char per character of ``text`` on one line, ``width`` apart (spaces included)."""
    return [Char(ch, left + i * width, top, left + (i + 1) * width, top + height) for i, ch in enumerate(text)]


def test_alnum_case_folds_and_keeps_letters_and_digits_only() -> None:
    assert alnum("## The Straße, 2024 | *x*") == "thestrasse2024x"
    assert alnum("ﬁne ﻛﺘﺎب") == "fineكتاب"  # ligatures and presentation forms folded


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


def test_ground_truth_finds_text_out_of_page_order() -> None:
    chars = line_chars("left column text", top=0.1) + line_chars("right column text", top=0.1, left=0.5)
    page_text = "".join(c.text for c in chars)
    both = ground_truth(chars, "right column text left column text")
    assert "".join(page_text[i] for i in both.chars) == "leftcolumntextrightcolumntext"


def test_a_repeated_paragraph_is_the_first_copy_after_the_previous_chunks_start() -> None:
    repeated = (
        line_chars("same words again", top=0.1)
        + line_chars("other text between", top=0.2)
        + line_chars("same words again", top=0.3)
    )
    first = ground_truth(repeated, "same words again")
    assert first.footprint[0][1] == 0.1
    # The next chunk, the same words: the copy after where the first one starts.
    second = ground_truth(repeated, "same words again", first.positions[0] + 1)
    assert second.footprint[0][1] == 0.3
    # Overlapping chunks (the next starts inside the previous) stay on their copy.
    overlap = ground_truth(repeated, "again other text between", first.positions[0] + 1)
    assert [box[1] for box in overlap.footprint] == [0.1, 0.2]


def test_right_to_left_lines_are_read_the_other_way() -> None:
    # pdfminer gives a right-to-left line in visual order: its letters reversed.
    word = "سلام"
    chars = line_chars(word[::-1], top=0.1) + line_chars("abc", top=0.2)
    order = reversed_lines(chars)
    assert "".join(chars[i].text for i in order) == f"{word}cba"
    assert is_rtl("كتاب 12")
    assert not is_rtl("book 12")


def test_ocr_words_become_chars_sliced_along_their_line_and_turned_with_the_page() -> None:
    (a, b) = word_chars([("ab", (0.1, 0.2, 0.3, 0.4))])
    assert (a.text, b.text) == ("a", "b")
    assert (a.x0, a.y0, a.x1, a.y1) == pytest.approx((0.1, 0.2, 0.2, 0.4))
    assert (b.x0, b.y0, b.x1, b.y1) == pytest.approx((0.2, 0.2, 0.3, 0.4))


def test_a_scan_is_measured_against_the_ocr_truth_and_a_chunk_it_does_not_place_is_listed() -> None:
    words = [("Scanned", (0.1, 0.1, 0.3, 0.12)), ("page", (0.32, 0.1, 0.4, 0.12)), ("text", (0.42, 0.1, 0.5, 0.12))]
    truth = StaticTruth(word_chars(words), (100.0, 100.0))
    placed = {"page": 0, "ocr": True, "geometry": "ocr", "regions": [{"page": 0, "boxes": [[0.1, 0.1, 0.5, 0.12]]}]}
    result = measure_chunk(0, "Scanned page text", placed, truth)
    assert (result.placed, result.geometry, result.coverage, result.page_mismatch) == (True, "ocr", 1.0, False)
    missed = measure_chunk(1, "Scanned page text", {"page": 0, "ocr": True, "geometry": "none"}, truth)
    assert (missed.placed, missed.reason, missed.found_share) == (False, "ocr words not found", 1.0)

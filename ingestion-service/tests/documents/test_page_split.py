"""Cutting kreuzberg's Markdown into 0-based pages."""

from __future__ import annotations

from ingestion_service.documents.page_split import (
    PAGE_MARKER_FORMAT,
    Page,
    split_by_page_text,
    split_markers,
    strip_markers,
)


def test_markers_give_zero_based_pages() -> None:
    markdown = "".join(PAGE_MARKER_FORMAT.format(page_num=n) + f"text {n}" for n in (1, 2, 3))
    assert split_markers(markdown) == [Page(0, "text 1"), Page(1, "text 2"), Page(2, "text 3")]
    assert strip_markers(markdown) == "text 1\n\ntext 2\n\ntext 3"


def test_no_markers_is_none() -> None:
    assert split_markers("# Title\n\nbody") is None


def test_markdown_is_cut_where_each_page_text_starts() -> None:
    markdown = "# Report\n\nFirst page **body** text here.\n\n## Second\n\nSecond page begins with this sentence."
    pages = ["Report\nFirst page body text here.", "Second\nSecond page begins with this sentence."]
    assert split_by_page_text(markdown, pages) == [
        Page(0, "# Report\n\nFirst page **body** text here."),
        Page(1, "## Second\n\nSecond page begins with this sentence."),
    ]


def test_a_page_whose_start_is_not_found_stays_with_the_page_before() -> None:
    markdown = "Alpha page one has plenty of words.\n\nBeta page two also has words."
    pages = ["Alpha page one has plenty of words.", "Something rearranged entirely elsewhere", "Beta page two also has"]
    assert split_by_page_text(markdown, pages) == [
        Page(0, "Alpha page one has plenty of words."),
        Page(2, "Beta page two also has words."),
    ]


def test_a_page_whose_first_line_the_markdown_left_out_is_cut_at_its_next_line() -> None:
    markdown = "Alpha page one has plenty of words.\n\nSecond line of page two follows here.\n\nMore of page two."
    pages = [
        "Alpha page one has plenty of words.",
        "Running header left out of the Markdown\nSecond line of page two follows here.\nMore of page two.",
    ]
    assert split_by_page_text(markdown, pages) == [
        Page(0, "Alpha page one has plenty of words."),
        Page(1, "Second line of page two follows here.\n\nMore of page two."),
    ]

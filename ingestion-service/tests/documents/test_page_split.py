"""Cutting kreuzberg's Markdown into 0-based pages."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ingestion_service.documents.base import SourceFile
from ingestion_service.documents.kreuzberg_local import KreuzbergConverter
from ingestion_service.documents.page_split import (
    PAGE_MARKER_FORMAT,
    Page,
    split_by_page_text,
    split_markers,
    strip_markers,
)

if TYPE_CHECKING:
    from ..conftest import MakeSettings  # noqa: TID252


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


def test_a_page_that_starts_like_a_paragraph_of_the_page_before_is_cut_where_its_own_text_follows() -> None:
    opening = "Lorem ipsum dolor sit amet, consetetur sadipscing elitr"
    first = [f"{opening}, first paragraph one.", f"{opening}, first paragraph two.", f"{opening}, first three."]
    second = [f"{opening}, second page paragraph.", "And the second page ends here."]
    markdown = "\n\n".join([*first, *second])
    pages = ["\n".join(first), "\n".join(second)]
    assert split_by_page_text(markdown, pages) == [
        Page(0, "\n\n".join(first)),
        Page(1, "\n\n".join(second)),
    ]


def test_of_two_identical_places_of_a_page_start_the_one_where_the_page_should_start_wins() -> None:
    paragraph = "The same paragraph, word for word, opens every page of this document."
    markdown = "\n\n".join([paragraph, "Page one's own line.", paragraph, "Page two's own line."])
    pages = [f"{paragraph}\nPage one's own line.", f"{paragraph}\nPage two's own line."]
    assert split_by_page_text(markdown, pages) == [
        Page(0, f"{paragraph}\n\nPage one's own line."),
        Page(1, f"{paragraph}\n\nPage two's own line."),
    ]


def test_a_pdf_whose_second_page_opens_like_the_first_pages_paragraphs_keeps_each_paragraph_on_its_page(
    make_test_settings: MakeSettings, docs: Path
) -> None:
    path = docs / "pdf/docling__picture_classification.pdf"
    pages = KreuzbergConverter(make_test_settings()).convert(
        SourceFile(path=path, filename=path.name, media_type="application/pdf")
    )
    assert [page.meta["page"] for page in pages] == [0, 1]
    assert "Figure 1: This is an example image." in (pages[0].content or "")
    assert "Figure 2: This is an example image." in (pages[1].content or "")
    assert "Figure 2" not in (pages[0].content or "")

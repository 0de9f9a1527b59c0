"""A document's title for its chunks' context: metadata when it names the document, else the text, else the name."""

from __future__ import annotations

from typing import Any

import pytest
from haystack import Document

from ingestion_service.pipeline.context import document_title, title_from_filename, usable_title
from ingestion_service.tokens import TokenCounter

from .word_tokens import word_counter  # noqa: TID252


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return word_counter()


def _pages(*texts: str, **meta: Any) -> list[Document]:
    return [Document(content=text, meta=dict(meta)) for text in texts]


@pytest.mark.parametrize(
    ("raw", "title"),
    [
        ("Duck - Wikipedia", "Duck - Wikipedia"),
        ("  AMT General Handbook ", "AMT General Handbook"),
        ("Microsoft Word - Annual Review of Shuttle Services", "Annual Review of Shuttle Services"),
        ("Microsoft Word - SampleContract-Shuttle.docx", None),
        ("Untitled", None),
        ("PowerPoint Presentation", None),
        ("Untitled spreadsheet", None),
        ("loremipsum.jpg", None),
        ("S25C-0i25080113320", None),
        ("", None),
        (None, None),
    ],
)
def test_metadata_titles_that_name_nothing_are_refused(raw: object, title: str | None) -> None:
    assert usable_title(raw) == title


def test_file_names_become_words_when_they_have_some() -> None:
    assert title_from_filename("q3_sales-report.final.xlsx") == "q3 sales report final"
    assert title_from_filename("4983.txt") is None
    assert title_from_filename(None) is None


def test_the_metadata_title_comes_first(counter: TokenCounter) -> None:
    pages = _pages("# Heading on page one\n\ntext", title="Duck - Wikipedia", name="duck.html")
    assert document_title(pages, counter, title_page_tokens=20) == "Duck - Wikipedia"


def test_a_title_page_names_the_document(counter: TokenCounter) -> None:
    pages = _pages("## Quarterly Duck Survey", "## Revenue\n\n" + "words " * 40, title="PowerPoint Presentation")
    assert document_title(pages, counter, title_page_tokens=20) == "Quarterly Duck Survey"


def test_else_the_first_top_level_heading(counter: TokenCounter) -> None:
    pages = _pages("Some intro line\n\n# Test with tables\n\nA uniform table", name="word_tables.docx")
    assert document_title(pages, counter, title_page_tokens=2) == "Test with tables"


def test_a_plain_texts_first_line_when_it_stands_alone(counter: TokenCounter) -> None:
    text = "Microstructural development of white matter.\n\nAlterations of the architecture of white matter."
    pages = _pages(text, mime_type="text/plain", name="scifact-4983.txt")
    assert document_title(pages, counter, title_page_tokens=2) == "Microstructural development of white matter."
    single = _pages("Only one line here", mime_type="text/plain", name="notes.txt")
    assert document_title(single, counter, title_page_tokens=2) == "notes"


def test_last_the_file_name(counter: TokenCounter) -> None:
    pages = _pages("| a | b |\n| --- | --- |\n| 1 | 2 |", name="kreuzberg__excel_multi_sheet.xlsx")
    assert document_title(pages, counter, title_page_tokens=2) == "kreuzberg excel multi sheet"
    assert document_title([], counter, title_page_tokens=2) is None

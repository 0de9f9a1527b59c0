"""The Markdown splitter over a document's pages: titles and paths in every chunk's context, nothing
left as a lone heading or title, slides on their own paths."""

from __future__ import annotations

from typing import Any

import pytest
from haystack import Document

from ingestion_service.pipeline.components.markdown_splitter import MarkdownSplitter
from ingestion_service.pipeline.embed_text import CONTEXT_KEY, INDEX_BODY_KEY, EmbedTextBuilder
from shared_contract import MetaKey

from .word_tokens import word_counter  # noqa: TID252

PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


@pytest.fixture(scope="module")
def splitter() -> MarkdownSplitter:
    embed_text = EmbedTextBuilder(word_counter(), max_tokens=120, chunk_size=400, prefix="", use_breadcrumb=True)
    return MarkdownSplitter(embed_text, overlap=4, min_tokens=12)


def _pages(*texts: str, **meta: Any) -> list[Document]:
    return [Document(content=text, meta={**meta, MetaKey.PAGE: number}) for number, text in enumerate(texts)]


def text_of(chunk: Document) -> str:
    assert chunk.content is not None
    return chunk.content


def _words(prefix: str, count: int) -> str:
    return " ".join(f"{prefix}{i}" for i in range(count))


def test_every_chunk_is_indexed_with_the_title_and_its_heading_path(splitter: MarkdownSplitter) -> None:
    pages = _pages(f"# Annual report\n\n## Costs\n\n{_words('c', 30)}\n\n## Revenue\n\n{_words('r', 30)}", name="x.md")
    chunks = splitter.run(pages)["documents"]
    # The title heading alone is too small: it joins "Costs", and the two carry their common path.
    assert [chunk.meta[CONTEXT_KEY] for chunk in chunks] == [["Annual report"], ["Annual report", "Revenue"]]
    assert text_of(chunks[0]).startswith("# Annual report\n\n## Costs")
    assert text_of(chunks[1]).startswith("## Revenue")


def test_a_heading_at_the_foot_of_a_page_stays_on_it_and_heads_the_next_pages_chunks(
    splitter: MarkdownSplitter,
) -> None:
    pages = _pages(f"# Guide\n\n{_words('a', 30)}\n\n## Setup", f"{_words('b', 30)}", name="guide.pdf")
    chunks = splitter.run(pages)["documents"]
    assert [chunk.meta[MetaKey.PAGE] for chunk in chunks] == [0, 1]
    # Each chunk holds its own page's text only; the heading reaches page 1 through the path.
    assert text_of(chunks[0]).endswith("## Setup")
    assert text_of(chunks[1]).startswith("b0 b1")
    assert chunks[1].meta[MetaKey.HEADERS] == ["Guide", "Setup"]
    assert chunks[1].meta[CONTEXT_KEY] == ["Guide", "Setup"]


def test_a_title_page_joins_the_next_page_and_names_the_document(splitter: MarkdownSplitter) -> None:
    pages = _pages(
        "## Quarterly Duck Survey",
        f"## Revenue\n\n{_words('r', 30)}",
        f"## Costs\n\n{_words('c', 30)}",
        mime_type=PPTX,
        name="deck.pptx",
    )
    first, second = splitter.run(pages)["documents"]
    assert text_of(first).startswith("## Quarterly Duck Survey\n\n## Revenue")
    assert first.meta[MetaKey.PAGE] == 1
    # The chunk that opens with the title does not repeat it; the next slide's chunk carries it.
    assert first.meta[CONTEXT_KEY] == []
    assert second.meta[CONTEXT_KEY] == ["Quarterly Duck Survey", "Costs"]


def test_a_plain_text_whose_first_line_is_its_title_says_it_once_per_chunk(splitter: MarkdownSplitter) -> None:
    text = f"Duck migration\n\n{_words('a', 60)}\n\n{_words('b', 60)}"
    chunks = splitter.run(_pages(text, name="ducks.txt", mime_type="text/plain"))["documents"]
    assert len(chunks) > 1
    assert text_of(chunks[0]).startswith("Duck migration\n\n")
    assert chunks[0].meta[CONTEXT_KEY] == []
    assert [chunk.meta[CONTEXT_KEY] for chunk in chunks[1:]] == [["Duck migration"]] * (len(chunks) - 1)


def test_a_page_of_a_line_joins_the_next_page_but_a_small_slide_stays_alone(splitter: MarkdownSplitter) -> None:
    pdf = _pages(f"# Report\n\n{_words('a', 30)}", "Running header", f"{_words('b', 30)}", name="r.pdf")
    assert [(c.meta[MetaKey.PAGE], text_of(c)[:14]) for c in splitter.run(pdf)["documents"]] == [
        (0, "# Report\n\na0 a"),
        (2, "Running header"),
    ]
    deck = _pages(
        "## Deck title", f"## Two\n\n{_words('a', 30)}", "## Three\n\nshort", "## Four\n\nend", mime_type=PPTX
    )
    assert [c.meta[MetaKey.PAGE] for c in splitter.run(deck)["documents"]] == [1, 2, 3]


def test_a_slide_without_a_title_is_not_under_the_previous_slides(splitter: MarkdownSplitter) -> None:
    pages = _pages(
        f"## Second slide title\n\n{_words('a', 20)}", f"{_words('b', 20)}", mime_type=PPTX, name="deck.pptx"
    )
    chunks = splitter.run(pages)["documents"]
    assert [chunk.meta[MetaKey.HEADERS] for chunk in chunks] == [["Second slide title"], []]


def test_a_small_section_leads_the_large_one_after_it(splitter: MarkdownSplitter) -> None:
    pages = _pages(f"## Intro\n\nshort\n\n## Details\n\n{_words('d', 150)}", name="doc.md")
    chunks = splitter.run(pages)["documents"]
    assert text_of(chunks[0]).startswith("## Intro\n\nshort\n\n## Details\n\nd0 d1")
    assert all(chunk.meta[MetaKey.HEADERS] == ["Details"] for chunk in chunks)


def test_table_rows_are_indexed_as_pairs_and_shown_as_the_table(splitter: MarkdownSplitter) -> None:
    table = "| Year | Ducks |\n| --- | --- |\n| 2019 | 120 |\n| 2020 | 135 |"
    [chunk] = splitter.run(_pages(f"## Sheet1\n\n{table}", name="ducks.xlsx"))["documents"]
    assert text_of(chunk) == f"## Sheet1\n\n{table}"
    assert chunk.meta[INDEX_BODY_KEY] == "## Sheet1\n\nYear: 2019; Ducks: 120\nYear: 2020; Ducks: 135"

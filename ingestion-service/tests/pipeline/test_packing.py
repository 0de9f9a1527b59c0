"""Packing one section: whole blocks, no piece ending on a heading, tables cut between rows."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ingestion_service.pipeline.packing import SectionPacker, section_blocks
from ingestion_service.tokens import TokenCounter

from .word_tokens import word_counter  # noqa: TID252


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return word_counter()


def _packer(counter: TokenCounter, budget: int, *, keyed: bool = False, context_cost: int = 0) -> SectionPacker:
    def budget_for(context: Sequence[str]) -> int:
        return budget - context_cost * len(context)

    return SectionPacker(counter, budget_for, overlap=2, keyed_tables=keyed)


def _table(rows: int) -> str:
    lines = ["| Region | Sales | Profit |", "| --- | --- | --- |"]
    lines += [f"| region{i} | {1000 + i} | {200 + i} |" for i in range(rows)]
    return "\n".join(lines)


def test_blocks_are_paragraphs_headings_fences_and_tables() -> None:
    text = (
        "## Title\n\nFirst para\nstill first.\n\n```\n# code\n\nmore code\n```\n\n| a | b |\n| --- | --- |\n| 1 | 2 |"
    )
    blocks = section_blocks(text)
    assert [block.text.split("\n")[0] for block in blocks] == ["## Title", "First para", "```", "| a | b |"]
    assert blocks[0].is_heading
    assert blocks[2].text.endswith("```")
    assert len(blocks[3].tables) == 1


def test_paragraphs_are_packed_whole(counter: TokenCounter) -> None:
    paragraphs = [" ".join(f"p{n}w{i}" for i in range(8)) for n in range(5)]
    pieces = _packer(counter, 20).pack("\n\n".join(paragraphs))
    assert [piece.content for piece in pieces] == [
        f"{paragraphs[0]}\n\n{paragraphs[1]}",
        f"{paragraphs[2]}\n\n{paragraphs[3]}",
        paragraphs[4],
    ]
    assert all(piece.index_body == piece.content and piece.context == () for piece in pieces)


def test_a_piece_never_ends_on_a_heading(counter: TokenCounter) -> None:
    long = " ".join(f"w{i}" for i in range(18))
    pieces = _packer(counter, 20).pack(f"intro words here\n\n## Next part\n\n{long}")
    assert pieces[0].content == "intro words here"
    assert pieces[1].content.startswith("## Next part\n\n")


def test_a_paragraph_longer_than_a_piece_is_cut_with_its_heading_in_front(counter: TokenCounter) -> None:
    words = [f"w{i}" for i in range(50)]
    pieces = _packer(counter, 20).pack("## Heading\n\n" + " ".join(words))
    assert pieces[0].content.startswith("## Heading\n\nw0 w1")
    assert all(counter.count(piece.content) <= 20 for piece in pieces)
    assert pieces[-1].content.endswith("w49")


def test_a_short_title_line_leads_the_long_paragraph_after_it(counter: TokenCounter) -> None:
    words = [f"w{i}" for i in range(50)]
    pieces = _packer(counter, 20).pack("A study of ducks\n\n" + " ".join(words))
    assert pieces[0].content.startswith("A study of ducks\n\nw0 w1")
    assert all(counter.count(piece.content) <= 20 for piece in pieces)


def test_a_long_list_is_cut_between_items_and_its_heading_and_introduction_keep_the_first(
    counter: TokenCounter,
) -> None:
    items = [f"- {letter}. " + " ".join(f"{letter}{i}" for i in range(12)) for letter in "ABCD"]
    text = "## Indemnification\n\nThe consultant holds the commission harmless from:\n\n" + "\n".join(items)
    # Heading and introduction take 9 tokens, each item 14, the whole list 56: the list is cut.
    pieces = _packer(counter, 40).pack(text)
    assert [piece.content for piece in pieces] == [
        "## Indemnification\n\nThe consultant holds the commission harmless from:\n\n" + "\n".join(items[:2]),
        "\n".join(items[2:]),
    ]


def test_a_list_item_longer_than_a_piece_is_cut_on_its_own(counter: TokenCounter) -> None:
    long_item = "- " + " ".join(f"w{i}" for i in range(30))
    pieces = _packer(counter, 20).pack(f"- short item\n{long_item}\n- last item")
    contents = [piece.content for piece in pieces]
    assert contents[0].startswith("- short item\n\n- w0")
    assert contents[-1].endswith("- last item")
    assert all(counter.count(content) <= 20 for content in contents)


def test_a_small_table_stays_whole_with_its_caption(counter: TokenCounter) -> None:
    filler = " ".join(f"f{i}" for i in range(14))
    text = f"{filler}\n\nTable 2: sales by region\n\n{_table(3)}"
    # All of it takes 55 tokens: caption and table (41) move to a piece of their own.
    pieces = _packer(counter, 50).pack(text)
    assert pieces[0].content == filler
    assert pieces[1].content.startswith("Table 2: sales by region\n\n| Region | Sales | Profit |")
    assert pieces[1].content.endswith("| region2 | 1002 | 202 |")


def test_a_large_table_is_cut_between_rows_and_each_part_is_indexed_with_caption_and_header(
    counter: TokenCounter,
) -> None:
    text = f"Table 2: sales by region\n\n{_table(12)}"
    pieces = _packer(counter, 40).pack(text)
    assert len(pieces) >= 3
    first, rest = pieces[0], pieces[1:]
    assert first.content.startswith("Table 2: sales by region\n\n| Region | Sales | Profit |\n| --- | --- | --- |\n")
    assert first.context == ()
    for piece in rest:
        # Shown: the document's own rows only; indexed with the caption and the header row.
        assert piece.content.startswith("| region")
        assert "Region" not in piece.content
        assert piece.context == ("Table 2: sales by region", "| Region | Sales | Profit |\n| --- | --- | --- |")
    rows = [line for piece in pieces for line in piece.content.split("\n") if line.startswith("| region")]
    assert rows == [f"| region{i} | {1000 + i} | {200 + i} |" for i in range(12)]


def test_keyed_tables_index_each_row_as_column_value_pairs(counter: TokenCounter) -> None:
    pieces = _packer(counter, 200, keyed=True).pack(_table(2))
    [piece] = pieces
    assert piece.content == _table(2)
    assert piece.index_body == "Region: region0; Sales: 1000; Profit: 200\nRegion: region1; Sales: 1001; Profit: 201"


def test_the_context_of_a_continued_table_shrinks_its_budget(counter: TokenCounter) -> None:
    pieces = _packer(counter, 40, context_cost=10).pack(_table(12))
    assert all(counter.count(piece.index_body) <= 40 - 10 * len(piece.context) for piece in pieces)

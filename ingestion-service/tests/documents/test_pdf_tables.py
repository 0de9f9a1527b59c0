"""Ruled tables of text-layer PDFs come out of the kreuzberg engine as Markdown pipe tables
(``pdf_tables``): in place of the run of words kreuzberg flattened them into, merged cells
resolved, and nothing else of the page changed."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pdfplumber.page
import pytest
from haystack import Document
from pdfminer.pdfparser import PDFSyntaxError

from ingestion_service.documents import SourceFile, kreuzberg_local, pdf_tables
from ingestion_service.documents.kreuzberg_local import KreuzbergConverter
from ingestion_service.documents.pdf_tables import Table, place_tables, table_from_cells

if TYPE_CHECKING:
    from ..conftest import MakeSettings  # noqa: TID252

ECONOMICS = "pdf/kreuzberg__a_comparison_of_programming_languages_in_economics_16_jun_2014.pdf"
COUNTRIES = "pdf/kreuzberg__google_doc_document.pdf"
HPO = "pdf/docling__2305.03393v1-pg9.pdf"


@pytest.fixture(scope="module")
def converter(make_test_settings_module: MakeSettings) -> KreuzbergConverter:
    return KreuzbergConverter(make_test_settings_module())


def convert(converter: KreuzbergConverter, path: Path) -> list[Document]:
    return converter.convert(SourceFile(path=path, filename=path.name))


def without_tables(converter: KreuzbergConverter, path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Document]:
    """kreuzberg's reading alone, the table step left out."""
    with monkeypatch.context() as patch:
        patch.setattr(kreuzberg_local, "with_pdf_tables", lambda _path, documents, _survey, **_: documents)
        return convert(converter, path)


def page_text(documents: list[Document], page: int) -> str:
    (document,) = [document for document in documents if document.meta.get("page") == page]
    return document.content or ""


def pipe_rows(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith("|")]


def test_a_flattened_table_comes_out_as_a_pipe_table_in_place_of_its_run(
    converter: KreuzbergConverter, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = without_tables(converter, docs / ECONOMICS, monkeypatch)
    documents = convert(converter, docs / ECONOMICS)
    # kreuzberg's reading of Table 1 (page 16): every cell in one run of words and numbers.
    assert "Matlab 2014a 7.91 10.88 2014a 6.74 8.92 Python" in page_text(before, 15)
    text = page_text(documents, 15)
    rows = pipe_rows(text)
    # The two-level header (Mac / Windows over Version/Compiler, Time, Rel. Time) as one row.
    assert rows[0] == (
        "| Language | Mac Version/Compiler | Mac Time | Mac Rel. Time"
        " | Windows Version/Compiler | Windows Time | Windows Rel. Time |"
    )
    assert rows[1] == "| --- | --- | --- | --- | --- | --- | --- |"
    assert "| Matlab | 2014a | 7.91 | 10.88 | 2014a | 6.74 | 8.92 |" in rows
    assert len(rows) == 2 + 16  # the header, the separator, sixteen languages and compilers
    # The run is gone: each number once, in the table; the caption before it stays.
    assert "Matlab 2014a" not in text
    assert text.count("809.22") == 1
    assert text.startswith("Table 1: Average and Relative Run Time (Seconds)\n\n| Language |")
    # Only that page changed.
    assert [d.content for d in documents if d.meta["page"] != 15] == [d.content for d in before if d.meta["page"] != 15]
    assert [d.meta for d in documents] == [d.meta for d in before]


def test_cells_merged_across_columns_fill_each_column_they_cover(converter: KreuzbergConverter, docs: Path) -> None:
    text = page_text(convert(converter, docs / COUNTRIES), 0)
    assert pipe_rows(text) == [
        "|  | Indonesia | Germany | Austria | France | Vatican |",  # the flags (private-use glyphs) dropped
        "| --- | --- | --- | --- | --- | --- |",
        "| Continent | Asia | Europe | Europe | Europe | Europe |",
        "| Capital | Jakarta | Berlin | Vienna | Paris | Vatican City |",
        "| Currency | Rupia | EUR (€) | EUR (€) | EUR (€) | - |",
        "| Population | 273.879.7501 | 83,190,5562 | 8,935,1123 | 67,413,000 | 453 |",
    ]
    # kreuzberg wrote the table's first row as a heading and the rest as lines: none of it is left.
    assert "## Indonesia" not in text
    assert text.count("Vatican City") == 1
    assert text.endswith("453 |\n\n3 2020 estimate 2 2020 estimate 1 2021 estimate")  # the footnotes stay


def test_header_cells_spanning_rows_and_columns_name_each_column(
    converter: KreuzbergConverter, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = page_text(without_tables(converter, docs / HPO, monkeypatch), 0)
    text = page_text(convert(converter, docs / HPO), 0)
    rows = pipe_rows(text)
    # "# dec-layers" and "Language" span both header rows, "TEDs" three columns.
    assert rows[0] == "| # dec-layers | Language | TEDs simple | TEDs complex | TEDs all | mAP (0.75) |"
    assert rows[2] == "| 6 | OTSL HTML | 0.965 0.969 | 0.934 0.927 | 0.955 0.955 | 0.88 0.857 |"
    # Rules frame only the middle of this table: kreuzberg's run also holds the columns outside
    # them (# enc-layers, the inference time), so it stays as it was and the table follows it.
    assert text.startswith(before)
    assert text[len(before) :].startswith("\n\n| # dec-layers |")


@pytest.mark.parametrize("name", ["pdf/unstructured__list-item-example.pdf", "pdf/kreuzberg__searchable.pdf"])
def test_a_pdf_without_ruled_tables_is_unchanged(
    converter: KreuzbergConverter, docs: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # The list PDF's two columns sit in boxes pdfplumber reads as a 2 x 2 table of paragraphs;
    # the searchable PDF's only paths fill its pages.
    before = without_tables(converter, docs / name, monkeypatch)
    documents = convert(converter, docs / name)
    assert [(d.content, d.meta) for d in documents] == [(d.content, d.meta) for d in before]
    assert not any(pipe_rows(d.content or "") for d in documents)


def test_only_pages_with_rules_are_searched_for_tables(
    converter: KreuzbergConverter, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    searched: list[list[int]] = []
    real = pdf_tables.read_tables

    def recording(path: Path, pages: list[int], **kwargs: Any) -> Any:
        searched.append(list(pages))
        return real(path, pages, **kwargs)

    monkeypatch.setattr(pdf_tables, "read_tables", recording)
    convert(converter, docs / ECONOMICS)
    convert(converter, docs / "pdf/kreuzberg__searchable.pdf")
    assert searched == [[15]]  # of sixteen pages, the one with Table 1; none of the other PDF


def test_a_page_pdfplumber_cannot_read_costs_only_its_tables(
    converter: KreuzbergConverter, docs: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    before = without_tables(converter, docs / COUNTRIES, monkeypatch)

    def damaged(self: pdfplumber.page.Page, *args: Any, **kwargs: Any) -> Any:
        raise PDFSyntaxError("invalid content stream")

    monkeypatch.setattr(pdfplumber.page.Page, "find_tables", damaged)
    with caplog.at_level(logging.WARNING, logger=pdf_tables.__name__):
        (document,) = convert(converter, docs / COUNTRIES)
    assert document.content == before[0].content
    assert document.meta["pdf_tables_skipped"] == ["page 1: unreadable (PDFSyntaxError)"]
    assert "invalid content stream" in caplog.text


def test_pages_past_the_limit_keep_kreuzbergs_text(
    converter: KreuzbergConverter, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = without_tables(converter, docs / ECONOMICS, monkeypatch)
    monkeypatch.setattr(pdf_tables, "MAX_PAGES", 0)
    documents = convert(converter, docs / ECONOMICS)
    assert [d.content for d in documents] == [d.content for d in before]
    assert page_text(documents, 15) == page_text(before, 15)
    (page,) = [d for d in documents if d.meta["page"] == 15]
    assert page.meta["pdf_tables_skipped"] == ["page 16: past the first 0 pages with rules"]


# --- the table and its placement, on text built here ---------------------------------------------


def grid(rows: list[list[str]]) -> Table:
    """A table of single cells, 10 points a side."""
    boxes = [(10.0 * c, 10.0 * r, 10.0 * c + 10, 10.0 * r + 10) for r, row in enumerate(rows) for c in range(len(row))]
    table = table_from_cells(boxes, [text for row in rows for text in row])
    assert table is not None
    return table


def test_a_cell_with_a_pipe_keeps_it_escaped_and_a_row_label_spanning_rows_labels_each() -> None:
    # "Fruit" spans two rows; "a|b" holds a pipe.
    boxes = [(0.0, 0.0, 10.0, 10.0), (10.0, 0.0, 20.0, 10.0), (0.0, 10.0, 10.0, 30.0), (10.0, 10.0, 20.0, 20.0)]
    boxes.append((10.0, 20.0, 20.0, 30.0))
    table = table_from_cells(boxes, ["Kind", "Name", "Fruit", "a|b", "pear"])
    assert table is not None
    assert table.markdown == "| Kind | Name |\n| --- | --- |\n| Fruit | a\\|b |\n| Fruit | pear |"


def test_boxes_that_do_not_tile_a_grid_are_no_table() -> None:
    # Three boxes of a 2 x 2 grid: a partial grid (a drawing, or a table ruled in part).
    boxes = [(0.0, 0.0, 10.0, 10.0), (10.0, 0.0, 20.0, 10.0), (0.0, 10.0, 10.0, 20.0)]
    assert table_from_cells(boxes, ["a", "b", "c"]) is None


def test_a_table_kreuzberg_already_wrote_is_not_written_again() -> None:
    table = grid([["Year", "Ducks"], ["2024", "12"]])
    content = "Counts.\n\n| Year | Ducks |\n| --- | --- |\n| 2024 | 12 |\n\nMore text."
    assert place_tables(content, [table]) == content


def test_a_run_with_words_of_the_page_inside_it_stays_and_the_table_follows() -> None:
    table = grid([["Year", "Ducks", "Geese"], ["2024", "12", "7"], ["2025", "14", "9"]])
    content = "Intro.\n\nYear Ducks Geese 2024 12 seen near the lake 7 2025 14 9\n\nOutro."
    assert place_tables(content, [table]) == f"{content}\n\n{table.markdown}"
    assert place_tables("Intro. Year Ducks Geese 2024 12 7 2025 14 9 Outro.", [table]) == (
        f"Intro.\n\n{table.markdown}\n\nOutro."
    )

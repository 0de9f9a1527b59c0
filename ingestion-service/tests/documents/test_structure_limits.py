"""Structural limits before extraction: the cells tables expand to (MAX_TABLE_CELLS) and XML depth.

The inputs are a few KB built here; the counts are what the engines would build, so each bomb is
refused without an engine ever seeing it.
"""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ingestion_service.documents.base import SourceFile
from ingestion_service.documents.docx_package import MAX_DEPTH
from ingestion_service.documents.kreuzberg_local import KreuzbergConverter
from ingestion_service.documents.structure_limits import (
    check_structure,
    check_xml_depth,
    delimited_text_chars,
    table_cells,
)
from ingestion_service.errors import CORRUPT_REASON, DocumentTooLargeError, ExtractionError

from ..workbooks import XlsCells, sparse_xls_bomb, value, xls, xls_stream, xlsx  # noqa: TID252

if TYPE_CHECKING:
    from ingestion_service.settings import Settings

    from ..conftest import MakeSettings  # noqa: TID252

_ODS_MIMETYPE = "application/vnd.oasis.opendocument.spreadsheet"
# LibreOffice ends every sheet with its empty rest: rows and columns repeated to the sheet's edge.
_LIBREOFFICE_TAIL = (
    '<table:table-row table:style-name="ro1" table:number-rows-repeated="1048553">'
    '<table:table-cell table:number-columns-repeated="16384"/></table:table-row>'
)


# The audit's bomb: two cells, A1 and IP100000; the engine builds the 250 × 100,000 grid between them (5.9 GB).
SPARSE_BOMB = f'<row r="1">{value("A1")}</row><row r="100000">{value("IP100000")}</row>'


def ods(tables: str) -> bytes:
    """A spreadsheet whose content.xml holds ``tables``."""
    content = (
        '<?xml version="1.0" encoding="UTF-8"?><office:document-content '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0">'
        f"<office:body><office:spreadsheet>{tables}</office:spreadsheet></office:body></office:document-content>"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("mimetype", _ODS_MIMETYPE)
        archive.writestr("content.xml", content, compress_type=zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def ods_row(cells: str, repeat: int = 1) -> str:
    return f'<table:table-row table:number-rows-repeated="{repeat}">{cells}</table:table-row>'


def ods_cell(text: str = "zebra", repeat: int = 1) -> str:
    return (
        f'<table:table-cell table:number-columns-repeated="{repeat}" office:value-type="string">'
        f"<text:p>{text}</text:p></table:table-cell>"
    )


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


@pytest.fixture
def settings(make_test_settings: MakeSettings) -> Settings:
    return make_test_settings()


def assert_too_many_cells(path: Path, settings: Settings) -> None:
    with pytest.raises(DocumentTooLargeError) as refused:
        check_structure(path, settings)
    assert refused.value.status_code == 413
    assert refused.value.code == "DOCUMENT_TOO_LARGE"
    assert f"MAX_TABLE_CELLS ({settings.max_table_cells})" in refused.value.detail()


# --- XLSX -------------------------------------------------------------------------------------------


def test_sparse_xlsx_bomb_is_refused(tmp_path: Path, settings: Settings) -> None:
    path = write(tmp_path, "bomb.xlsx", xlsx(SPARSE_BOMB))
    assert path.stat().st_size < 2000
    assert table_cells(path) == 250 * 100_000
    assert_too_many_cells(path, settings)


def test_the_limit_is_the_setting(tmp_path: Path, make_test_settings: MakeSettings) -> None:
    path = write(tmp_path, "s.xlsx", xlsx(f'<row r="1">{value("A1")}</row><row r="10">{value("J10")}</row>'))
    check_structure(path, make_test_settings(max_table_cells=100))
    assert_too_many_cells(path, make_test_settings(max_table_cells=99))


def test_real_workbooks_are_counted_as_the_engine_builds_them(docs: Path, settings: Settings) -> None:
    for name, cells in (("kreuzberg__excel_multi_sheet.xlsx", 16), ("tika__testEXCEL_textbox.xlsx", 0)):
        path = docs / "xlsx" / name
        assert table_cells(path) == cells
        check_structure(path, settings)


def test_empty_and_styled_cells_do_not_widen_a_sheet(tmp_path: Path) -> None:
    # Formatting far out (a cell without a value) costs the engine nothing.
    data = f'<row r="1">{value("A1")}{value("B1")}</row><row r="3">{value("C3")}</row><row r="900000"><c r="XFD900000" s="3"/></row>'
    assert table_cells(write(tmp_path, "s.xlsx", xlsx(data))) == 3 * 3


def test_rows_and_cells_without_references_follow_the_previous_one(tmp_path: Path) -> None:
    # As calamine places them: a row's end moves to the next row, an empty <c/> takes a column.
    data = '<row r="5"><c><v>1</v></c><c><v>2</v></c></row><row><c><v>3</v></c><c/><c><v>4</v></c></row>'
    assert table_cells(write(tmp_path, "s.xlsx", xlsx(data))) == 6 * 3
    # Row ends without rows still move down; a row nested in a row (no end between) does not reset the column.
    data = f'<row r="1">{value("C1")}<row><c><v>1</v></c></row>' + "</row>" * 999 + "<row><c><v>2</v></c></row>"
    assert table_cells(write(tmp_path, "t.xlsx", xlsx(data))) == 1001 * 4


def test_a_sheet_listed_twice_counts_twice(tmp_path: Path) -> None:
    # The engine reads a sheet per listing; two listings of one part read it twice.
    data = xlsx(f'<row r="1">{value("A1")}</row><row r="100">{value("J100")}</row>')
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(tmp_path / "twice.xlsx", "w") as target:
        for member in source.infolist():
            part = source.read(member)
            if member.filename == "xl/workbook.xml":
                part = part.replace(b"</sheets>", b'<sheet name="T" sheetId="2" r:id="rId1"/></sheets>')
            target.writestr(member, part)
    assert table_cells(tmp_path / "twice.xlsx") == 2 * 1000


def test_every_sheet_counts_wherever_the_workbook_points(tmp_path: Path) -> None:
    path = write(tmp_path, "s.xlsx", xlsx(SPARSE_BOMB, sheet="hidden/s.xml", target="/hidden/s.xml"))
    assert table_cells(path) == 250 * 100_000


def test_damaged_sheet_xml_is_read_as_forgivingly_as_the_engine_reads_it(tmp_path: Path) -> None:
    # The engine reads past a control byte, a mismatched tag and a ">" in an attribute value.
    damaged = f'<row r="1" x="\x01 a>b">{value("A1")}<q></z></row><row r="100000">{value("IP100000")}</row>'
    assert table_cells(write(tmp_path, "s.xlsx", xlsx(damaged))) == 250 * 100_000


def test_a_reference_inside_another_attribute_s_value_is_no_reference(tmp_path: Path) -> None:
    data = f"""<row r="1">{value("A1")}</row><row r="100000"><c x=' r="B2"' r="IP100000"><v>1</v></c></row>"""
    assert table_cells(write(tmp_path, "s.xlsx", xlsx(data))) == 250 * 100_000


def test_cells_in_comments_do_not_count(tmp_path: Path) -> None:
    data = f'<row r="1">{value("A1")}</row><!-- <row r="100000">{value("IP100000")}</row> -->'
    assert table_cells(write(tmp_path, "s.xlsx", xlsx(data))) == 1


# --- ODS --------------------------------------------------------------------------------------------


def test_real_ods_passes_also_with_libreoffice_s_empty_tail(docs: Path, tmp_path: Path, settings: Settings) -> None:
    real = docs / "ods/docling__odf_table_with_title_01.ods"
    assert table_cells(real) == 30
    check_structure(real, settings)
    # The same sheet ending the way LibreOffice writes it: a million empty rows of 16,384 empty cells.
    with zipfile.ZipFile(real) as source, zipfile.ZipFile(tmp_path / "tail.ods", "w") as target:
        for member in source.infolist():
            data = source.read(member)
            if member.filename == "content.xml":
                data = data.replace(b"</table:table>", _LIBREOFFICE_TAIL.encode() + b"</table:table>")
                assert _LIBREOFFICE_TAIL.encode() in data
            target.writestr(member, data)
    assert table_cells(tmp_path / "tail.ods") == 30
    check_structure(tmp_path / "tail.ods", settings)


def test_ods_repeat_bomb_is_refused(tmp_path: Path, settings: Settings) -> None:
    # One row repeated 10,000 times holding one cell repeated 1,000 times: 10 M cells from ~1 KB.
    bomb = ods_row(ods_cell(repeat=1000), repeat=10_000)
    path = write(tmp_path, "bomb.ods", ods(f"<table:table>{bomb}</table:table>"))
    assert path.stat().st_size < 1500
    assert table_cells(path) == 10_000_000
    assert_too_many_cells(path, settings)


def test_ods_counts_sheets_up_to_their_last_value(tmp_path: Path) -> None:
    text_only = "<table:table-cell><text:p>x</text:p></table:table-cell>"
    first = ods_row(ods_cell() + "<table:table-cell/>" + ods_cell()) + ods_row(text_only)
    empty_tail = ods_row('<table:table-cell table:number-columns-repeated="1000"/>', repeat=5000)
    second = ods_row(ods_cell(repeat=2), repeat=4)
    tables = f'<table:table table:name="A">{first}{empty_tail}</table:table><table:table table:name="B">{second}</table:table>'
    path = write(tmp_path, "s.ods", ods(tables))
    assert table_cells(path) == 2 * 3 + 4 * 2


def test_tables_sharing_a_name_cost_the_largest_each(tmp_path: Path) -> None:
    # The engine reads a sheet per listed name, and finds one table under both listings.
    big, small = ods_row(ods_cell(repeat=10), repeat=10), ods_row(ods_cell())
    tables = f'<table:table table:name="S">{big}</table:table><table:table table:name="S">{small}</table:table>'
    assert table_cells(write(tmp_path, "s.ods", ods(tables))) == 2 * 100


# --- HTML -------------------------------------------------------------------------------------------


def test_html_colspan_bomb_is_refused(tmp_path: Path, settings: Settings) -> None:
    path = write(tmp_path, "bomb.html", "<table>" + '<tr><td colspan="1000">y</td></tr>' * 20_000 + "</table>")
    assert table_cells(path, settings.max_table_cells) > settings.max_table_cells
    assert_too_many_cells(path, settings)


def test_real_html_table_passes(docs: Path, settings: Settings) -> None:
    path = docs / "html/kreuzberg__complex_table.html"
    assert table_cells(path) == 72
    check_structure(path, settings)


def test_html_grid_is_rows_by_the_widest_row_spans_included(tmp_path: Path) -> None:
    capped = "<table>" + '<tr><td colspan="5000">y</td></tr>' * 3 + "</table>"  # engines cap colspan at 1000
    assert table_cells(write(tmp_path, "a.html", capped)) == 3 * 1000
    # A rowspan widens the rows below it, only those that exist; nested tables count on their own.
    spanning = '<TABLE><tr><td rowspan="65534">a</td><td>b</td></tr><tr><td>c</td><td>d</td></tr></TABLE>'
    nested = "<table><tr><td><table><tr><td>x</td></tr></table></td></tr></table>"
    assert table_cells(write(tmp_path, "b.html", spanning + nested)) == 2 * 3 + 1 + 1


def test_html_cells_are_read_as_the_tokenizer_reads_them(tmp_path: Path) -> None:
    # Unquoted, upper-case and entity-coded spans count; an apostrophe in an unquoted value hides
    # nothing; cells inside comments, scripts and styles are no cells.
    spans = "<table><TR><TD COLSPAN=4>a<td title=it's colspan='&#51;'>b</table>"
    hidden = "<table><tr><td>x<!-- <td colspan=1000> --><script>'<td colspan=1000>'</script><style>td{}</style></table>"
    assert table_cells(write(tmp_path, "a.html", spans)) == 4 + 3
    assert table_cells(write(tmp_path, "b.html", hidden)) == 1


def test_html_self_closing_rows_are_empty_rows_and_a_self_closing_table_stays_open(tmp_path: Path) -> None:
    # <tr/> is a row with nothing in it; HTML ignores the slash of <table/>, so its cells still count.
    assert table_cells(write(tmp_path, "a.html", "<table><tr/><td>a</td><td>b</td></table>")) == 2 * 2
    assert table_cells(write(tmp_path, "b.html", '<table/><tr><td colspan="500">a</td></tr>')) == 500


# --- DOCX -------------------------------------------------------------------------------------------


W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def docx(table_rows: str) -> bytes:
    """A minimal DOCX whose body is one table of ``table_rows``."""
    body = f'<w:document xmlns:w="{W}"><w:body><w:p><w:r><w:t>Intro</w:t></w:r></w:p><w:tbl>{table_rows}</w:tbl></w:body></w:document>'
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", body)
    return buffer.getvalue()


def docx_row(*spans: int) -> str:
    cells = "".join(
        f'<w:tc><w:tcPr><w:gridSpan w:val="{span}"/></w:tcPr><w:p><w:r><w:t>x</w:t></w:r></w:p></w:tc>'
        if span != 1
        else "<w:tc><w:p><w:r><w:t>x</w:t></w:r></w:p></w:tc>"
        for span in spans
    )
    return f"<w:tr>{cells}</w:tr>"


def test_docx_grid_span_bomb_is_refused(tmp_path: Path, settings: Settings) -> None:
    # The engine writes a spanning cell once per column it spans: 2.3 KB became 3.7 GB.
    path = write(tmp_path, "bomb.docx", docx(docx_row(5000) * 4000))
    assert table_cells(path) == 4000 * 5000
    assert_too_many_cells(path, settings)


def test_docx_cells_add_up_row_by_row_spans_included(tmp_path: Path, docs: Path) -> None:
    # Rows are not padded to the widest; a nested table's cells count too.
    nested = "<w:tr><w:tc><w:tbl>" + docx_row(1, 1) + "</w:tbl><w:p/></w:tc></w:tr>"
    assert table_cells(write(tmp_path, "a.docx", docx(docx_row(3, 1) + docx_row(1) + nested))) == 4 + 1 + 1 + 2
    assert table_cells(docs / "docx/docling__word_tables.docx") == 97


# --- XLS --------------------------------------------------------------------------------------------


def test_sparse_xls_bomb_is_refused(tmp_path: Path, settings: Settings) -> None:
    path = write(tmp_path, "book.xls", sparse_xls_bomb(sheets=3))
    assert path.stat().st_size < 10_000
    assert table_cells(path) == 3 * 65536 * 256
    assert_too_many_cells(path, settings)


def test_xls_sheets_count_the_box_of_their_values_as_the_engine_builds_it(
    tmp_path: Path, make_test_settings: MakeSettings
) -> None:
    first: XlsCells = [(5, 3, "first"), (3000, 200, 1.5), (4000, 250, None)]  # a styled blank does not widen
    path = write(tmp_path, "book.xls", xls(xls_stream([first, [(0, 0, "only")]])))
    assert table_cells(path) == 2996 * 198 + 1
    extracted = KreuzbergConverter(make_test_settings()).convert(SourceFile(path=path, filename="book.xls"))
    assert sum(len(document.content or "") for document in extracted) > 2996 * 198  # a character per cell


def test_a_mulrk_record_widens_its_row_to_its_last_column(tmp_path: Path) -> None:
    stream = xls_stream([[(0, 0, "a"), (7, 2, 2.5)]])
    rk = stream.rfind(struct.pack("<HHHH", 0x027E, 10, 7, 2))  # RK: row 7, column 2
    mulrk = struct.pack("<HH", 7, 2) + struct.pack("<HI", 15, 0x3FF00000) * 3 + struct.pack("<H", 4)
    patched = stream[:rk] + struct.pack("<HH", 0x00BD, len(mulrk)) + mulrk + stream[rk + 14 :]
    assert table_cells(write(tmp_path, "book.xls", xls(patched))) == 8 * 5


def test_an_encryption_record_does_not_hide_the_cells(tmp_path: Path, settings: Settings) -> None:
    # The engine reads the cells after a FILEPASS record: 16.7 M of them, 1.5 GB.
    stream = xls_stream([[(0, 0, "a"), (65535, 255, "z")]])
    protect = stream.find(struct.pack("<HH", 0x0019, 2))  # WINDOWPROTECT in the workbook's globals
    path = write(tmp_path, "book.xls", xls(stream[:protect] + struct.pack("<HH", 0x002F, 2) + stream[protect + 4 :]))
    assert table_cells(path) == 65536 * 256
    assert_too_many_cells(path, settings)


def test_a_damaged_xls_is_left_to_the_engine(tmp_path: Path) -> None:
    whole = sparse_xls_bomb(sheets=1)
    assert table_cells(write(tmp_path, "cut.xls", whole[: len(whole) // 2])) == 0


# --- CSV --------------------------------------------------------------------------------------------


def test_csv_grid_bomb_is_refused(tmp_path: Path, settings: Settings) -> None:
    # The engine pads every row to the widest: one wide header over many short rows.
    path = write(tmp_path, "bomb.csv", "y" + ";" * 5000 + "\n" + "z\n" * 1000)
    assert table_cells(path) == 1001 * 5001
    assert_too_many_cells(path, settings)


def test_quoted_delimiters_and_line_breaks_do_not_count(tmp_path: Path, docs: Path) -> None:
    assert table_cells(docs / "csv/docling__csv-comma-in-cell.csv") == 20
    assert table_cells(write(tmp_path, "q.csv", 'a,"b\n,,,,",c\r\n1,2,3\r\n')) == 2 * 3


# A header, padding, quotes, empty and ragged rows, a tab-separated file, other scripts, controls.
TABLES = {
    "padded.csv": 'h1,h2,h3\n  a  ,b\n\n,,\nx,"y\nz",w,extra\n',
    "rows.tsv": "navn\tby\nÆøå\tTromsø\n東京\t大阪\n",
    "semicolons.csv": 'a;b\n1;"2;3"\n\x01\x02;\x7f\n',
    "header.csv": "only,header\n",
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_value_characters_never_exceed_the_extracted_text(
    name: str, tmp_path: Path, make_test_settings: MakeSettings
) -> None:
    path = write(tmp_path, name, TABLES[name])
    extracted = KreuzbergConverter(make_test_settings()).convert(SourceFile(path=path, filename=name))
    assert 0 < delimited_text_chars(path) <= sum(len(document.content or "") for document in extracted)


def test_the_value_characters_of_a_real_csv(docs: Path) -> None:
    # 20 one-character cells; one is a quoted comma, which the count leaves out.
    assert delimited_text_chars(docs / "csv/docling__csv-comma-in-cell.csv") == 19


def test_a_csv_whose_values_pass_max_extracted_chars_is_refused_before_extraction(
    tmp_path: Path, make_test_settings: MakeSettings
) -> None:
    settings = make_test_settings(max_extracted_chars=1000)
    path = write(tmp_path, "long.csv", "id;note\n" + "".join(f"{row:03};some text {row:04}\n" for row in range(100)))
    assert delimited_text_chars(path) == len("idnote") + 100 * len("000sometext0000")
    with pytest.raises(DocumentTooLargeError) as refused:
        check_structure(path, settings)
    assert refused.value.code == "DOCUMENT_TOO_LARGE"
    assert "(at least 1506 characters: its values) exceeds MAX_EXTRACTED_CHARS (1000)" in refused.value.detail()
    check_structure(path, make_test_settings(max_extracted_chars=1506))


def test_a_csv_that_is_not_utf8_is_left_to_the_engine(tmp_path: Path) -> None:
    path = write(tmp_path, "latin1.csv", "navn;by\nÆøå;Tromsø\n".encode("latin-1"))
    assert delimited_text_chars(path) == 0


# --- XML depth --------------------------------------------------------------------------------------


def nested(depth: int, *, prolog: str = '<?xml version="1.0"?>') -> str:
    return prolog + "<a>" * depth + "x" + "</a>" * depth


@pytest.mark.parametrize("suffix", [".xml", ".svg", ".opml"])
def test_xml_deeper_than_the_docx_cap_is_refused_as_unparseable(
    tmp_path: Path, settings: Settings, suffix: str
) -> None:
    path = write(tmp_path, f"deep{suffix}", nested(45_000))
    with pytest.raises(ExtractionError) as refused:
        check_structure(path, settings)
    assert refused.value.status_code == 422
    assert refused.value.detail() == CORRUPT_REASON
    assert f"deeper than {MAX_DEPTH} levels" in str(refused.value)


def test_xml_at_the_cap_passes(tmp_path: Path, settings: Settings) -> None:
    check_structure(write(tmp_path, "ok.xml", nested(MAX_DEPTH)), settings)
    with pytest.raises(ExtractionError):
        check_xml_depth(write(tmp_path, "over.xml", nested(MAX_DEPTH + 1)))


def test_malformed_xml_is_left_to_the_engine(tmp_path: Path, settings: Settings) -> None:
    check_structure(write(tmp_path, "bad.xml", '<?xml version="1.0"?><a><b></a>&& <<c'), settings)
    check_structure(write(tmp_path, "cut.xml", nested(10)[:-20]), settings)


def test_damage_does_not_hide_depth(tmp_path: Path) -> None:
    # The engine reads past a stray control byte; so does the depth check.
    with pytest.raises(ExtractionError):
        check_xml_depth(write(tmp_path, "deep.xml", nested(1000, prolog='<?xml version="1.0"?><r x="\x01">')))


def test_utf16_xml_is_measured_in_its_characters(tmp_path: Path) -> None:
    # Read byte by byte, every UTF-16 end tag would look like a start tag.
    check_xml_depth(write(tmp_path, "wide.xml", ("\ufeff" + nested(200)).encode("utf-16-le")))


def test_other_files_are_not_depth_checked(tmp_path: Path, settings: Settings) -> None:
    check_structure(write(tmp_path, "deep.md", nested(1000)), settings)

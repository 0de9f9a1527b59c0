"""The cells of XLSX-family and ODS workbooks, and of DOCX tables, counted from their XML parts."""

from __future__ import annotations

import contextlib
import functools
import html
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ingestion_service.documents.structure_limits.common import (
    DOCX_DOCUMENT,
    HUGE,
    ODS_MIMETYPES,
    ODS_SUFFIXES,
    XLSX_SHEET_DIRS,
    XLSX_WORKBOOK,
    XLSX_WORKBOOK_RELS,
    ZIP_DAMAGE,
    ExceededError,
    Tally,
)
from ingestion_service.documents.structure_limits.markup import (
    ANY_NAME,
    ATTRS,
    COMMENTS,
    SKIPPED_TEXT,
    Kind,
    count_value,
    first_attribute,
    largest_count,
    local_name,
    markup_pattern,
    matches,
    member_chunks,
    named_group,
    scan_markup,
    scanner,
    tag_attributes,
)

_CELL_REF = re.compile(rb"\s*([A-Za-z]+)([0-9]+)\s*")
_ODS_CELLS = (b"table-cell", b"covered-table-cell")
_RELATIONSHIPS = scanner((b"Relationship",))
_SHEETS = scanner((b"sheet",))
# A worksheet's cells, rows and row ends; a cell's r is read in the pattern when it comes first (as
# it does), and its value when it follows at once. A cell's end is not read: the next cell or row
# closes it (a value between cells would count, not hide one).
_SHEET = markup_pattern(
    (
        *COMMENTS,
        *SKIPPED_TEXT,
        rb"<(?!" + named_group((b"c", b"row", b"v", b"is")) + rb")" + ANY_NAME + ATTRS + b">",
        rb"</(?!" + named_group((b"row",)) + rb")[^>]*+>",
    ),
    (
        rb"<" + named_group((b"c",)) + rb"(?P<cell>(?:\s++r\s*+=\s*+\"(?P<letters>[A-Za-z]++)(?P<digits>[0-9]++)\")?"
        rb"(?P<tail>" + ATTRS + rb"))(?:(?<!/)>(?P<value><" + named_group((b"v", b"is")) + rb")|>)",
        rb"<" + named_group((b"row",)) + rb"(?P<row>" + ATTRS + rb")>",
        rb"(?P<row_end></" + named_group((b"row",)) + rb"[^>]*+>)",
        rb"(?P<v><" + named_group((b"v", b"is")) + rb")",
    ),
)
# Another r after the first (the engine takes the last).
_R_ATTRIBUTE = re.compile(rb"(?:^|\s)r\s*=")
# content.xml's tables, rows, cells and their ends, and text that is not only white space (it fills
# a cell); everything else is passed over in the pattern.
_ODS_CONTENT = markup_pattern(
    (
        *COMMENTS,
        rb"<!\[CDATA\[\s*+\]\]>",
        rb"\s++",
        rb"<(?!" + named_group((b"table", b"table-row", *_ODS_CELLS)) + rb")" + ANY_NAME + ATTRS + b">",
        rb"</(?!" + named_group((b"table", b"table-row", *_ODS_CELLS)) + rb")[^>]*+>",
    ),
    (
        rb"<" + named_group((b"table",)) + rb"(?P<table>" + ATTRS + rb")>",
        rb"(?P<table_end></" + named_group((b"table",)) + rb"[^>]*+>)",
        rb"<" + named_group((b"table-row",)) + rb"(?P<row>" + ATTRS + rb")>",
        rb"(?P<row_end></" + named_group((b"table-row",)) + rb"[^>]*+>)",
        # A cell holding at most paragraphs of plain text is read in one match, its end included.
        rb"<" + named_group(_ODS_CELLS) + rb"(?P<cell>" + ATTRS + rb")>"
        rb"(?P<whole>(?:\s++|<" + named_group((b"p",)) + ATTRS + rb">[^<]*+</" + named_group((b"p",)) + rb"\s*+>)*+"
        rb"</" + named_group(_ODS_CELLS) + rb"[^>]*+>)?",
        rb"(?P<cell_end></" + named_group(_ODS_CELLS) + rb"[^>]*+>)",
        rb"(?P<text>[^<]++|<!\[CDATA\[.*?\]\]>)",
    ),
)
_VALUE_TYPE = re.compile(rb"value-type\s*=")
# A whole cell holds text when something other than tags and white space comes first.
_HAS_TEXT = re.compile(rb"(?:<" + ATTRS + rb">|\s)*+[^<\s]")


def archive_cells(path: Path, suffix: str, tally: Tally) -> None:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            if XLSX_WORKBOOK in names:
                _workbook_cells(archive, names, tally)
            if DOCX_DOCUMENT in names:
                for part in sorted(name for name in names if name.startswith("word/") and name.endswith(".xml")):
                    _docx_cells(member_chunks(archive, part), tally)
            if "content.xml" in names and (suffix in ODS_SUFFIXES or _mimetype(archive, names) in ODS_MIMETYPES):
                _ods_cells(member_chunks(archive, "content.xml"), tally)
    except ZIP_DAMAGE:
        return  # not readable as a ZIP: the engine reports the damage


def _mimetype(archive: zipfile.ZipFile, names: set[str]) -> str:
    if "mimetype" not in names:
        return ""
    with archive.open("mimetype") as member:
        return member.read(100).decode("ascii", "replace").strip()


def _workbook_cells(archive: zipfile.ZipFile, names: set[str], tally: Tally) -> None:
    """Every sheet the workbook lists costs its part's grid, once per listing: the engine reads a
    sheet per listed name, and a name listed twice (or two names on one part) is read twice. Parts
    no listing reaches are counted once."""
    targets: dict[bytes, list[str]] = {}  # relationship id -> targets (of duplicate ids, all)
    if XLSX_WORKBOOK_RELS in names:
        for kind, _name, tag in scan_markup(member_chunks(archive, XLSX_WORKBOOK_RELS), _RELATIONSHIPS):
            if kind is not Kind.START:
                continue
            # Of repeated attributes, every reading (engines join repeated ids, or take one).
            attributes = list(tag_attributes(tag))
            idents = [value for key, value in attributes if key == b"Id"]
            for ident in {*idents, b"".join(idents)}:
                for key, value in attributes:
                    if key == b"Target" and value:
                        targets.setdefault(ident, []).append(value.decode("utf-8", "replace"))
    listings: dict[str, list[set[str]]] = {}  # sheet name -> the parts of each listing under it
    for kind, _name, tag in scan_markup(member_chunks(archive, XLSX_WORKBOOK), _SHEETS):
        if kind is Kind.START:
            attributes = list(tag_attributes(tag))
            ids = [value for key, value in attributes if local_name(key) == b"id"]
            parts = {part for ident in ids for target in targets.get(ident, ()) for part in _parts(target, names)}
            # The engine finds a sheet by its name: every listing under one name reads one part.
            sheets = {html.unescape(value.decode("utf-8", "replace")) for key, value in attributes if key == b"name"}
            for sheet in sheets or {""}:
                listings.setdefault(sheet, []).append(parts)
    measured: dict[str, int] = {}

    def cells(part: str) -> int:
        if part not in measured:
            own = Tally(tally.limit)
            with contextlib.suppress(ExceededError):
                _xlsx_sheet_cells(member_chunks(archive, part), own)
            measured[part] = own.total
        return measured[part]

    for parts_per_listing in listings.values():
        largest = max((cells(part) for parts in parts_per_listing for part in sorted(parts)), default=0)
        tally.add(len(parts_per_listing) * largest)
    unlisted = {name for name in names if name.startswith(XLSX_SHEET_DIRS) and name.endswith(".xml")} - set(measured)
    for part in sorted(unlisted):
        tally.add(cells(part))


def _parts(target: str, names: set[str]) -> set[str]:
    """The parts a relationship target may name: from the package root when it starts with "/",
    else from xl/ (engines differ; all that exist count)."""
    stripped = target.lstrip("/")
    return {stripped, f"xl/{stripped}", f"xl/{target}"} & names


def _xlsx_sheet_cells(chunks: Iterable[bytes], tally: Tally) -> None:
    """One worksheet: rows × columns up to its last cell with a value (<v> or an inline string <is>).

    Positions follow calamine's reading: a row's r sets the row, its end moves to the next row and
    back to the first column; a cell's r sets its place, a cell without one takes the column after
    the previous cell. Where the two could differ (damaged markup) the count here is the larger.
    """
    last_row = last_col = 0
    row, col = 1, 0  # the current row; the column of the previous cell in it
    cell: tuple[int, int] | None = None  # an open cell not yet found to hold a value
    for match in matches(chunks, _SHEET):
        kind = match.lastgroup
        if kind == "row_end":
            row, col, cell = row + 1, 0, None
            continue
        if kind == "row":
            number = first_attribute(match["row"], b"r")
            if number is not None:
                row, cell = count_value(number), None
            if match["row"].rstrip().endswith(b"/"):  # <row/>: a row and its end
                row, col, cell = row + 1, 0, None
            continue
        if kind == "v":
            if cell is None:
                continue
            cell_row, cell_col = cell
        else:  # a cell (<c/> too: it moves a column); "value" when its value follows at once
            digits, tail = match["digits"], match["tail"]
            if digits is not None and _R_ATTRIBUTE.search(tail) is None:
                cell_row, cell_col = (int(digits) if len(digits) <= 12 else HUGE), _column(match["letters"])
            else:
                cell_row, cell_col = _cell_position(match["cell"], row, col)
            row, col = max(row, cell_row), cell_col
            if kind != "value":
                cell = (cell_row, cell_col)
                continue
        cell = None
        if cell_row > last_row or cell_col > last_col:
            last_row, last_col = max(last_row, cell_row), max(last_col, cell_col)
            tally.check(last_row * last_col)
    tally.add(last_row * last_col)


def _cell_position(attributes: bytes, row: int, col: int) -> tuple[int, int]:
    """Where a cell whose r is not simply its first attribute sits: its r (of several, the furthest),
    else the column after the previous cell."""
    places = [ref for key, value in tag_attributes(attributes) if key == b"r" and (ref := _CELL_REF.fullmatch(value))]
    if not places:
        return row, col + 1
    return (
        max(int(ref[2]) if len(ref[2]) <= 12 else HUGE for ref in places),
        max(_column(ref[1]) for ref in places),
    )


@functools.lru_cache(maxsize=4096)
def _column(letters: bytes) -> int:
    number = 0
    for letter in letters.upper():
        number = number * 26 + letter - ord("A") + 1
        if number >= HUGE:
            return HUGE
    return number


@dataclass
class _Sheet:
    """One ODS table being read: its rows so far, the bounding box of its cells holding a value,
    and the row and cell being read."""

    name: str = ""
    rows: int = 0
    last_row: int = 0
    last_col: int = 0
    row_repeat: int = 1
    col: int = 0
    row_last_col: int = 0
    cell_reach: int = 0  # the last column the open cell covers (0: no cell open)
    cell_filled: bool = False

    @property
    def cells(self) -> int:
        return self.last_row * self.last_col

    def start_row(self, tag: bytes) -> None:
        repeat = largest_count(tag_attributes(tag), b"number-rows-repeated") if b"repeated" in tag else 1
        self.row_repeat, self.col, self.row_last_col = repeat, 0, 0

    def end_row(self) -> None:
        self.rows += self.row_repeat
        if self.row_last_col:
            self.last_row, self.last_col = self.rows, max(self.last_col, self.row_last_col)

    def start_cell(self, tag: bytes) -> None:
        repeat = span = 1
        if b"repeated" in tag or b"spanned" in tag:
            # Attributes by local name, the largest of duplicates: whatever prefix the engine honours.
            attributes = list(tag_attributes(tag))
            repeat = largest_count(attributes, b"number-columns-repeated")
            span = largest_count(attributes, b"number-columns-spanned")
        # A spanned cell reaches further (the engines leave the covered cells to their own elements).
        self.cell_reach = self.col + repeat + span - 1
        # A value type (however written, even inside another value: then counted, never missed).
        self.cell_filled = _VALUE_TYPE.search(tag) is not None
        self.col += repeat

    def end_cell(self) -> None:
        if self.cell_filled:
            self.row_last_col = max(self.row_last_col, self.cell_reach)
        self.cell_reach, self.cell_filled = 0, False

    def read(self, kind: str | None, match: re.Match[bytes]) -> None:
        """A row or cell, or its end (a self-closing one is both, a "whole" cell too)."""
        if kind == "whole":
            kind = "cell"
        if kind in ("cell", "row"):
            tag = match[kind]
            if kind == "cell":
                self.start_cell(tag)
                whole = match["whole"]
                if whole is not None and _HAS_TEXT.match(whole):
                    self.cell_filled = True
            else:
                self.start_row(tag)
                whole = None
            if whole is None and not tag.endswith(b"/"):
                return
            kind += "_end"
        if kind == "cell_end":
            self.end_cell()
        elif kind == "row_end":
            self.end_row()


_DOCX_TABLE_CELLS = scanner((b"tc", b"gridSpan"))


def _docx_cells(chunks: Iterable[bytes], tally: Tally) -> None:
    """A word-processing part's table cells, each as wide as its gridSpan: the engine writes a
    spanning cell once per column it spans (a 2.3 KB DOCX of 4,000 rows spanning 5,000 columns
    became 40 M characters and 3.7 GB). Rows are not padded to the widest, so cells add up."""
    for kind, name, tag in scan_markup(chunks, _DOCX_TABLE_CELLS):
        if kind is not Kind.START:
            continue
        tally.add(1 if name == b"tc" else largest_count(tag_attributes(tag), b"val") - 1)


def _ods_cells(chunks: Iterable[bytes], tally: Tally) -> None:
    """content.xml: per table, rows × columns up to its last cell with a value type or text, repeats
    applied (LibreOffice ends each sheet with empty rows and columns repeated to the sheet's edge).
    The engine reads a sheet per listed name: tables sharing a name cost the largest, once each."""
    sheets: list[_Sheet] = []  # nested tables (a table in a cell) are counted on their own
    finished: dict[str, list[int]] = {}  # table name -> cells of each table so named
    done = 0
    for match in matches(chunks, _ODS_CONTENT):
        kind = match.lastgroup
        if kind == "table":
            sheets.append(_Sheet(name=_table_name(match["table"])))
            if not match["table"].endswith(b"/"):
                continue
            kind = "table_end"
        if kind == "table_end":
            if sheets:
                sheet = sheets.pop()
                finished.setdefault(sheet.name, []).append(sheet.cells)
                done += sheet.cells
        elif kind == "text":
            for sheet in sheets:
                sheet.cell_filled = sheet.cell_filled or bool(sheet.cell_reach)
        elif sheets:
            sheets[-1].read(kind, match)
            if kind == "row_end":
                tally.check(done + sum(sheet.cells for sheet in sheets))
    for sheet in sheets:
        finished.setdefault(sheet.name, []).append(sheet.cells)
    tally.add(sum(len(tables) * max(tables) for tables in finished.values()))


def _table_name(tag: bytes) -> str:
    value = next((value for key, value in tag_attributes(tag) if local_name(key) == b"name"), b"")
    return html.unescape(value.decode("utf-8", "replace"))

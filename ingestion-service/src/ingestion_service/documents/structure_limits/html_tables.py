"""The cells of HTML tables: rows × the widest row, spans included, as browsers and the engines
build them."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from ingestion_service.documents.structure_limits.common import MAX_COLSPAN, MAX_ROWSPAN, Tally
from ingestion_service.documents.structure_limits.markup import file_chunks, markup_pattern, matches, xml_chunks


@dataclass
class _HtmlTable:
    """One <table> being read: rows × the widest row, cells spanning down from rows above included."""

    rows: int = 0
    width: int = 0
    row_open: bool = False
    row_width: int = 0
    carried: int = 0  # columns taken in this row by cells spanning down from rows above
    freed: dict[int, int] = field(default_factory=dict)  # row -> columns whose rowspan ends before it

    @property
    def cells(self) -> int:
        return self.rows * max(self.width, self.row_width)

    def start_row(self) -> None:
        self.end_row()
        self.rows += 1
        self.carried -= self.freed.pop(self.rows, 0)
        self.row_width = self.carried
        self.row_open = True

    def end_row(self) -> None:
        if self.row_open:
            self.width = max(self.width, self.row_width)
            self.row_open = False

    def add_cell(self, colspan: int, rowspan: int) -> None:
        if not self.row_open:
            self.start_row()
        self.row_width += colspan
        if rowspan != 1:
            self.carried += colspan
            if rowspan:  # 0: to the end of the table
                self.freed[self.rows + rowspan] = self.freed.get(self.rows + rowspan, 0) + colspan


_SPAN = re.compile(rb"\s*\+?(\d{1,12})")
_ROW_GROUPS = frozenset({b"thead", b"tbody", b"tfoot", b"caption", b"colgroup"})
_HTML_TABLE_TAGS = (b"table", b"tr", b"td", b"th", *sorted(_ROW_GROUPS))
# A tag's attributes as the HTML tokenizer reads them: a quote only opens a value right after "=",
# so the apostrophe in an unquoted value (title=it's) does not swallow the markup after it.
_HTML_ATTRS = rb"(?:[\s/]++|=?[^\s/>=]++(?:\s*+=\s*+(?:\"[^\"]*+\"|'[^']*+'|[^\s>]*+))?|=)*+"
_HTML_ATTRIBUTE = re.compile(rb"(=?[^\s/>=]+)(?:\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>]*)))?")
_HTML_NAME = rb"(?:" + b"|".join(_HTML_TABLE_TAGS) + rb")(?=[\s/>])"
# A cell's end changes nothing (the next cell or row closes it): skipped in the pattern.
_HTML_END_NAME = rb"(?:" + b"|".join(name for name in _HTML_TABLE_TAGS if name not in (b"td", b"th")) + rb")(?=[\s/>])"
_RAW_TEXT_NAMES = (b"script", b"style")
_RAW_TEXT = rb"(?:" + b"|".join(_RAW_TEXT_NAMES) + rb")(?=[\s/>])"
# Tables, rows, cells, row groups and their ends; comments, declarations, script and style bodies
# (raw text: a "<td>" in a script is no cell) and all other markup are passed over in the pattern.
_HTML_TABLES = re.compile(
    markup_pattern(
        (
            rb"<!--.*?-->",
            rb"<[!?][^>]*+>",
            *(
                rb"<" + name + rb"(?=[\s/>])" + _HTML_ATTRS + rb">.*?</" + name + rb"[\s/]*+>"
                for name in _RAW_TEXT_NAMES
            ),
            rb"[^<]++",
            rb"<(?!" + _HTML_NAME + rb"|" + _RAW_TEXT + rb")[A-Za-z][^\s/>]*+" + _HTML_ATTRS + rb">",
            rb"</(?!" + _HTML_END_NAME + rb")[^>]*+>",
        ),
        (
            # A cell is the common case: its own group, its attributes looked at only when they span.
            rb"(?P<cell><t[dh](?=[\s/>])" + _HTML_ATTRS + rb">)",
            rb"<(?P<start>" + _HTML_NAME + rb")" + _HTML_ATTRS + rb">",
            rb"</(?P<end>" + _HTML_END_NAME + rb")[^>]*+>",
        ),
    ).pattern,
    re.DOTALL | re.IGNORECASE,
)
_SPANNING = re.compile(rb"span", re.IGNORECASE)


def _span(value: bytes | None, *, cap: int, zero: int) -> int:
    """HTML's rules for a span attribute: leading digits, else 1; 0 means ``zero``; at most ``cap``."""
    match = _SPAN.match(value or b"")
    if match is None:
        return 1
    number = int(match.group(1))
    return min(number, cap) if number else zero


def _cell_spans(tag: bytes) -> tuple[int, int]:
    """A cell's (colspan, rowspan); of a repeated attribute the tokenizer keeps the first."""
    values: dict[bytes, bytes] = {}
    for match in _HTML_ATTRIBUTE.finditer(tag, 3):  # after "<td"
        value = next((part for part in match.groups()[1:] if part is not None), b"")
        if b"&" in value:
            value = html.unescape(value.decode("utf-8", "replace")).encode()
        values.setdefault(match[1].lower(), value)
    colspan = _span(values.get(b"colspan"), cap=MAX_COLSPAN, zero=1)
    rowspan = _span(values.get(b"rowspan"), cap=MAX_ROWSPAN, zero=0)
    return colspan, rowspan


def html_cells(path: Path, tally: Tally) -> None:
    """The grid of every <table>, nested ones on their own; the tally is checked at each row."""
    if not _contains(path, b"<table"):
        return  # no table: nothing to scan
    tables: list[_HtmlTable] = []
    done = 0  # cells of the tables already ended
    with path.open("rb") as handle:
        for match in matches(xml_chunks(handle), _HTML_TABLES):
            cell = match["cell"]
            if cell is not None:
                if not tables:
                    continue  # a cell outside any table
                table = tables[-1]
                if _SPANNING.search(cell) is None and table.row_open:
                    table.row_width += 1
                else:
                    table.add_cell(*_cell_spans(cell))
                continue
            start = match["start"]
            tag = (start if start is not None else match["end"]).lower()
            if not tables and (start is None or tag != b"table"):
                continue  # rows and ends outside any table
            if tag == b"table":
                if start is not None:
                    tables.append(_HtmlTable())
                    continue
                done += tables.pop().cells
            elif start is not None and tag == b"tr":
                tables[-1].start_row()
                if match.string[match.end() - 2] == ord("/"):
                    tables[-1].end_row()  # <tr/>: an empty row (<table/> stays open, as HTML has it)
            else:  # a row group's start or end, a row's end: a cell after it starts a new row
                tables[-1].end_row()
            tally.check(done + sum(table.cells for table in tables))
    tally.add(done + sum(table.cells for table in tables))


def _contains(path: Path, needle: bytes) -> bool:
    """Whether the file holds ``needle`` (ASCII, any case)."""
    overlap = b""
    with path.open("rb") as handle:
        for piece in file_chunks(handle):
            window = overlap + piece.lower()
            if needle in window:
                return True
            overlap = window[-len(needle) :]
    return False

"""Structural limits checked before extraction: the cells a document's tables expand to, and XML depth.

Spreadsheet and HTML engines build every table as a full grid in memory, however few of its cells
hold a value (kreuzberg; calamine under it for spreadsheets): a 1.6 KB XLSX whose only cells are A1
and IP100000 becomes a 250 × 100,000 grid and 5.9 GB, an 800-byte ODS row repeated 10,000 times
holding a cell repeated 1,000 times a 10 M cell grid, and 20,000 rows of ``<td colspan="1000">`` one
of 20 M, and a 5.6 KB XLS holding A1 and IV65536 on three sheets one of 50 M. Only MAX_EXTRACTED_CHARS
was checked, after extraction. Here each table's grid is counted
from the file's structure, streamed, and a document whose tables add up to more than MAX_TABLE_CELLS
is refused (DOCUMENT_TOO_LARGE) before any engine runs. A CSV/TSV whose values alone pass
MAX_EXTRACTED_CHARS is refused too, rather than after the engine spent seconds printing it.

The engines' XML readers need memory growing with the square of the nesting depth (the generic one:
45,000 levels in 315 KB take 4 GB), or recurse until the stack overflows (OPML: a segfault at 30,000
levels), so XML nested deeper than the DOCX reader's cap is refused as unparseable, as a DOCX part is.

Markup is read as forgivingly as the engines read it (no well-formedness checks): a strict parser
stops at a stray control byte or a mismatched tag that the engines read past, and the bomb behind
it would go uncounted.
"""

from __future__ import annotations

import codecs
import contextlib
import enum
import functools
import html
import itertools
import re
import struct
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import olefile

from ingestion_service.documents import _errors, plain_text
from ingestion_service.documents.docx_package import MAX_DEPTH
from ingestion_service.errors import DocumentTooLargeError
from ingestion_service.settings import Settings

_ENGINE = "content check"
_CHUNK = 1024 * 1024
# Any count beyond this is over every sensible limit; ten-digit row numbers need not be read exactly.
_HUGE = 2**40

# Names the engines parse as XML: kreuzberg's generic XML reader (quadratic in depth) takes these
# (its application/xml and text/xml types), SVG, and the XML formats it reads recursively.
_XML_SUFFIXES = frozenset(
    {
        ".xml",
        ".xsd",
        ".wsdl",
        ".config",
        ".resx",
        ".xsf",
        ".vml",
        ".addin",
        ".disco",
        ".dtsconfig",
        ".mno",
        ".vsct",
        ".vsixlangpack",
        ".vsixmanifest",
        ".vssettings",
        ".vstemplate",
        ".xrm-ms",
        ".ssisdeploymentmanifest",
        ".svg",
        ".opml",
        ".fb2",
        ".dbk",
        ".docbook",
        ".jats",
    }
)
# Read by the engines' HTML reader, which builds each <table> as rows × its widest row.
_HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
# Read as one table, every row padded to the widest; kreuzberg guesses the delimiter among these.
_DELIMITED_SUFFIXES = frozenset({".csv", ".tsv"})
_DELIMITERS = (b",", b";", b"\t", b"|")
_QUOTED = re.compile(rb'"[^"]*+"')
# Bytes that are no character of a value: ASCII whitespace and controls, delimiters, quotes, and the
# continuation bytes of UTF-8 characters (the lead byte counts the character).
_NOT_VALUE_CHARS = bytes([*range(0x21), 0x7F, *range(0x80, 0xC0)]) + b"".join(_DELIMITERS) + b'"'
# A ZIP is a workbook when it holds this part (as content.py decides); calamine reads no other.
_XLSX_WORKBOOK = "xl/workbook.xml"
_XLSX_WORKBOOK_RELS = "xl/_rels/workbook.xml.rels"
_XLSX_SHEET_DIRS = ("xl/worksheets/", "xl/macrosheets/", "xl/dialogsheets/")
# A ZIP is a word-processing document when it holds this part; tables may sit in any part under word/.
_DOCX_DOCUMENT = "word/document.xml"
_ODS_SUFFIXES = frozenset({".ods", ".ots"})
_ODS_MIMETYPES = frozenset(
    {"application/vnd.oasis.opendocument.spreadsheet", "application/vnd.oasis.opendocument.spreadsheet-template"}
)
# What zipfile raises for a damaged archive or member (RuntimeError: an encrypted one); the engine
# reports the damage, and what was read up to it is counted.
_ZIP_DAMAGE = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError, ValueError)
# Browsers, and the engines' HTML reader, cap colspan at 1000 and rowspan at 65534.
_MAX_COLSPAN = 1000
_MAX_ROWSPAN = 65534


def check_structure(path: Path, settings: Settings) -> None:
    """Refuse ``path`` whose XML nests deeper than MAX_DEPTH (EXTRACTION_FAILED, unparseable) or whose
    tables expand past MAX_TABLE_CELLS (DOCUMENT_TOO_LARGE); blocking: call in a thread.

    ``path`` is the file as engines will see it: its suffix picks the reader, as it picks theirs, and
    a ZIP's parts tell a workbook (as ``content`` tells it).
    """
    suffix = path.suffix.lower()
    if suffix in _XML_SUFFIXES:
        check_xml_depth(path)
    if suffix in _DELIMITED_SUFFIXES:
        check_delimited_text(path, settings.max_extracted_chars)
    limit = settings.max_table_cells
    if table_cells(path, limit) > limit:
        raise DocumentTooLargeError(
            f"The document's tables span more than MAX_TABLE_CELLS ({limit}) cells "
            "(rows × columns of each sheet or table, up to its last value)."
        )


def check_xml_depth(path: Path) -> None:
    """EXTRACTION_FAILED (unparseable, as a DOCX part) when the XML nests elements deeper than MAX_DEPTH.

    Only depth is judged: damaged XML is left to the engine, which reports it.
    """
    depth = 0
    with path.open("rb") as handle:
        for match in _matches(_xml_chunks(handle), _EVERY_TAG):
            if match.lastgroup == "end":
                depth = max(depth - 1, 0)
            elif match.string[match.end() - 2] != ord("/"):  # a start tag, not self-closing
                depth += 1
                if depth > MAX_DEPTH:
                    raise _errors.unparseable(_ENGINE, f"the XML nests elements deeper than {MAX_DEPTH} levels")


def check_delimited_text(path: Path, max_chars: int) -> None:
    """DOCUMENT_TOO_LARGE when a CSV/TSV surely extracts to more than MAX_EXTRACTED_CHARS.

    The engine spends seconds (and holds the GIL for part of them) printing a large table before
    its text could be measured; the values alone are known from the file.
    """
    least = delimited_text_chars(path, max_chars)
    if least > max_chars:
        raise DocumentTooLargeError(
            f"The document's extracted text (at least {least} characters: its values) exceeds "
            f"MAX_EXTRACTED_CHARS ({max_chars})."
        )


def delimited_text_chars(path: Path, limit: int | None = None) -> int:
    """A lower bound of the characters any engine extracts from a UTF-8 CSV/TSV (blocking).

    Every engine keeps each value (the header at least once), if trimmed and unquoted: the file's
    characters less ASCII whitespace, control characters, delimiters and quotes. 0 for a file that is
    not UTF-8: its encoding is the engine's guess. Counting stops once past ``limit``.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    total = 0
    with path.open("rb") as handle:
        try:
            for chunk in _file_chunks(handle):
                decoder.decode(chunk)  # validates; UTF-8 counts a character per byte not a continuation
                total += len(chunk.translate(None, _NOT_VALUE_CHARS))
                if limit is not None and total > limit:
                    break
            else:
                decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return 0
    return total


def table_cells(path: Path, limit: int | None = None) -> int:
    """The cells engines would build for ``path``'s tables, all sheets and tables together (blocking).

    Spreadsheets (XLSX family, ODS) count each sheet's rows × columns up to its last cell holding a
    value: trailing empty rows and columns (LibreOffice repeats a million) cost the engines nothing.
    HTML tables and CSV/TSV count rows × the widest row, empty cells included, as the engines pad
    them. DOCX table cells count once per column they span. Old binary XLS (BIFF5/8) sheets count
    the box from their first to their last cell holding a value, as the engine builds them. Counting
    stops once past ``limit``. XLSB and PPTX tables are not counted.
    """
    tally = _Tally(limit)
    suffix = path.suffix.lower()
    try:
        if suffix in _HTML_SUFFIXES:
            _html_cells(path, tally)
        if suffix in _DELIMITED_SUFFIXES:
            _delimited_cells(path, tally)
        if zipfile.is_zipfile(path):
            _archive_cells(path, suffix, tally)
        _xls_cells(path, tally)
    except _ExceededError:
        pass
    return tally.total


class _ExceededError(Exception):
    """Internal: the count passed the limit; the scan stops."""


class _Tally:
    """Cells of the tables counted so far; past ``limit`` the scan stops (``_ExceededError``)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.total = 0

    def check(self, pending: int) -> None:
        """``pending``: the cells of the tables still being read."""
        if self.limit is not None and self.total + pending > self.limit:
            self.total += pending
            raise _ExceededError

    def add(self, cells: int) -> None:
        self.total += cells
        self.check(0)


# --- Markup, read forgivingly -------------------------------------------------------------------


class _Kind(enum.Enum):
    """What :func:`_markup` found."""

    START = enum.auto()
    END = enum.auto()


_ATTRS = rb"(?:[^>\"']++|\"[^\"]*+\"|'[^']*+')*+"  # ">" inside a quoted value does not end a tag
_ANY_NAME = rb"[^\s/>!?<][^\s/>]*+"
_NAME = re.compile(rb"[^\s/>]*")
# What may follow a "<" that starts no markup ("a < b").
_NOT_MARKUP = frozenset({b" ", b"\t", b"\r", b"\n", b">", b"<"})


_PREFIX = rb"(?:[^\s/>:!?<]++:)?"
# Markup nobody reads, passed over inside the pattern (keeping Python out of the loop).
_COMMENTS = (rb"<!--.*?-->", rb"<\?.*?\?>", rb"<!(?!--|\[CDATA\[)(?:[^\[>]++|\[[^\]]*+\])*+>")
_SKIPPED_TEXT = (rb"<!\[CDATA\[.*?\]\]>", rb"[^<]++")
_ENDS = (rb"(?P<lone><)", rb"(?P<stop>\Z)")


def _named(names: tuple[bytes, ...]) -> bytes:
    return _PREFIX + rb"(?:" + b"|".join(re.escape(name) for name in names) + rb")(?=[\s/>])"


def _pattern(skip: Iterable[bytes], report: Iterable[bytes]) -> re.Pattern[bytes]:
    """From where the last match ended: the markup in ``skip``, then one construct of ``report``, a
    "<" that starts no markup (lone), or the end (stop)."""
    return re.compile(b"(?:" + b"|".join(skip) + b")*+(?:" + b"|".join((*report, *_ENDS)) + b")", re.DOTALL)


def _scanner(tags: tuple[bytes, ...] | None) -> re.Pattern[bytes]:
    """Reports start and end tags with a local name in ``tags`` (None: every tag), constructs
    delimited as quick-xml (the engines' reader) delimits them."""
    if tags is None:
        skip = [*_COMMENTS, *_SKIPPED_TEXT]
        report = [rb"<(?P<start>" + _ANY_NAME + rb")" + _ATTRS + b">", rb"</(?P<end>[^\s/>]*+)[^>]*+>"]
    else:
        skip = [
            *_COMMENTS,
            *_SKIPPED_TEXT,
            rb"<(?!" + _named(tags) + rb")" + _ANY_NAME + _ATTRS + b">",
            rb"</(?!" + _named(tags) + rb")[^>]*+>",
        ]
        report = [rb"<(?P<start>" + _named(tags) + rb")" + _ATTRS + b">", rb"</(?P<end>" + _named(tags) + rb")[^>]*+>"]
    return _pattern(skip, report)


def _matches(chunks: Iterable[bytes], pattern: re.Pattern[bytes]) -> Iterator[re.Match[bytes]]:
    """The constructs ``pattern`` (:func:`_pattern`) reports in a byte stream read in chunks.

    Read as the engines' reader (quick-xml) reads: no well-formedness checks, ``>`` inside a quoted
    attribute value does not end a tag, comments, processing instructions and declarations skipped.
    A construct cut off by the end of the stream is dropped. Linear in the input, however long one
    construct is.
    """
    parts: list[bytes] = []
    size = wait_for = 0
    for chunk in itertools.chain(chunks, (b"",)):
        end_of_stream = not chunk
        parts.append(chunk)
        size += len(chunk)
        if size < wait_for and not end_of_stream:
            continue
        buf = b"".join(parts)
        # Constructs end at a ">": what follows the last one waits for the next chunk.
        stop = len(buf) if end_of_stream else buf.rfind(b">") + 1
        pos = stop
        for match in pattern.finditer(buf, 0, stop):
            kind = match.lastgroup
            if kind == "stop":
                break
            if kind != "lone":
                yield match
            elif not end_of_stream and buf[match.end() : match.end() + 1] not in _NOT_MARKUP:
                pos = match.start()  # a construct whose end is still to come
                break
        rest = buf[pos:]
        parts, size = [rest], len(rest)
        # A long unfinished construct is retried once the buffer has doubled, not on every chunk.
        wait_for = 2 * size if size > _CHUNK else 0


def _markup(chunks: Iterable[bytes], pattern: re.Pattern[bytes]) -> Iterator[tuple[_Kind, bytes, bytes]]:
    """(kind, local name, the tag from its name on) of what ``pattern`` (:func:`_scanner`) reports; a
    self-closing tag is a START then an END."""
    for match in _matches(chunks, pattern):
        kind = match.lastgroup
        if kind == "start":
            local = _local(match["start"])
            tag = match.string[match.start("start") : match.end() - 1]
            yield _Kind.START, local, tag
            if tag.rstrip().endswith(b"/"):
                yield _Kind.END, local, b""
        elif kind == "end":
            yield _Kind.END, _local(match["end"]), b""


_EVERY_TAG = _scanner(None)


def _local(name: bytes) -> bytes:
    return name.rpartition(b":")[2]


_ATTRIBUTE = re.compile(rb"([^\s=/>\"']+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")


def _attributes(tag: bytes) -> Iterator[tuple[bytes, bytes]]:
    """A start tag's (qualified name, value) pairs, in order; read one after the other, so a value
    holding ``name="..."`` is no attribute."""
    name = _NAME.match(tag)
    for match in _ATTRIBUTE.finditer(tag, name.end() if name else 0):
        yield match[1], match[2] if match[2] is not None else match[3]


def _first(tag: bytes, name: bytes) -> bytes | None:
    """The first value of the attribute named exactly ``name`` (calamine's get_attribute takes the first)."""
    return next((value for key, value in _attributes(tag) if key == name), None)


def _largest_count(attributes: Iterable[tuple[bytes, bytes]], local: bytes) -> int:
    """The largest repeat count among attributes whose local name is ``local`` (any prefix), else 1."""
    return max((_count(value) for key, value in attributes if _local(key) == local), default=1)


def _count(value: bytes | None) -> int:
    """A repeat count: a positive integer (a leading "+" allowed, as the engine parses it), else 1."""
    digits = (value or b"").strip().removeprefix(b"+")
    if not digits.isdigit():
        return 1
    digits = digits.lstrip(b"0")
    if len(digits) > 12:
        return _HUGE
    return max(int(digits or b"0"), 1)


def _member_chunks(archive: zipfile.ZipFile, name: str) -> Iterator[bytes]:
    try:
        with archive.open(name) as member:
            while piece := member.read(_CHUNK):
                yield piece
    except _ZIP_DAMAGE:
        return  # the engine reports the damage


def _file_chunks(handle: BinaryIO) -> Iterator[bytes]:
    while piece := handle.read(_CHUNK):
        yield piece


def _xml_chunks(handle: BinaryIO) -> Iterator[bytes]:
    """The file's bytes, UTF-16/32 XML (which a byte scan would misread) re-encoded as UTF-8."""
    head = handle.read(4)
    handle.seek(0)
    encoding = plain_text.bom_encoding(head)
    if encoding is None and head[:2] in (b"<\x00", b"\x00<"):
        encoding = "utf-16-le" if head[0] == ord("<") else "utf-16-be"
    if encoding is None:
        yield from _file_chunks(handle)
        return
    decoder = codecs.getincrementaldecoder(encoding)("replace")
    for piece in _file_chunks(handle):
        yield decoder.decode(piece).encode("utf-8")
    yield decoder.decode(b"", final=True).encode("utf-8")


# --- Spreadsheets -------------------------------------------------------------------------------

_CELL_REF = re.compile(rb"\s*([A-Za-z]+)([0-9]+)\s*")
_ODS_CELLS = (b"table-cell", b"covered-table-cell")
_RELATIONSHIPS = _scanner((b"Relationship",))
_SHEETS = _scanner((b"sheet",))
# A worksheet's cells, rows and row ends; a cell's r is read in the pattern when it comes first (as
# it does), and its value when it follows at once. A cell's end is not read: the next cell or row
# closes it (a value between cells would count, not hide one).
_SHEET = _pattern(
    (
        *_COMMENTS,
        *_SKIPPED_TEXT,
        rb"<(?!" + _named((b"c", b"row", b"v", b"is")) + rb")" + _ANY_NAME + _ATTRS + b">",
        rb"</(?!" + _named((b"row",)) + rb")[^>]*+>",
    ),
    (
        rb"<" + _named((b"c",)) + rb"(?P<cell>(?:\s++r\s*+=\s*+\"(?P<letters>[A-Za-z]++)(?P<digits>[0-9]++)\")?"
        rb"(?P<tail>" + _ATTRS + rb"))(?:(?<!/)>(?P<value><" + _named((b"v", b"is")) + rb")|>)",
        rb"<" + _named((b"row",)) + rb"(?P<row>" + _ATTRS + rb")>",
        rb"(?P<row_end></" + _named((b"row",)) + rb"[^>]*+>)",
        rb"(?P<v><" + _named((b"v", b"is")) + rb")",
    ),
)
# Another r after the first (the engine takes the last).
_R_ATTRIBUTE = re.compile(rb"(?:^|\s)r\s*=")
# content.xml's tables, rows, cells and their ends, and text that is not only white space (it fills
# a cell); everything else is passed over in the pattern.
_ODS_CONTENT = _pattern(
    (
        *_COMMENTS,
        rb"<!\[CDATA\[\s*+\]\]>",
        rb"\s++",
        rb"<(?!" + _named((b"table", b"table-row", *_ODS_CELLS)) + rb")" + _ANY_NAME + _ATTRS + b">",
        rb"</(?!" + _named((b"table", b"table-row", *_ODS_CELLS)) + rb")[^>]*+>",
    ),
    (
        rb"<" + _named((b"table",)) + rb"(?P<table>" + _ATTRS + rb")>",
        rb"(?P<table_end></" + _named((b"table",)) + rb"[^>]*+>)",
        rb"<" + _named((b"table-row",)) + rb"(?P<row>" + _ATTRS + rb")>",
        rb"(?P<row_end></" + _named((b"table-row",)) + rb"[^>]*+>)",
        # A cell holding at most paragraphs of plain text is read in one match, its end included.
        rb"<" + _named(_ODS_CELLS) + rb"(?P<cell>" + _ATTRS + rb")>"
        rb"(?P<whole>(?:\s++|<" + _named((b"p",)) + _ATTRS + rb">[^<]*+</" + _named((b"p",)) + rb"\s*+>)*+"
        rb"</" + _named(_ODS_CELLS) + rb"[^>]*+>)?",
        rb"(?P<cell_end></" + _named(_ODS_CELLS) + rb"[^>]*+>)",
        rb"(?P<text>[^<]++|<!\[CDATA\[.*?\]\]>)",
    ),
)
_VALUE_TYPE = re.compile(rb"value-type\s*=")
# A whole cell holds text when something other than tags and white space comes first.
_HAS_TEXT = re.compile(rb"(?:<" + _ATTRS + rb">|\s)*+[^<\s]")


def _archive_cells(path: Path, suffix: str, tally: _Tally) -> None:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            if _XLSX_WORKBOOK in names:
                _workbook_cells(archive, names, tally)
            if _DOCX_DOCUMENT in names:
                for part in sorted(name for name in names if name.startswith("word/") and name.endswith(".xml")):
                    _docx_cells(_member_chunks(archive, part), tally)
            if "content.xml" in names and (suffix in _ODS_SUFFIXES or _mimetype(archive, names) in _ODS_MIMETYPES):
                _ods_cells(_member_chunks(archive, "content.xml"), tally)
    except _ZIP_DAMAGE:
        return  # not readable as a ZIP: the engine reports the damage


def _mimetype(archive: zipfile.ZipFile, names: set[str]) -> str:
    if "mimetype" not in names:
        return ""
    with archive.open("mimetype") as member:
        return member.read(100).decode("ascii", "replace").strip()


def _workbook_cells(archive: zipfile.ZipFile, names: set[str], tally: _Tally) -> None:
    """Every sheet the workbook lists costs its part's grid, once per listing: the engine reads a
    sheet per listed name, and a name listed twice (or two names on one part) is read twice. Parts
    no listing reaches are counted once."""
    targets: dict[bytes, list[str]] = {}  # relationship id -> targets (of duplicate ids, all)
    if _XLSX_WORKBOOK_RELS in names:
        for kind, _name, tag in _markup(_member_chunks(archive, _XLSX_WORKBOOK_RELS), _RELATIONSHIPS):
            if kind is not _Kind.START:
                continue
            # Of repeated attributes, every reading (engines join repeated ids, or take one).
            attributes = list(_attributes(tag))
            idents = [value for key, value in attributes if key == b"Id"]
            for ident in {*idents, b"".join(idents)}:
                for key, value in attributes:
                    if key == b"Target" and value:
                        targets.setdefault(ident, []).append(value.decode("utf-8", "replace"))
    listings: dict[str, list[set[str]]] = {}  # sheet name -> the parts of each listing under it
    for kind, _name, tag in _markup(_member_chunks(archive, _XLSX_WORKBOOK), _SHEETS):
        if kind is _Kind.START:
            attributes = list(_attributes(tag))
            ids = [value for key, value in attributes if _local(key) == b"id"]
            parts = {part for ident in ids for target in targets.get(ident, ()) for part in _parts(target, names)}
            # The engine finds a sheet by its name: every listing under one name reads one part.
            sheets = {html.unescape(value.decode("utf-8", "replace")) for key, value in attributes if key == b"name"}
            for sheet in sheets or {""}:
                listings.setdefault(sheet, []).append(parts)
    measured: dict[str, int] = {}

    def cells(part: str) -> int:
        if part not in measured:
            own = _Tally(tally.limit)
            with contextlib.suppress(_ExceededError):
                _xlsx_sheet_cells(_member_chunks(archive, part), own)
            measured[part] = own.total
        return measured[part]

    for parts_per_listing in listings.values():
        largest = max((cells(part) for parts in parts_per_listing for part in sorted(parts)), default=0)
        tally.add(len(parts_per_listing) * largest)
    unlisted = {name for name in names if name.startswith(_XLSX_SHEET_DIRS) and name.endswith(".xml")} - set(measured)
    for part in sorted(unlisted):
        tally.add(cells(part))


def _parts(target: str, names: set[str]) -> set[str]:
    """The parts a relationship target may name: from the package root when it starts with "/",
    else from xl/ (engines differ; all that exist count)."""
    stripped = target.lstrip("/")
    return {stripped, f"xl/{stripped}", f"xl/{target}"} & names


def _xlsx_sheet_cells(chunks: Iterable[bytes], tally: _Tally) -> None:
    """One worksheet: rows × columns up to its last cell with a value (<v> or an inline string <is>).

    Positions follow calamine's reading: a row's r sets the row, its end moves to the next row and
    back to the first column; a cell's r sets its place, a cell without one takes the column after
    the previous cell. Where the two could differ (damaged markup) the count here is the larger.
    """
    last_row = last_col = 0
    row, col = 1, 0  # the current row; the column of the previous cell in it
    cell: tuple[int, int] | None = None  # an open cell not yet found to hold a value
    for match in _matches(chunks, _SHEET):
        kind = match.lastgroup
        if kind == "row_end":
            row, col, cell = row + 1, 0, None
            continue
        if kind == "row":
            number = _first(match["row"], b"r")
            if number is not None:
                row, cell = _count(number), None
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
                cell_row, cell_col = (int(digits) if len(digits) <= 12 else _HUGE), _column(match["letters"])
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
    places = [ref for key, value in _attributes(attributes) if key == b"r" and (ref := _CELL_REF.fullmatch(value))]
    if not places:
        return row, col + 1
    return (
        max(int(ref[2]) if len(ref[2]) <= 12 else _HUGE for ref in places),
        max(_column(ref[1]) for ref in places),
    )


@functools.lru_cache(maxsize=4096)
def _column(letters: bytes) -> int:
    number = 0
    for letter in letters.upper():
        number = number * 26 + letter - ord("A") + 1
        if number >= _HUGE:
            return _HUGE
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
        repeat = _largest_count(_attributes(tag), b"number-rows-repeated") if b"repeated" in tag else 1
        self.row_repeat, self.col, self.row_last_col = repeat, 0, 0

    def end_row(self) -> None:
        self.rows += self.row_repeat
        if self.row_last_col:
            self.last_row, self.last_col = self.rows, max(self.last_col, self.row_last_col)

    def start_cell(self, tag: bytes) -> None:
        repeat = span = 1
        if b"repeated" in tag or b"spanned" in tag:
            # Attributes by local name, the largest of duplicates: whatever prefix the engine honours.
            attributes = list(_attributes(tag))
            repeat = _largest_count(attributes, b"number-columns-repeated")
            span = _largest_count(attributes, b"number-columns-spanned")
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


_DOCX_TABLE_CELLS = _scanner((b"tc", b"gridSpan"))


def _docx_cells(chunks: Iterable[bytes], tally: _Tally) -> None:
    """A word-processing part's table cells, each as wide as its gridSpan: the engine writes a
    spanning cell once per column it spans (a 2.3 KB DOCX of 4,000 rows spanning 5,000 columns
    became 40 M characters and 3.7 GB). Rows are not padded to the widest, so cells add up."""
    for kind, name, tag in _markup(chunks, _DOCX_TABLE_CELLS):
        if kind is not _Kind.START:
            continue
        tally.add(1 if name == b"tc" else _largest_count(_attributes(tag), b"val") - 1)


def _ods_cells(chunks: Iterable[bytes], tally: _Tally) -> None:
    """content.xml: per table, rows × columns up to its last cell with a value type or text, repeats
    applied (LibreOffice ends each sheet with empty rows and columns repeated to the sheet's edge).
    The engine reads a sheet per listed name: tables sharing a name cost the largest, once each."""
    sheets: list[_Sheet] = []  # nested tables (a table in a cell) are counted on their own
    finished: dict[str, list[int]] = {}  # table name -> cells of each table so named
    done = 0
    for match in _matches(chunks, _ODS_CONTENT):
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
    value = next((value for key, value in _attributes(tag) if _local(key) == b"name"), b"")
    return html.unescape(value.decode("utf-8", "replace"))


# --- HTML ---------------------------------------------------------------------------------------


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
    _pattern(
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
    colspan = _span(values.get(b"colspan"), cap=_MAX_COLSPAN, zero=1)
    rowspan = _span(values.get(b"rowspan"), cap=_MAX_ROWSPAN, zero=0)
    return colspan, rowspan


def _html_cells(path: Path, tally: _Tally) -> None:
    """The grid of every <table>, nested ones on their own; the tally is checked at each row."""
    if not _contains(path, b"<table"):
        return  # no table: nothing to scan
    tables: list[_HtmlTable] = []
    done = 0  # cells of the tables already ended
    with path.open("rb") as handle:
        for match in _matches(_xml_chunks(handle), _HTML_TABLES):
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
        for piece in _file_chunks(handle):
            window = overlap + piece.lower()
            if needle in window:
                return True
            overlap = window[-len(needle) :]
    return False


# --- XLS (BIFF5/8 in an OLE2 container) -----------------------------------------------------------

_XLS_STREAMS = ("Workbook", "Book")  # BIFF8, BIFF5
_XLS_BOF, _XLS_EOF, _XLS_BOUNDSHEET, _XLS_MULRK = 0x0809, 0x000A, 0x0085, 0x00BD
# Records that put a value in a cell, row and column first: FORMULA, LABELSST, NUMBER, LABEL, BOOLERR,
# RK, RSTRING. Blank cells (BLANK, MULBLANK), styled or not, do not widen the engine's grid.
_XLS_VALUES = frozenset({0x0006, 0x00FD, 0x0203, 0x0204, 0x0205, 0x027E, 0x00D6})
# A record's header (type, size), and a cell record's start (row, column).
_TWO_U16 = struct.Struct("<HH")
# What olefile raises for a damaged container; the engine reports the damage.
_OLE_DAMAGE = (OSError, ValueError, IndexError, KeyError, struct.error)


def _xls_cells(path: Path, tally: _Tally) -> None:
    """Each sheet the workbook lists costs its grid once per listing: the engine builds a sheet as the
    box from its first to its last value (two cells at A1 and IV65536 of a 5.6 KB file: 16.7 M cells,
    3.4 GB). A FILEPASS (encryption) record changes nothing: the engine reads the cells after it."""
    try:
        if not olefile.isOleFile(str(path)):
            return
        with olefile.OleFileIO(str(path)) as ole:
            stream = next((name for name in _XLS_STREAMS if ole.exists(name)), None)
            if stream is None or ole.get_type(stream) != olefile.STGTY_STREAM:
                return
            with ole.openstream(stream) as handle:
                workbook = handle.read()
    except _OLE_DAMAGE:
        return
    offsets: list[int] = []
    for kind, data in _biff_records(workbook, 0):
        if kind == _XLS_BOUNDSHEET and len(data) >= 4:
            offsets.append(int.from_bytes(data[:4], "little"))
    for offset in offsets:
        tally.add(_xls_sheet_cells(workbook, offset))


def _xls_sheet_cells(workbook: bytes, offset: int) -> int:
    """The box of a sheet's values, embedded substreams (charts) included."""
    first_row = first_col = 1 << 32
    last_row = last_col = -1
    for kind, data in _biff_records(workbook, offset):
        if kind in _XLS_VALUES and len(data) >= _TWO_U16.size:
            row, col = _TWO_U16.unpack_from(data)
            cols = (col, col)
        elif kind == _XLS_MULRK and len(data) >= 6:
            row, col = _TWO_U16.unpack_from(data)
            cols = (col, int.from_bytes(data[-2:], "little"))
        else:
            continue
        first_row, last_row = min(first_row, row), max(last_row, row)
        first_col, last_col = min(first_col, *cols), max(last_col, *cols)
    if last_row < 0:
        return 0
    return (last_row - first_row + 1) * (last_col - first_col + 1)


def _biff_records(workbook: bytes, offset: int) -> Iterator[tuple[int, memoryview]]:
    """The records of the substream starting at ``offset``, up to its EOF (nested substreams included)."""
    view = memoryview(workbook)
    depth = 0
    while offset + _TWO_U16.size <= len(workbook):
        kind, size = _TWO_U16.unpack_from(workbook, offset)
        start = offset + _TWO_U16.size
        offset = start + size
        yield kind, view[start : min(offset, len(workbook))]
        if kind == _XLS_BOF:
            depth += 1
        elif kind == _XLS_EOF:
            depth -= 1
            if depth <= 0:
                return


# --- CSV / TSV ----------------------------------------------------------------------------------


def _delimited_cells(path: Path, tally: _Tally) -> None:
    """Rows × the widest row, for whichever delimiter the engine picks (the widest count of any);
    delimiters and line breaks inside double quotes do not count (the engine's quotes open anywhere)."""
    rows = width = 0
    open_row = [0] * len(_DELIMITERS)  # delimiters of the row not yet ended (it may span pieces)
    open_started = quoted = False
    with path.open("rb") as handle:
        for chunk in _file_chunks(handle):
            # The engine ends a row at CR, LF or CRLF (a CRLF cut between pieces adds an empty row).
            piece = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if quoted:
                closing = piece.find(b'"')
                if closing < 0:
                    continue  # all inside the open quote
                piece, quoted, open_started = piece[closing + 1 :], False, True
            # Quoted spans become one plain byte; a quote left open runs into the next piece.
            plain = _QUOTED.sub(b"_", piece)
            opening = plain.find(b'"')
            if opening >= 0:
                plain, quoted = plain[:opening] + b"_", True
            *complete, partial = plain.split(b"\n")
            if complete:
                ended = [count + complete[0].count(mark) for count, mark in zip(open_row, _DELIMITERS, strict=True)]
                rows, width = rows + len(complete), max(width, max(ended) + 1)
                if len(complete) > 1:
                    rest = complete[1:]
                    widest = max(max(map(bytes.count, rest, itertools.repeat(mark))) for mark in _DELIMITERS)
                    width = max(width, widest + 1)
                open_row, open_started = [0] * len(_DELIMITERS), False
            open_row = [count + partial.count(mark) for count, mark in zip(open_row, _DELIMITERS, strict=True)]
            open_started = open_started or bool(partial)
            tally.check(rows * width)
    if open_started:
        rows, width = rows + 1, max(width, max(open_row) + 1)
    tally.add(rows * width)

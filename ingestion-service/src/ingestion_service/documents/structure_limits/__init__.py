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

The counting is split by format: ``spreadsheets`` (XLSX family, ODS, DOCX tables), ``html_tables``,
``xls``, ``delimited`` (CSV/TSV), over the forgiving ``markup`` scanner and ``common``'s tally.
"""

from __future__ import annotations

import codecs
import zipfile
from pathlib import Path

from ingestion_service.documents import _errors
from ingestion_service.documents.docx_package import MAX_DEPTH
from ingestion_service.documents.structure_limits.common import (
    DELIMITED_SUFFIXES,
    ENGINE,
    HTML_SUFFIXES,
    NOT_VALUE_CHARS,
    XML_SUFFIXES,
    ExceededError,
    Tally,
)
from ingestion_service.documents.structure_limits.delimited import delimited_cells
from ingestion_service.documents.structure_limits.html_tables import html_cells
from ingestion_service.documents.structure_limits.markup import EVERY_TAG, file_chunks, matches, xml_chunks
from ingestion_service.documents.structure_limits.spreadsheets import archive_cells
from ingestion_service.documents.structure_limits.xls import xls_cells
from ingestion_service.errors import DocumentTooLargeError
from ingestion_service.settings import Settings


def check_structure(path: Path, settings: Settings) -> None:
    """Refuse ``path`` whose XML nests deeper than MAX_DEPTH (EXTRACTION_FAILED, unparseable) or whose
    tables expand past MAX_TABLE_CELLS (DOCUMENT_TOO_LARGE); blocking: call in a thread.

    ``path`` is the file as engines will see it: its suffix picks the reader, as it picks theirs, and
    a ZIP's parts tell a workbook (as ``content`` tells it).
    """
    suffix = path.suffix.lower()
    if suffix in XML_SUFFIXES:
        check_xml_depth(path)
    if suffix in DELIMITED_SUFFIXES:
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
        for match in matches(xml_chunks(handle), EVERY_TAG):
            if match.lastgroup == "end":
                depth = max(depth - 1, 0)
            elif match.string[match.end() - 2] != ord("/"):  # a start tag, not self-closing
                depth += 1
                if depth > MAX_DEPTH:
                    raise _errors.unparseable(ENGINE, f"the XML nests elements deeper than {MAX_DEPTH} levels")


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
            for chunk in file_chunks(handle):
                decoder.decode(chunk)  # validates; UTF-8 counts a character per byte not a continuation
                total += len(chunk.translate(None, NOT_VALUE_CHARS))
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
    tally = Tally(limit)
    suffix = path.suffix.lower()
    try:
        if suffix in HTML_SUFFIXES:
            html_cells(path, tally)
        if suffix in DELIMITED_SUFFIXES:
            delimited_cells(path, tally)
        if zipfile.is_zipfile(path):
            archive_cells(path, suffix, tally)
        xls_cells(path, tally)
    except ExceededError:
        pass
    return tally.total

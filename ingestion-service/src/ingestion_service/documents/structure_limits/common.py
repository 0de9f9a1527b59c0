"""What every structural check shares: the suffixes each reader takes, the reading sizes, and the tally
that stops a scan once the cells pass the limit."""

from __future__ import annotations

import re
import zipfile
import zlib

ENGINE = "content check"
CHUNK = 1024 * 1024
# Any count beyond this is over every sensible limit; ten-digit row numbers need not be read exactly.
HUGE = 2**40

# Names the engines parse as XML: kreuzberg's generic XML reader (quadratic in depth) takes these
# (its application/xml and text/xml types), SVG, and the XML formats it reads recursively.
XML_SUFFIXES = frozenset(
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
HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
# Read as one table, every row padded to the widest; kreuzberg guesses the delimiter among these.
DELIMITED_SUFFIXES = frozenset({".csv", ".tsv"})
DELIMITERS = (b",", b";", b"\t", b"|")
QUOTED = re.compile(rb'"[^"]*+"')
# Bytes that are no character of a value: ASCII whitespace and controls, delimiters, quotes, and the
# continuation bytes of UTF-8 characters (the lead byte counts the character).
NOT_VALUE_CHARS = bytes([*range(0x21), 0x7F, *range(0x80, 0xC0)]) + b"".join(DELIMITERS) + b'"'
# A ZIP is a workbook when it holds this part (as content.py decides); calamine reads no other.
XLSX_WORKBOOK = "xl/workbook.xml"
XLSX_WORKBOOK_RELS = "xl/_rels/workbook.xml.rels"
XLSX_SHEET_DIRS = ("xl/worksheets/", "xl/macrosheets/", "xl/dialogsheets/")
# A ZIP is a word-processing document when it holds this part; tables may sit in any part under word/.
DOCX_DOCUMENT = "word/document.xml"
ODS_SUFFIXES = frozenset({".ods", ".ots"})
ODS_MIMETYPES = frozenset(
    {"application/vnd.oasis.opendocument.spreadsheet", "application/vnd.oasis.opendocument.spreadsheet-template"}
)
# What zipfile raises for a damaged archive or member (RuntimeError: an encrypted one); the engine
# reports the damage, and what was read up to it is counted.
ZIP_DAMAGE = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError, ValueError)
# Browsers, and the engines' HTML reader, cap colspan at 1000 and rowspan at 65534.
MAX_COLSPAN = 1000
MAX_ROWSPAN = 65534


class ExceededError(Exception):
    """Internal: the count passed the limit; the scan stops."""


class Tally:
    """Cells of the tables counted so far; past ``limit`` the scan stops (``ExceededError``)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.total = 0

    def check(self, pending: int) -> None:
        """``pending``: the cells of the tables still being read."""
        if self.limit is not None and self.total + pending > self.limit:
            self.total += pending
            raise ExceededError

    def add(self, cells: int) -> None:
        self.total += cells
        self.check(0)

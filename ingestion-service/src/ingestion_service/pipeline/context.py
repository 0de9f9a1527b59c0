"""A document's title as a reader would name it, for the context indexed with each of its chunks.

Engines report a title from the file's metadata, which is often a placeholder ("Untitled",
"PowerPoint Presentation") or a file name ("Microsoft Word - SampleContract-Shuttle"). In their
place: the title page or title slide, the first top-level heading, a plain text file's first line,
and last the file name, when it reads as words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePath

from haystack import Document

from ingestion_service.pipeline.chunking import markdown_sections
from ingestion_service.tokens import TokenCounter
from shared_contract import MetaKey

# Titles that say nothing about the document (seen in the metadata of real files).
_PLACEHOLDER = re.compile(
    r"^(untitled( (document|spreadsheet|presentation))?|powerpoint presentation|presentation\d*|"
    r"slide \d+|document\d*|sheet\d*|book\d*|title|pdf docs?|sample|test)$",
    re.IGNORECASE,
)
# "Microsoft Word - report.docx": the application's prefix in a print-to-PDF title.
_APPLICATION_PREFIX = re.compile(r"^microsoft (word|excel|powerpoint|office word)\s*-\s*", re.IGNORECASE)
_FILE_NAME = re.compile(r"\.(docx?|xlsx?|pptx?|pdf|odt|ods|odp|rtf|txt|html?|jpe?g|png|tiff?)$", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]{3,}")
_MARKUP = re.compile(r"[*_`#>\[\]]+")
_PLAIN_TYPES = ("text/plain", "text/markdown", "text/x-markdown")
TITLE_MAX_CHARS = 150


def _clean(text: str) -> str:
    return " ".join(_MARKUP.sub(" ", text).split())


def usable_title(raw: object) -> str | None:
    """A metadata title that names the document, cleaned; None for placeholders and file names."""
    if not isinstance(raw, str):
        return None
    title = _clean(_APPLICATION_PREFIX.sub("", raw.strip()))
    if not title or len(title) > TITLE_MAX_CHARS or _PLACEHOLDER.match(title) or _FILE_NAME.search(title):
        return None
    if not _WORD.search(title) or (" " not in title and any(char.isdigit() for char in title)):
        return None  # an id such as "S25C-0i25080113320"
    return title


def title_from_filename(filename: str | None) -> str | None:
    """The file name's stem as words ("q3_sales-report.xlsx" -> "q3 sales report"), when it has words."""
    if not filename:
        return None
    stem = PurePath(filename).stem
    words = " ".join(re.split(r"[\s_\-.]+", stem)).strip()
    return words if _WORD.search(words) and len(words) <= TITLE_MAX_CHARS else None


def _first_line_title(text: str) -> str | None:
    """A plain text's first line when it stands alone as a title (short, more text after it)."""
    stripped = text.strip()
    first, _, rest = stripped.partition("\n")
    first = _clean(first)
    if not rest.strip() or not first or len(first) > TITLE_MAX_CHARS or len(first.split()) < 2:
        return None
    return first


def document_title(documents: Sequence[Document], counter: TokenCounter, *, title_page_tokens: int) -> str | None:
    """The title of one extracted document (its pages in order), or None when nothing names it.

    ``title_page_tokens``: a first page (or slide) of at most this many tokens, followed by more
    pages, is a title page, and its first heading is the title.
    """
    if not documents:
        return None
    meta = documents[0].meta
    title = usable_title(meta.get(MetaKey.TITLE))
    if title:
        return title
    first_text = documents[0].content or ""
    sections, _ = markdown_sections(first_text)
    headings = [section.headers[-1] for section in sections if section.headers]
    if headings and len(documents) > 1 and counter.count(first_text) <= title_page_tokens:
        return _clean(headings[0]) or None
    for section in sections:
        if len(section.headers) == 1 and section.text.lstrip().startswith("# "):
            return _clean(section.headers[0]) or None
    mime = str(meta.get("mime_type") or "")
    if mime.startswith(_PLAIN_TYPES) and not headings:
        line = _first_line_title(first_text)
        if line:
            return line
    return title_from_filename(str(meta.get(MetaKey.NAME) or "") or None)

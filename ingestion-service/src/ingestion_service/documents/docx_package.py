"""DOCX package reader: native text, verbatim shape labels and the diagram detectors' signals.

Reads the package XML itself (no extraction engine), so text-box and shape labels come out
exactly as typed. Parsing (one Choice per AlternateContent, DTDs refused, a size cap per part)
is ``docx_xml``, the detectors' counting ``docx_signals``; the archive's unpack limits are
checked before any engine runs (``content.check_zip_limits``).
"""

from __future__ import annotations

import bisect
import itertools
import re
import zipfile
import zlib
from pathlib import Path
from xml.etree import ElementTree as ET

from ingestion_service.documents import _errors
from ingestion_service.documents.docx_signals import DiagramSignals, count_signals
from ingestion_service.documents.docx_xml import (
    ENGINE,
    MAX_DEPTH,
    collect_inline,
    container_lines,
    descendants,
    first_child,
    int_attribute,
    iter_text_containers,
    parse_part,
)
from ingestion_service.documents.page_split import alnum_key
from ingestion_service.errors import DocumentTooLargeError

__all__ = [
    "DOCX_MIME_TYPE",
    "MAX_DEPTH",
    "MAX_PART_BYTES",
    "DiagramSignals",
    "DocxPackage",
    "diagram_signals",
    "is_docx",
    "labels",
    "read_native_text",
    "restore_dropped_paragraphs",
]

DOCUMENT_PART = "word/document.xml"
STYLES_PART = "word/styles.xml"
DOCX_MIME_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
# Parts above this are not parsed (the tree costs about ten times the XML): real documents, even
# long ones with many drawings, stay far below; the router then leaves the file to the default engine.
MAX_PART_BYTES = 64 * 1024 * 1024
# A left-out paragraph shorter than this is not put back (a stray label, a number).
_MIN_RESTORED_WORDS = 3
_HEADING_NAME = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)


def is_docx(path: Path) -> bool:
    """Whether the file is a ZIP package holding ``word/document.xml`` (by content, not by name)."""
    try:
        with path.open("rb") as handle:
            if handle.read(4) != b"PK\x03\x04":
                return False
        with zipfile.ZipFile(path) as archive:
            return DOCUMENT_PART in archive.namelist()
    except zipfile.BadZipFile:
        return False


def read_native_text(path: Path) -> str:
    """The document's text as Markdown: body paragraphs and tables in order, each shape's text after its anchor."""
    return DocxPackage.open(path).native_text()


def restore_dropped_paragraphs(path: Path, markdown: str) -> tuple[str, int]:
    """``markdown`` (an engine's reading of the DOCX) with the body paragraphs it left out put back,
    each after the last paragraph before it that the reading has; and how many were put back.

    kreuzberg drops the text of a paragraph that anchors a text box or a shape (it keeps the box's
    text). A paragraph counts as present when its letters and digits occur in the reading, whatever
    the markup, quotes or escapes; tables (rendered differently) and fragments under three words are
    never added.
    """
    blocks = DocxPackage.open(path).blocks()
    paragraphs = [part for part in re.split(r"\n{2,}", markdown.strip()) if part.strip()]
    # The reading's letters are its paragraphs' letters end to end: ``ends`` maps an offset back.
    ends = list(itertools.accumulate(len(alnum_key(paragraph)) for paragraph in paragraphs))
    whole = alnum_key(markdown)
    after: dict[int, list[str]] = {}
    anchor, searched_to, restored = -1, 0, 0
    for block in blocks:
        key = alnum_key(block)
        if not key:
            continue
        # In document order the next block is found after the last one (linear in the reading).
        found = whole.find(key, searched_to)
        if found >= 0:
            searched_to = found + len(key)
            anchor = bisect.bisect_right(ends, searched_to - 1)
        elif key in whole:
            continue  # present, placed elsewhere (a text box the engine put at the end)
        elif not block.lstrip().startswith("|") and len(block.split()) >= _MIN_RESTORED_WORDS:
            after.setdefault(anchor, []).append(block)
            restored += 1
    if not restored:
        return markdown, 0
    parts = list(after.get(-1, []))
    for index, paragraph in enumerate(paragraphs):
        parts.append(paragraph)
        parts.extend(after.get(index, []))
    return "\n\n".join(parts), restored


def diagram_signals(path: Path) -> DiagramSignals:
    """The detector measurements of ``word/document.xml``."""
    return DocxPackage.open(path).signals()


def labels(path: Path) -> list[str]:
    """The verbatim text of each shape / text box, in document order (one entry per shape)."""
    return DocxPackage.open(path).labels()


class DocxPackage:
    """One parsed package; build it with :meth:`open` to read text, labels and signals from one parse."""

    def __init__(self, document: ET.Element, heading_styles: dict[str, int]) -> None:
        self._document = document
        self._headings = heading_styles

    @classmethod
    def open(cls, path: Path) -> DocxPackage:
        """Parse ``word/document.xml`` (and styles, for heading levels).

        A damaged package is an ExtractionError (422); a part above :data:`MAX_PART_BYTES` is
        DocumentTooLargeError (413).
        """
        try:
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist())
                if DOCUMENT_PART not in names:
                    raise _errors.unsupported(ENGINE, f"not a Word document (no {DOCUMENT_PART})")
                document = parse_part(_read_part(archive, DOCUMENT_PART), DOCUMENT_PART)
                styles = parse_part(_read_part(archive, STYLES_PART), STYLES_PART) if STYLES_PART in names else None
        except zipfile.BadZipFile as exc:
            raise _errors.unparseable(ENGINE, f"not a ZIP package: {exc}") from exc
        # zlib.error: a damaged member; RuntimeError: zipfile's "encrypted, password required";
        # NotImplementedError: a compression method zipfile lacks.
        except (zlib.error, RuntimeError, NotImplementedError) as exc:
            raise _errors.unparseable(ENGINE, f"{type(exc).__name__}: {exc}") from exc
        return cls(document, _heading_styles(styles))

    def native_text(self) -> str:
        """See :func:`read_native_text`."""
        return "\n\n".join(self.blocks())

    def blocks(self) -> list[str]:
        """The body's paragraphs and tables as Markdown blocks, in order, each shape's text after its anchor."""
        body = first_child(self._document, "w:body")
        blocks = self._blocks(body) if body is not None else []
        return [block for block in blocks if block.strip()]

    def labels(self) -> list[str]:
        """See :func:`labels`."""
        found: list[str] = []
        for container in iter_text_containers(self._document, nested=True):
            text = " ".join(container_lines(container))
            label = " ".join(text.split())
            if label:
                found.append(label)
        return found

    def signals(self) -> DiagramSignals:
        """See :func:`diagram_signals`."""
        return count_signals(first_child(self._document, "w:body"))

    # Markdown rendering.

    def _blocks(self, container: ET.Element) -> list[str]:
        blocks: list[str] = []
        for child in container:
            if child.tag == "w:p":
                blocks.extend(self._paragraph(child))
            elif child.tag == "w:tbl":
                blocks.append(self._table(child))
            elif child.tag not in ("w:sectPr", "w:del", "w:moveFrom"):
                # Content controls, custom XML, tracked insertions: their paragraphs count.
                blocks.extend(self._blocks(child))
        return blocks

    def _paragraph(self, paragraph: ET.Element) -> list[str]:
        parts: list[str] = []
        drawings: list[ET.Element] = []
        collect_inline(paragraph, parts, drawings)
        # Tabs and the gaps left by inline drawings collapse to one space; line breaks stay.
        text = "\n".join(" ".join(line.split()) for line in "".join(parts).split("\n")).strip()
        blocks = [self._prefix(paragraph) + text] if text else []
        for drawing in drawings:
            for container in iter_text_containers(drawing):
                if container.tag == "w:txbxContent":
                    blocks.extend(self._blocks(container))
                else:
                    blocks.extend(container_lines(container))
        return blocks

    def _prefix(self, paragraph: ET.Element) -> str:
        properties = first_child(paragraph, "w:pPr")
        if properties is None:
            return ""
        level = _outline_level(properties)
        style = first_child(properties, "w:pStyle")
        if level is None and style is not None:
            level = self._headings.get(style.get("w:val", ""))
        if level is not None:
            return "#" * level + " "
        numbering = first_child(properties, "w:numPr")
        if numbering is not None:
            indent = first_child(numbering, "w:ilvl")
            depth = int_attribute(indent.get("w:val")) if indent is not None else 0
            return "  " * min(depth, 8) + "- "
        return ""

    def _table(self, table: ET.Element) -> str:
        rows: list[list[str]] = []
        for row in descendants(table, "w:tr"):
            cells: list[str] = []
            for cell in descendants(row, "w:tc"):
                # A nested table's text joins its enclosing cell's.
                text = " ".join(" ".join(block.split()) for block in self._blocks(cell))
                cells.append(text.replace("|", "\\|"))
                properties = first_child(cell, "w:tcPr")
                span = first_child(properties, "w:gridSpan") if properties is not None else None
                if span is not None:
                    cells.extend([""] * max(int_attribute(span.get("w:val")) - 1, 0))
            rows.append(cells)
        width = max((len(cells) for cells in rows), default=0)
        if not width:
            return ""
        lines = ["| " + " | ".join(cells + [""] * (width - len(cells))) + " |" for cells in rows]
        lines.insert(1, "|" + " --- |" * width)
        return "\n".join(lines)


def _read_part(archive: zipfile.ZipFile, part: str) -> bytes:
    size = archive.getinfo(part).file_size
    if size > MAX_PART_BYTES:
        raise DocumentTooLargeError(
            f"The document's {part} is {size} bytes; the DOCX reader parses at most {MAX_PART_BYTES} bytes per part."
        )
    return archive.read(part)


def _outline_level(properties: ET.Element) -> int | None:
    outline = first_child(properties, "w:outlineLvl")
    if outline is None:
        return None
    level = int_attribute(outline.get("w:val")) + 1
    return level if level <= 6 else None  # 9 = body text


def _heading_styles(styles: ET.Element | None) -> dict[str, int]:
    """Paragraph style id -> heading level, from the built-in names ("heading 1", "Title"), which stay
    English in localised documents whose style ids do not ("Overskrift1")."""
    if styles is None:
        return {}
    levels: dict[str, int] = {}
    for style in styles.iter("w:style"):
        style_id = style.get("w:styleId")
        name_element = first_child(style, "w:name")
        if not style_id or name_element is None:
            continue
        name = name_element.get("w:val", "")
        match = _HEADING_NAME.match(name.strip())
        if match and 1 <= int(match.group(1)) <= 6:
            levels[style_id] = int(match.group(1))
        elif name.strip().lower() == "title":
            levels[style_id] = 1
    return levels

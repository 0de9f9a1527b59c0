"""DOCX package reader: native text, verbatim shape labels and the diagram detectors' signals.

Reads the package XML itself (no extraction engine), so text-box and shape labels come out
exactly as typed. Only the first ``mc:Choice`` branch of each ``mc:AlternateContent`` is kept:
Word writes every DrawingML shape twice (Choice) and as legacy VML (Fallback), and reading both
would count and print each label twice. XML with a DTD or entity declaration is refused
(entity-expansion bombs); the archive's unpack limits are checked before any engine runs
(``content.check_zip_limits``).
"""

from __future__ import annotations

import bisect
import itertools
import re
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn
from xml.etree import ElementTree as ET
from xml.parsers import expat

from ingestion_service.documents import _errors
from ingestion_service.documents.page_split import alnum_key
from ingestion_service.errors import DocumentTooLargeError

DOCUMENT_PART = "word/document.xml"
STYLES_PART = "word/styles.xml"
DOCX_MIME_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
_ENGINE = "docx"
# Parts above this are not parsed (the tree costs about ten times the XML): real documents, even
# long ones with many drawings, stay far below; the router then leaves the file to the default engine.
MAX_PART_BYTES = 64 * 1024 * 1024
# A left-out paragraph shorter than this is not put back (a stray label, a number).
_MIN_RESTORED_WORDS = 3
# The readers walk the tree recursively; real documents nest a few dozen levels (tables in tables).
MAX_DEPTH = 256

# Namespace URI -> the usual prefix; elements are named "prefix:local" after parsing. Strict
# OOXML (purl.oclc.org) maps to the same prefixes as transitional.
_PREFIXES = {
    "http://schemas.openxmlformats.org/wordprocessingml/2006/main": "w",
    "http://purl.oclc.org/ooxml/wordprocessingml/main": "w",
    "http://schemas.openxmlformats.org/markup-compatibility/2006": "mc",
    "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing": "wp",
    "http://purl.oclc.org/ooxml/drawingml/wordprocessingDrawing": "wp",
    "http://schemas.microsoft.com/office/word/2010/wordprocessingShape": "wps",
    "http://schemas.microsoft.com/office/word/2010/wordprocessingGroup": "wpg",
    "http://schemas.microsoft.com/office/word/2010/wordprocessingCanvas": "wpc",
    "http://schemas.openxmlformats.org/drawingml/2006/main": "a",
    "http://purl.oclc.org/ooxml/drawingml/main": "a",
    "http://schemas.openxmlformats.org/drawingml/2006/picture": "pic",
    "http://purl.oclc.org/ooxml/drawingml/picture": "pic",
    "http://schemas.openxmlformats.org/officeDocument/2006/relationships": "r",
    "http://purl.oclc.org/ooxml/officeDocument/relationships": "r",
    "urn:schemas-microsoft-com:vml": "v",
    "urn:schemas-microsoft-com:office:office": "o",
}

# Inline containers of pictures and shapes; their text is read separately from the paragraph's.
_DRAWINGS = frozenset({"w:drawing", "w:pict", "w:object"})
# Run content that is not visible text (tracked deletions, moved-from copies, field codes).
_NOT_TEXT = frozenset({"w:del", "w:moveFrom", "w:delText", "w:instrText", "w:delInstrText", "w:rPr", "w:pPr"})
# Legacy VML drawing primitives; one holding v:imagedata is a picture, the others are shapes.
_VML_SHAPES = frozenset(
    {"v:shape", "v:rect", "v:roundrect", "v:oval", "v:line", "v:polyline", "v:arc", "v:curve", "v:image"}
)
_TEXT_CONTAINERS = frozenset({"w:txbxContent", "a:txBody", "v:textpath"})
# VML lengths (style="width:108pt;height:27pt") in EMU per unit; a bare number is pixels.
_EMU_PER_UNIT = {"pt": 12_700, "in": 914_400, "cm": 360_000, "mm": 36_000, "pc": 152_400, "px": 9_525, "": 9_525}
_VML_LENGTH = re.compile(r"^\s*(-?[\d.]+)\s*([a-z]*)\s*$")
_HEADING_NAME = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)


@dataclass(frozen=True)
class DiagramSignals:
    """What the diagram detectors measure in ``word/document.xml`` (body only; no headers or footers).

    ``textboxes``: drawing shapes and text boxes (DrawingML ``wps:wsp``, grouped ones included,
    and legacy VML shapes outside a Fallback); connectors and lines count, pictures do not.
    ``drawing_words``: words inside those shapes (text boxes, DrawingML ``a:t``, WordArt).
    ``body_words``: words in ordinary paragraphs and tables. ``body_images``: embedded pictures
    (linked-only ones are not in the package). ``largest_image_emu``: the largest picture's display
    area in EMU² (``<wp:extent cx*cy>``; for a picture inside a group, its own size scaled to the
    group's extent).
    """

    textboxes: int
    drawing_words: int
    body_words: int
    body_images: int
    largest_image_emu: int

    @property
    def drawing_ratio(self) -> float:
        """Words inside shapes per word of body text."""
        return self.drawing_words / max(self.body_words, 1)

    @property
    def image_word_ratio(self) -> float:
        """Largest picture area (EMU²) per word of body text: high for a figure, low for a photo in a long text."""
        return self.largest_image_emu / max(self.body_words, 1)

    def vector_flowchart(self, *, min_textboxes: int, min_ratio: float) -> bool:
        """Enough shapes carrying more words than the body: a diagram drawn with Word shapes.

        Never fires on a document without shapes, whatever the thresholds.
        """
        return self.textboxes >= max(min_textboxes, 1) and self.drawing_ratio >= min_ratio

    def raster_figure(self, *, min_images: int, min_image_emu: int, min_image_word_ratio: float = 0.0) -> bool:
        """Enough body pictures, the largest displayed big enough to be a figure rather than an icon.

        ``min_image_word_ratio`` > 0 also requires ``largest_image_emu / max(body_words, 1)`` to reach
        it, so a large decorative photo above a long text does not count. Never fires without a picture.
        """
        if self.body_images < max(min_images, 1) or self.largest_image_emu < min_image_emu:
            return False
        return min_image_word_ratio <= 0 or self.image_word_ratio >= min_image_word_ratio

    def as_dict(self) -> dict[str, int | float]:
        """The measurements, for logs and the route decision."""
        return {
            "textboxes": self.textboxes,
            "drawing_words": self.drawing_words,
            "body_words": self.body_words,
            "drawing_ratio": round(self.drawing_ratio, 3),
            "body_images": self.body_images,
            "largest_image_emu": self.largest_image_emu,
        }


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
                    raise _errors.unsupported(_ENGINE, f"not a Word document (no {DOCUMENT_PART})")
                document = _parse_part(_read_part(archive, DOCUMENT_PART), DOCUMENT_PART)
                styles = _parse_part(_read_part(archive, STYLES_PART), STYLES_PART) if STYLES_PART in names else None
        except zipfile.BadZipFile as exc:
            raise _errors.unparseable(_ENGINE, f"not a ZIP package: {exc}") from exc
        # zlib.error: a damaged member; RuntimeError: zipfile's "encrypted, password required";
        # NotImplementedError: a compression method zipfile lacks.
        except (zlib.error, RuntimeError, NotImplementedError) as exc:
            raise _errors.unparseable(_ENGINE, f"{type(exc).__name__}: {exc}") from exc
        return cls(document, _heading_styles(styles))

    def native_text(self) -> str:
        """See :func:`read_native_text`."""
        return "\n\n".join(self.blocks())

    def blocks(self) -> list[str]:
        """The body's paragraphs and tables as Markdown blocks, in order, each shape's text after its anchor."""
        body = _child(self._document, "w:body")
        blocks = self._blocks(body) if body is not None else []
        return [block for block in blocks if block.strip()]

    def labels(self) -> list[str]:
        """See :func:`labels`."""
        found: list[str] = []
        for container in _iter_text_containers(self._document, nested=True):
            text = " ".join(_container_lines(container))
            label = " ".join(text.split())
            if label:
                found.append(label)
        return found

    def signals(self) -> DiagramSignals:
        """See :func:`diagram_signals`."""
        counts = _Counts()
        body = _child(self._document, "w:body")
        if body is not None:
            counts.walk(body, in_shape=False)
        return DiagramSignals(
            textboxes=counts.shapes,
            drawing_words=counts.drawing_words,
            body_words=counts.body_words,
            body_images=len(counts.image_areas),
            largest_image_emu=max(counts.image_areas, default=0),
        )

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
        _inline(paragraph, parts, drawings)
        # Tabs and the gaps left by inline drawings collapse to one space; line breaks stay.
        text = "\n".join(" ".join(line.split()) for line in "".join(parts).split("\n")).strip()
        blocks = [self._prefix(paragraph) + text] if text else []
        for drawing in drawings:
            for container in _iter_text_containers(drawing):
                if container.tag == "w:txbxContent":
                    blocks.extend(self._blocks(container))
                else:
                    blocks.extend(_container_lines(container))
        return blocks

    def _prefix(self, paragraph: ET.Element) -> str:
        properties = _child(paragraph, "w:pPr")
        if properties is None:
            return ""
        level = _outline_level(properties)
        style = _child(properties, "w:pStyle")
        if level is None and style is not None:
            level = self._headings.get(style.get("w:val", ""))
        if level is not None:
            return "#" * level + " "
        numbering = _child(properties, "w:numPr")
        if numbering is not None:
            indent = _child(numbering, "w:ilvl")
            depth = _int(indent.get("w:val")) if indent is not None else 0
            return "  " * min(depth, 8) + "- "
        return ""

    def _table(self, table: ET.Element) -> str:
        rows: list[list[str]] = []
        for row in _descendants(table, "w:tr"):
            cells: list[str] = []
            for cell in _descendants(row, "w:tc"):
                # A nested table's text joins its enclosing cell's.
                text = " ".join(" ".join(block.split()) for block in self._blocks(cell))
                cells.append(text.replace("|", "\\|"))
                properties = _child(cell, "w:tcPr")
                span = _child(properties, "w:gridSpan") if properties is not None else None
                if span is not None:
                    cells.extend([""] * max(_int(span.get("w:val")) - 1, 0))
            rows.append(cells)
        width = max((len(cells) for cells in rows), default=0)
        if not width:
            return ""
        lines = ["| " + " | ".join(cells + [""] * (width - len(cells))) + " |" for cells in rows]
        lines.insert(1, "|" + " --- |" * width)
        return "\n".join(lines)


@dataclass
class _Counts:
    """Accumulates :class:`DiagramSignals` over one walk of the body."""

    shapes: int = 0
    drawing_words: int = 0
    body_words: int = 0
    image_areas: list[int] = field(default_factory=list)

    def walk(self, element: ET.Element, *, in_shape: bool) -> None:
        for child in element:
            tag = child.tag
            if tag == "w:p":
                parts: list[str] = []
                _inline(child, parts, [])
                words = len("".join(parts).split())
                if in_shape:
                    self.drawing_words += words
                else:
                    self.body_words += words
                self.walk(child, in_shape=in_shape)
            elif tag == "w:txbxContent":
                self.walk(child, in_shape=True)
            elif tag in ("a:txBody", "v:textpath"):
                self.drawing_words += sum(len(line.split()) for line in _container_lines(child))
            elif tag in ("wp:inline", "wp:anchor"):
                self.image_areas.extend(_drawing_picture_areas(child))
                self.walk(child, in_shape=in_shape)
            elif tag == "wps:wsp":
                self.shapes += 1
                self.walk(child, in_shape=in_shape)
            elif tag in _VML_SHAPES:
                area = _vml_picture_area(child)
                if area is None:
                    self.shapes += 1
                else:
                    self.image_areas.append(area)
                self.walk(child, in_shape=in_shape)
            elif tag not in _NOT_TEXT:
                self.walk(child, in_shape=in_shape)


def _inline(element: ET.Element, parts: list[str], drawings: list[ET.Element]) -> None:
    """Collect a paragraph's own visible text into ``parts`` and its drawings into ``drawings``."""
    for child in element:
        tag = child.tag
        if tag == "w:t":
            parts.append(child.text or "")
        elif tag in ("w:tab", "w:ptab"):
            parts.append("\t")
        elif tag in ("w:br", "w:cr"):
            parts.append("\n")
        elif tag == "w:noBreakHyphen":
            parts.append("-")
        elif tag in _DRAWINGS:
            drawings.append(child)
        elif tag not in _NOT_TEXT:
            _inline(child, parts, drawings)


def _iter_text_containers(element: ET.Element, *, nested: bool = False) -> Iterator[ET.Element]:
    """Shape text containers in document order; with ``nested``, also those inside a text box's paragraphs."""
    for child in element:
        if child.tag in _TEXT_CONTAINERS:
            yield child
            if nested and child.tag == "w:txbxContent":
                yield from _iter_text_containers(child, nested=True)
        else:
            yield from _iter_text_containers(child, nested=nested)


def _child(element: ET.Element, *path: str) -> ET.Element | None:
    """The first child along ``path`` (tags are "prefix:local", which ElementPath would read as a namespace)."""
    current: ET.Element | None = element
    for tag in path:
        current = next((child for child in current if child.tag == tag), None) if current is not None else None
    return current


def _descendants(element: ET.Element, tag: str) -> Iterator[ET.Element]:
    """``tag`` elements below ``element`` through wrappers (content controls, custom XML), not inside nested ones."""
    for child in element:
        if child.tag == tag:
            yield child
        elif child.tag not in ("w:tbl", "w:tr", "w:tc", "w:p", "w:del", "w:moveFrom"):
            yield from _descendants(child, tag)


def _container_lines(container: ET.Element) -> list[str]:
    """The non-empty lines of one shape's text, without the text of shapes nested in it."""
    if container.tag == "v:textpath":
        text = container.get("string", "").strip()
        return [text] if text else []
    if container.tag == "a:txBody":
        texts = ("".join(run.text or "" for run in paragraph.iter("a:t")) for paragraph in container.iter("a:p"))
        return [text.strip() for text in texts if text.strip()]
    lines: list[str] = []
    for paragraph in _own_paragraphs(container):
        parts: list[str] = []
        _inline(paragraph, parts, [])
        line = " ".join("".join(parts).split())
        if line:
            lines.append(line)
    return lines


def _own_paragraphs(element: ET.Element) -> Iterator[ET.Element]:
    for child in element:
        if child.tag == "w:p":
            yield child
        elif child.tag not in _DRAWINGS and child.tag not in _NOT_TEXT:
            yield from _own_paragraphs(child)


def _drawing_picture_areas(drawing: ET.Element) -> list[int]:
    """Display areas (EMU²) of the embedded pictures in one ``wp:inline`` / ``wp:anchor``."""
    extent = _child(drawing, "wp:extent")
    frame = _int(extent.get("cx")) * _int(extent.get("cy")) if extent is not None else 0
    data = _child(drawing, "a:graphic", "a:graphicData")
    if data is None:
        return []
    areas: list[int] = []
    for child in data:
        if child.tag == "pic:pic":
            if _embedded(child):
                areas.append(frame)
        elif child.tag in ("wpg:wgp", "wpc:wpc"):
            areas.extend(min(area, frame) if frame else area for area in _group_picture_areas(child, 1.0, 1.0))
    return areas


def _group_picture_areas(group: ET.Element, scale_x: float, scale_y: float) -> Iterator[int]:
    """Pictures in a group or canvas, their own ``a:ext`` scaled from child to page coordinates."""
    transform = _child(group, "wpg:grpSpPr", "a:xfrm")
    if transform is not None:
        outer, inner = _child(transform, "a:ext"), _child(transform, "a:chExt")
        if outer is not None and inner is not None and _int(inner.get("cx")) and _int(inner.get("cy")):
            scale_x *= _int(outer.get("cx")) / _int(inner.get("cx"))
            scale_y *= _int(outer.get("cy")) / _int(inner.get("cy"))
    for child in group:
        if child.tag == "pic:pic" and _embedded(child):
            size = _child(child, "pic:spPr", "a:xfrm", "a:ext")
            if size is not None:
                yield round(_int(size.get("cx")) * scale_x * _int(size.get("cy")) * scale_y)
        elif child.tag in ("wpg:grpSp", "wpg:wgp"):
            yield from _group_picture_areas(child, scale_x, scale_y)


def _embedded(picture: ET.Element) -> bool:
    blip = next(picture.iter("a:blip"), None)
    return blip is not None and bool(blip.get("r:embed"))


def _vml_picture_area(shape: ET.Element) -> int | None:
    """The display area of a VML picture (``v:imagedata`` of an embedded image), else None (a shape)."""
    image = _child(shape, "v:imagedata")
    if shape.tag == "v:image":
        image = shape
    if image is None or not (image.get("r:id") or image.get("o:relid")):
        return None
    style: dict[str, str] = {}
    for item in shape.get("style", "").split(";"):
        key, _, value = item.partition(":")
        style[key.strip().lower()] = value
    return _vml_length(style.get("width", "")) * _vml_length(style.get("height", ""))


def _vml_length(value: str) -> int:
    match = _VML_LENGTH.match(value)
    if match is None or match.group(2) not in _EMU_PER_UNIT:
        return 0
    try:
        return max(round(float(match.group(1)) * _EMU_PER_UNIT[match.group(2)]), 0)
    except ValueError:
        return 0


def _int(value: str | None) -> int:
    """A non-negative integer attribute; missing or malformed reads as 0 (the detectors then see no size)."""
    try:
        return max(int(value or 0), 0)
    except ValueError:
        return 0


def _outline_level(properties: ET.Element) -> int | None:
    outline = _child(properties, "w:outlineLvl")
    if outline is None:
        return None
    level = _int(outline.get("w:val")) + 1
    return level if level <= 6 else None  # 9 = body text


def _heading_styles(styles: ET.Element | None) -> dict[str, int]:
    """Paragraph style id -> heading level, from the built-in names ("heading 1", "Title"), which stay
    English in localised documents whose style ids do not ("Overskrift1")."""
    if styles is None:
        return {}
    levels: dict[str, int] = {}
    for style in styles.iter("w:style"):
        style_id = style.get("w:styleId")
        name_element = _child(style, "w:name")
        if not style_id or name_element is None:
            continue
        name = name_element.get("w:val", "")
        match = _HEADING_NAME.match(name.strip())
        if match and 1 <= int(match.group(1)) <= 6:
            levels[style_id] = int(match.group(1))
        elif name.strip().lower() == "title":
            levels[style_id] = 1
    return levels


def _qualified(name: str) -> str:
    """expat's "uri local" -> "prefix:local" for known namespaces, "{uri}local" otherwise."""
    uri, _, local = name.rpartition(" ")
    if not uri:
        return local
    prefix = _PREFIXES.get(uri)
    return f"{prefix}:{local}" if prefix else f"{{{uri}}}{local}"


def _read_part(archive: zipfile.ZipFile, part: str) -> bytes:
    size = archive.getinfo(part).file_size
    if size > MAX_PART_BYTES:
        raise DocumentTooLargeError(
            f"The document's {part} is {size} bytes; the DOCX reader parses at most {MAX_PART_BYTES} bytes per part."
        )
    return archive.read(part)


def _parse_part(data: bytes, part: str) -> ET.Element:
    """Parse one package part, keeping only the first Choice of each AlternateContent; DTDs are refused."""
    parser = expat.ParserCreate(namespace_separator=" ")
    builder = ET.TreeBuilder()
    skipped_depth = 0  # > 0 inside a dropped Fallback / extra Choice
    depth = 0  # of the kept tree
    choice_taken: list[bool] = []  # per open mc:AlternateContent

    def start(name: str, attributes: dict[str, str]) -> None:
        nonlocal skipped_depth, depth
        if skipped_depth:
            skipped_depth += 1
            return
        depth += 1
        if depth > MAX_DEPTH:
            raise _errors.unparseable(_ENGINE, f"{part} nests elements deeper than {MAX_DEPTH} levels")
        tag = _qualified(name)
        if tag == "mc:AlternateContent":
            choice_taken.append(False)
        elif tag in ("mc:Choice", "mc:Fallback") and choice_taken:
            if tag == "mc:Fallback" or choice_taken[-1]:
                depth -= 1
                skipped_depth = 1
                return
            choice_taken[-1] = True
        builder.start(tag, {_qualified(key): value for key, value in attributes.items()})

    def end(name: str) -> None:
        nonlocal skipped_depth, depth
        if skipped_depth:
            skipped_depth -= 1
            return
        depth -= 1
        tag = _qualified(name)
        if tag == "mc:AlternateContent":
            choice_taken.pop()
        builder.end(tag)

    def text(data: str) -> None:
        if not skipped_depth:
            builder.data(data)

    def refuse(*_: object) -> NoReturn:
        raise _errors.unparseable(_ENGINE, f"{part} declares a DTD or entities (refused)")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.buffer_text = True
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise _errors.unparseable(_ENGINE, f"{part} is not well-formed XML: {exc}") from exc
    return builder.close()

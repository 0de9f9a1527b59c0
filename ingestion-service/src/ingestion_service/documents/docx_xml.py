"""WordprocessingML parts as element trees: the safe parser and the helpers that read text from them.

Only the first ``mc:Choice`` branch of each ``mc:AlternateContent`` is kept: Word writes every
DrawingML shape twice (Choice) and as legacy VML (Fallback), and reading both would count and
print each label twice. XML with a DTD or entity declaration is refused (entity-expansion bombs).
Elements are named "prefix:local" after parsing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NoReturn
from xml.etree import ElementTree as ET
from xml.parsers import expat

from ingestion_service.documents import _errors

ENGINE = "docx"
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
DRAWINGS = frozenset({"w:drawing", "w:pict", "w:object"})
# Run content that is not visible text (tracked deletions, moved-from copies, field codes).
NOT_TEXT = frozenset({"w:del", "w:moveFrom", "w:delText", "w:instrText", "w:delInstrText", "w:rPr", "w:pPr"})
# Legacy VML drawing primitives; one holding v:imagedata is a picture, the others are shapes.
TEXT_CONTAINERS = frozenset({"w:txbxContent", "a:txBody", "v:textpath"})


def collect_inline(element: ET.Element, parts: list[str], drawings: list[ET.Element]) -> None:
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
        elif tag in DRAWINGS:
            drawings.append(child)
        elif tag not in NOT_TEXT:
            collect_inline(child, parts, drawings)


def iter_text_containers(element: ET.Element, *, nested: bool = False) -> Iterator[ET.Element]:
    """Shape text containers in document order; with ``nested``, also those inside a text box's paragraphs."""
    for child in element:
        if child.tag in TEXT_CONTAINERS:
            yield child
            if nested and child.tag == "w:txbxContent":
                yield from iter_text_containers(child, nested=True)
        else:
            yield from iter_text_containers(child, nested=nested)


def first_child(element: ET.Element, *path: str) -> ET.Element | None:
    """The first child along ``path`` (tags are "prefix:local", which ElementPath would read as a namespace)."""
    current: ET.Element | None = element
    for tag in path:
        current = next((child for child in current if child.tag == tag), None) if current is not None else None
    return current


def descendants(element: ET.Element, tag: str) -> Iterator[ET.Element]:
    """``tag`` elements below ``element`` through wrappers (content controls, custom XML), not inside nested ones."""
    for child in element:
        if child.tag == tag:
            yield child
        elif child.tag not in ("w:tbl", "w:tr", "w:tc", "w:p", "w:del", "w:moveFrom"):
            yield from descendants(child, tag)


def container_lines(container: ET.Element) -> list[str]:
    """The non-empty lines of one shape's text, without the text of shapes nested in it."""
    if container.tag == "v:textpath":
        text = container.get("string", "").strip()
        return [text] if text else []
    if container.tag == "a:txBody":
        texts = ("".join(run.text or "" for run in paragraph.iter("a:t")) for paragraph in container.iter("a:p"))
        return [text.strip() for text in texts if text.strip()]
    lines: list[str] = []
    for paragraph in own_paragraphs(container):
        parts: list[str] = []
        collect_inline(paragraph, parts, [])
        line = " ".join("".join(parts).split())
        if line:
            lines.append(line)
    return lines


def own_paragraphs(element: ET.Element) -> Iterator[ET.Element]:
    for child in element:
        if child.tag == "w:p":
            yield child
        elif child.tag not in DRAWINGS and child.tag not in NOT_TEXT:
            yield from own_paragraphs(child)


def int_attribute(value: str | None) -> int:
    """A non-negative integer attribute; missing or malformed reads as 0 (the detectors then see no size)."""
    try:
        return max(int(value or 0), 0)
    except ValueError:
        return 0


def _qualified(name: str) -> str:
    """expat's "uri local" -> "prefix:local" for known namespaces, "{uri}local" otherwise."""
    uri, _, local = name.rpartition(" ")
    if not uri:
        return local
    prefix = _PREFIXES.get(uri)
    return f"{prefix}:{local}" if prefix else f"{{{uri}}}{local}"


def parse_part(data: bytes, part: str) -> ET.Element:
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
            raise _errors.unparseable(ENGINE, f"{part} nests elements deeper than {MAX_DEPTH} levels")
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
        raise _errors.unparseable(ENGINE, f"{part} declares a DTD or entities (refused)")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.buffer_text = True
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise _errors.unparseable(ENGINE, f"{part} is not well-formed XML: {exc}") from exc
    return builder.close()

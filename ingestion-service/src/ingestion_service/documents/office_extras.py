"""Text kreuzberg misses in OOXML files, as Markdown: charts, SmartArt diagrams (DOCX/XLSX/PPTX), XLSX text boxes.

Pure functions over the file (stdlib ``zipfile`` + ElementTree, DOCTYPEs refused); no engine import.
"""

from __future__ import annotations

import math
import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from xml.etree.ElementTree import Element

from ingestion_service.documents._safe_xml import BadXmlError, parse_xml

# A chart or drawing part above this (uncompressed) is skipped: real ones are a few KB to a few MB.
MAX_PART_BYTES = 20 * 1024 * 1024

# The main part that identifies each format, and the folder holding its charts.
_FORMAT_ROOTS = (("word/document.xml", "word"), ("xl/workbook.xml", "xl"), ("ppt/presentation.xml", "ppt"))
# What zipfile raises for a damaged archive or member: bad structures, undecodable names, unknown
# versions or methods, truncated data, offsets out of the file (OSError on an open file);
# RuntimeError is its "password required" for an encrypted member.
ZIP_DAMAGE = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError, ValueError)
_XLSX_DRAWING = re.compile(r"^xl/drawings/[^/]+\.xml$")
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
# Point caches inside c:cat / c:val / c:xVal / c:yVal / c:tx, in the order they are tried.
_CACHE_PATHS = ("strRef/strCache", "numRef/numCache", "strLit", "numLit", "multiLvlStrRef/multiLvlStrCache/lvl")
_CHART_HEADING = "### Chart"
_DIAGRAM_HEADING = "### Diagram"
_TEXT_BOX_HEADING = "### Text box"
_AXES_LABEL = "Axes: "
_CATEGORY_HEADER = "category"
# Splits office_extra_markdown output back into its sections (text-box lines never start with '#').
_FIXED_HEADINGS = f"{re.escape(_TEXT_BOX_HEADING)}$|{re.escape(_DIAGRAM_HEADING)}$"
_SECTION_START = re.compile(rf"^(?={re.escape(_CHART_HEADING)}(?::|$)|{_FIXED_HEADINGS})", re.MULTILINE)
# What this module adds around the document's text (headings, labels, list markers), for dedupe_against.
_OWN_LABELS = re.compile(
    rf"^(?:{re.escape(_CHART_HEADING)}:?|{_FIXED_HEADINGS}|{re.escape(_AXES_LABEL)}|\| {_CATEGORY_HEADER} \||\s*- )",
    re.MULTILINE,
)
# SmartArt data-model points that hold the author's text (the others are layout and connector points).
_DIAGRAM_TEXT_POINTS = frozenset({"node", "asst"})
_MARKUP = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$|[|#*_>`\\]", re.MULTILINE)


class OfficeExtrasError(Exception):
    """The file is not a readable ZIP, or one of its chart/drawing parts is not well-formed XML."""


@dataclass(frozen=True)
class _Series:
    name: str
    categories: dict[int, str]
    values: dict[int, str]


def office_extra_markdown(path: Path, media_type: str | None = None) -> str:
    """Markdown for the charts, SmartArt diagrams and XLSX text boxes of a DOCX/XLSX/PPTX; "" when none.

    The format is recognised by its main part (``word/document.xml``, ``xl/workbook.xml``,
    ``ppt/presentation.xml``); ``media_type`` is unused beyond documentation (the parts decide), and
    any other file gives "". Each chart becomes ``### Chart: <title>`` (``### Chart`` untitled) and
    a table of categories by series; each SmartArt diagram ``### Diagram`` and a nested list of its
    text; each XLSX drawing shape with text ``### Text box``.
    Sections follow the natural order of their part names (chart2 before chart10). Parts above
    ``MAX_PART_BYTES`` are skipped.

    Raises :class:`OfficeExtrasError` (and only it, besides ``OSError`` when the file cannot be opened)
    when the file is not a ZIP archive or a part is damaged or declares a DOCTYPE; the caller decides
    whether that fails the document or only loses the extras.
    """
    del media_type  # the part names are authoritative; a wrong hint must not hide charts
    with path.open("rb") as handle:  # opened here: an OSError below is damage, not a missing file
        try:
            archive = zipfile.ZipFile(handle)
        except ZIP_DAMAGE as exc:
            raise OfficeExtrasError(f"not a readable ZIP archive: {exc}") from exc
        with archive:
            return "\n\n".join(_sections(archive))


def _sections(archive: zipfile.ZipFile) -> list[str]:
    names = set(archive.namelist())
    folder = next((folder for main, folder in _FORMAT_ROOTS if main in names), None)
    if folder is None:
        return []
    chart_part = re.compile(rf"^{folder}/charts/[^/]+\.xml$")
    diagram_part = re.compile(rf"^{folder}/diagrams/data[^/]*\.xml$")
    sections: list[str] = []
    for name in sorted(names, key=_natural_key):
        if chart_part.match(name):
            root = read_part(archive, name)
            chart = root.find("chart") if root is not None and root.tag == "chartSpace" else None
            section = _chart_section(chart) if chart is not None else None
            if section:
                sections.append(section)
        elif diagram_part.match(name):
            root = read_part(archive, name)
            section = _diagram_section(root) if root is not None and root.tag == "dataModel" else ""
            if section:
                sections.append(section)
        elif folder == "xl" and _XLSX_DRAWING.match(name):
            root = read_part(archive, name)
            if root is not None:
                sections.extend(_text_box_sections(root))
    return sections


def _natural_key(name: str) -> list[str | int]:
    # re.split with a capture group alternates text and digits, so keys compare position by position.
    return [int(piece) if index % 2 else piece for index, piece in enumerate(re.split(r"(\d+)", name))]


def read_part(archive: zipfile.ZipFile, name: str) -> Element | None:
    """The part's root with namespaces dropped and mc:Fallback branches removed; None when too large."""
    info = archive.getinfo(name)
    if info.file_size > MAX_PART_BYTES:
        return None
    try:
        with archive.open(info) as member:
            data = member.read(MAX_PART_BYTES + 1)
    except ZIP_DAMAGE as exc:
        raise OfficeExtrasError(f"{name}: {exc}") from exc
    if len(data) > MAX_PART_BYTES:
        return None
    try:
        root = parse_xml(data)
    except BadXmlError as exc:
        raise OfficeExtrasError(f"{name}: {exc}") from exc
    return _simplified(root)


def _simplified(root: Element) -> Element:
    # mc:AlternateContent holds the same content twice (Choice and Fallback): keep the Choice.
    for parent in list(root.iter()):
        for child in list(parent):
            if child.tag == _MC_FALLBACK:
                parent.remove(child)
    # Local names: transitional and strict OOXML use different namespaces for the same elements.
    for element in root.iter():
        element.tag = element.tag.rpartition("}")[2]
    return root


def _chart_section(chart: Element) -> str:
    title = _title_of(chart)
    plot = chart.find("plotArea")
    series = _chart_series(plot) if plot is not None else []
    if not title and chart.find("title") is not None and len(series) == 1:
        title = series[0].name  # Office shows a lone series' name as the automatic title
    lines = [f"{_CHART_HEADING}: {title}" if title else _CHART_HEADING]
    axis_elements = [child for child in plot if child.tag.endswith("Ax")] if plot is not None else []
    axes = [text for axis in axis_elements if (text := _title_of(axis))]
    if axes:
        lines += ["", _AXES_LABEL + "; ".join(axes)]
    if series:
        lines += ["", *_series_table(series)]
    if not title and not axes and not series:
        return ""
    return "\n".join(lines)


def _title_of(owner: Element) -> str:
    """A c:title's text: rich text paragraphs, or the cached cell value it points to."""
    title = owner.find("title")
    if title is None:
        return ""
    tx = title.find("tx")
    if tx is None:
        return ""
    rich = tx.find("rich")
    if rich is not None:
        return _one_line(" ".join(paragraph_text(paragraph) for paragraph in rich.iter("p")))
    return _one_line(" ".join(_points(tx).values()))


def _chart_series(plot: Element) -> list[_Series]:
    found: list[tuple[int, int, Element]] = []
    for group in plot:
        for ser in group.findall("ser"):
            found.append((_int_val(ser.find("order"), len(found)), len(found), ser))
    series: list[_Series] = []
    for position, (_, _, ser) in enumerate(sorted(found, key=lambda entry: entry[:2]), start=1):
        tx = ser.find("tx")
        name = _one_line(" ".join(_points(tx).values()) if tx is not None else "")
        if not name and tx is not None:
            name = _one_line(tx.findtext("v") or "")
        series.append(
            _Series(
                name=name or f"Series {position}",
                categories=_points(_first_child(ser, "cat", "xVal")),
                values=_points(_first_child(ser, "val", "yVal")),
            )
        )
    return series


def _series_table(series: list[_Series]) -> list[str]:
    categories = next((entry.categories for entry in series if entry.categories), {})
    indexes = sorted(set(categories).union(*(entry.values for entry in series)))
    header = ([_CATEGORY_HEADER] if categories else []) + [entry.name for entry in series]
    rows = [
        ([categories.get(index, "")] if categories else []) + [entry.values.get(index, "") for entry in series]
        for index in indexes
    ]
    return [_table_row(header), _table_row(["---"] * len(header)), *(_table_row(row) for row in rows)]


def _table_row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _first_child(parent: Element, *tags: str) -> Element | None:
    return next((child for tag in tags if (child := parent.find(tag)) is not None), None)


def _points(holder: Element | None) -> dict[int, str]:
    """idx -> shown value of the first point cache under ``holder``; numbers as Office shows them."""
    if holder is None:
        return {}
    for cache_path in _CACHE_PATHS:
        cache = holder.find(cache_path)
        if cache is None:
            continue
        numeric = cache.tag in ("numCache", "numLit")
        points: dict[int, str] = {}
        for point in cache.findall("pt"):
            index = _int_attr(point.get("idx"))
            value = point.findtext("v")
            if index is None or value is None:
                continue  # a point without position or value is a gap in the series
            points[index] = _number(value) if numeric else _one_line(value)
        return points
    return {}


def _number(value: str) -> str:
    # Caches store binary doubles ("4.4000000000000004"); 15 significant digits is Excel's display.
    try:
        number = float(value)
    except ValueError:
        return _one_line(value)
    return format(number, ".15g") if math.isfinite(number) else _one_line(value)


def _int_attr(raw: str | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _int_val(element: Element | None, default: int) -> int:
    value = _int_attr(element.get("val")) if element is not None else None
    return default if value is None else value


def _diagram_section(model: Element) -> str:
    """The SmartArt's text as a nested list, following its parent-of connections from the root."""
    texts: dict[str, str] = {}
    roots: list[str] = []
    for point in model.iter("pt"):
        model_id, kind = point.get("modelId", ""), point.get("type", "node")
        if kind == "doc":
            roots.append(model_id)
        elif kind in _DIAGRAM_TEXT_POINTS:
            body = point.find("t")
            text = _one_line(" ".join(paragraph_text(p) for p in body.iter("p"))) if body is not None else ""
            texts[model_id] = text
    children: dict[str, list[tuple[int, str]]] = {}
    for connection in model.iter("cxn"):
        if connection.get("type", "parOf") == "parOf":
            order = _int_attr(connection.get("srcOrd")) or 0
            children.setdefault(connection.get("srcId", ""), []).append((order, connection.get("destId", "")))
    lines: list[str] = []
    seen: set[str] = set()
    # Depth-first without recursion; `seen` guards against connection cycles in a damaged model.
    stack = [(root, -1) for root in reversed(roots)]
    while stack:
        model_id, depth = stack.pop()
        if model_id in seen:
            continue
        seen.add(model_id)
        if texts.get(model_id):
            lines.append("  " * depth + "- " + texts[model_id])
        below = sorted(children.get(model_id, []))
        stack.extend((child, depth + 1) for _, child in reversed(below))
    # Points no connection reaches still carry text.
    lines += [f"- {text}" for model_id, text in texts.items() if text and model_id not in seen]
    return f"{_DIAGRAM_HEADING}\n\n" + "\n".join(lines) if lines else ""


def _text_box_sections(drawing: Element) -> list[str]:
    sections: list[str] = []
    for shape in drawing.iter("sp"):
        body = shape.find("txBody")
        if body is None:
            continue
        paragraphs = [text for paragraph in body.iter("p") if (text := paragraph_text(paragraph).strip())]
        if paragraphs:
            lines = "\n\n".join(_escape_line_starts(paragraph) for paragraph in paragraphs)
            sections.append(f"{_TEXT_BOX_HEADING}\n\n{lines}")
    return sections


def paragraph_text(paragraph: Element) -> str:
    pieces: list[str] = []
    for element in paragraph.iter():
        if element.tag == "t" and element.text:
            pieces.append(element.text)
        elif element.tag == "br":
            pieces.append("\n")
    return "".join(pieces)


def _escape_line_starts(text: str) -> str:
    # A text line starting with '#' would read as a heading (and as a section start in dedupe_against).
    return "\n".join(("\\" + line) if line.startswith("#") else line for line in text.split("\n"))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def dedupe_against(existing_text: str, extra_markdown: str) -> str:
    """``extra_markdown`` without the sections whose text ``existing_text`` already contains.

    Both sides are compared without Markdown markup and without the labels this module adds (the
    ``### Chart`` / ``### Diagram`` / ``### Text box`` headings, ``Axes:``, the ``category`` column
    header, list markers), with
    whitespace collapsed and case folded, so deduplicating against text that already holds these
    sections drops them all. Sections without any text are dropped.
    """
    haystack = _comparable(existing_text)
    kept = [
        section.strip()
        for section in _SECTION_START.split(extra_markdown)
        if (needle := _comparable(section)) and needle not in haystack
    ]
    return "\n\n".join(kept)


def _comparable(text: str) -> str:
    text = _OWN_LABELS.sub(" ", text)
    return " ".join(_MARKUP.sub(" ", text).split()).casefold()

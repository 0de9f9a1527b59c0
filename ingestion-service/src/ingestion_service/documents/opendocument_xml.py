"""OpenDocument content.xml to Markdown blocks: headings, paragraphs, lists, tables (repetition
expanded within bounds, spans resolved), slides and their notes, footnotes gathered per page.

Reads elements the stdlib parsed (``opendocument.py`` opens the archive and refuses DOCTYPEs).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from xml.etree.ElementTree import Element

from ingestion_service.documents import _errors
from ingestion_service.errors import DocumentTooLargeError

ENGINE_NAME = "opendocument"

# Repetition attributes may declare a whole sheet (16384 columns, 1048576 rows): expansion is capped.
MAX_TABLE_COLUMNS = 1024
MAX_ROW_REPEAT = 256
MAX_TABLE_CELLS = 5_000_000
MAX_SPACE_RUN = 100
# Deeper element nesting than this is refused rather than recursed into.
MAX_NESTING = 200

_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "svg": "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
}


def q(name: str) -> str:
    """An ODF name (``text:p``) as ElementTree spells it."""
    prefix, local = name.split(":")
    return f"{{{_NS[prefix]}}}{local}"


_H, _P, _LIST, _LIST_ITEM, _LIST_HEADER = (
    q(n) for n in ("text:h", "text:p", "text:list", "text:list-item", "text:list-header")
)
_TABLE, _ROW, _CELL, _COVERED = (
    q(n) for n in ("table:table", "table:table-row", "table:table-cell", "table:covered-table-cell")
)
_ROW_GROUPS = frozenset(q(n) for n in ("table:table-header-rows", "table:table-rows", "table:table-row-group"))
_SPACE, _TAB, _LINE_BREAK, _NOTE = (q(n) for n in ("text:s", "text:tab", "text:line-break", "text:note"))
_NOTE_CITATION, _NOTE_BODY = q("text:note-citation"), q("text:note-body")
PAGE, _NOTES = q("draw:page"), q("presentation:notes")
_CLASS = q("presentation:class")
# Elements without readable text, or whose text is not the document's (deleted changes, comments, templates).
_SKIPPED = frozenset(
    q(name)
    for name in (
        "text:tracked-changes",
        "office:annotation",
        "office:annotation-end",
        "text:sequence-decls",
        "text:variable-decls",
        "text:user-field-decls",
        "text:dde-connection-decls",
        "text:table-of-content-source",
        "text:illustration-index-source",
        "text:table-index-source",
        "text:object-index-source",
        "text:user-index-source",
        "text:alphabetical-index-source",
        "text:bibliography-source",
        "table:calculation-settings",
        "table:named-expressions",
        "table:database-ranges",
        "table:content-validations",
        "table:label-ranges",
        "draw:enhanced-geometry",
        "draw:page-thumbnail",
        "draw:object",
        "draw:object-ole",
        "svg:title",
        "svg:desc",
        "presentation:settings",
        "office:forms",
        "office:scripts",
        "office:event-listeners",
    )
)
# Placeholders whose text is generated (slide numbers, dates), not written by the author.
_GENERATED_CLASSES = frozenset({"page-number", "date-time"})
# Characters standing for explicit whitespace until ODF's whitespace collapsing is done.
_KEPT_SPACE, _KEPT_TAB, _KEPT_BREAK = "\x01", "\x02", "\x03"


@dataclass
class Renderer:
    """Walks content.xml elements into Markdown blocks; footnotes gather per page."""

    footnotes: list[str] = field(default_factory=list)
    cells: int = 0
    depth: int = 0

    # Pages -------------------------------------------------------------------------------------

    def page(self, container: Element) -> str:
        self.footnotes = []
        blocks = self.blocks(container)
        return _join([*blocks, "\n".join(self.footnotes)])

    def spreadsheet(self, spreadsheet: Element) -> str:
        self.footnotes = []
        blocks: list[str] = []
        for child in spreadsheet:
            if child.tag != _TABLE:
                blocks.extend(self.blocks_of(child))
                continue
            sheet = self.blocks_of(child)
            if sheet:
                name = " ".join((child.get(q("table:name")) or "").split())
                blocks += [f"## {name}" if name else "## Sheet", *sheet]
        return _join([*blocks, "\n".join(self.footnotes)])

    def slide(self, page: Element, index: int, label: str) -> str:
        self.footnotes = []
        title = ""
        blocks: list[str] = []
        notes: list[str] = []
        for child in page:
            if child.tag == _NOTES:
                notes = [block for element in child for block in self.blocks_of(element)]
            elif child.get(_CLASS) == "title" and not title:
                title = " ".join(self.plain_text(child).split())
            else:
                blocks.extend(self.blocks_of(child))
        heading = f"## {title}" if title else f"## {label} {index + 1}"
        notes_part = ["### Notes", *notes] if notes else []
        return _join([heading, *blocks, *notes_part, "\n".join(self.footnotes)])

    # Blocks ------------------------------------------------------------------------------------

    def blocks(self, container: Element) -> list[str]:
        blocks: list[str] = []
        ends_with_list = False
        for child in container:
            child_blocks = self.blocks_of(child)
            if not child_blocks:
                continue
            if child.tag == _LIST and ends_with_list and child_blocks[0].lstrip().startswith("- "):
                # Consecutive lists (a list continued after a nested one) read as one Markdown list.
                blocks[-1] += "\n" + child_blocks.pop(0)
            blocks.extend(child_blocks)
            ends_with_list = child.tag == _LIST and len(child_blocks) <= 1
        return blocks

    def blocks_of(self, element: Element) -> list[str]:
        tag = element.tag
        if tag in _SKIPPED or element.get(_CLASS) in _GENERATED_CLASSES:
            return []
        with self._nested():
            if tag in (_P, _H):
                text, deferred = self.inline(element)
                if tag == _H and text:
                    level = min(max(_int(element.get(q("text:outline-level")), 1), 1), 6)
                    text = "#" * level + " " + text
                return [text, *deferred] if text else deferred
            if tag == _LIST:
                return [block for block in self.list_blocks(element, 0) if block]
            if tag == _TABLE:
                table = self.table(element)
                return [table] if table else []
            return self.blocks(element)

    def list_blocks(self, list_element: Element, level: int) -> list[str]:
        """A list as one block of ``- `` lines (two spaces of indent per level); other content after it."""
        lines: list[str] = []
        after: list[str] = []
        indent = "  " * level
        for item in list_element:
            if item.tag not in (_LIST_ITEM, _LIST_HEADER):
                continue
            first = True
            for child in item:
                if child.tag == _LIST:
                    with self._nested():
                        nested_lines, *nested_after = self.list_blocks(child, level + 1)
                    if nested_lines:
                        lines.append(nested_lines)
                    after.extend(nested_after)
                elif child.tag in (_P, _H):
                    text, deferred = self.inline(child)
                    after.extend(deferred)
                    if text:
                        lines.append(indent + ("- " if first else "  ") + text.replace("\n", "\n" + indent + "  "))
                        first = False
                else:
                    after.extend(self.blocks_of(child))
        return ["\n".join(lines), *after]

    # Tables ------------------------------------------------------------------------------------

    def table(self, table: Element) -> str:
        rows: list[list[str]] = []
        for row in self._rows(table):
            cells = self._row_cells(row)
            if not any(cells):
                continue  # an empty row (often a repeated one filling the sheet) carries no text
            repeat = min(max(_int(row.get(q("table:number-rows-repeated")), 1), 1), MAX_ROW_REPEAT)
            self.cells += repeat * len(cells)
            if self.cells > MAX_TABLE_CELLS:
                raise DocumentTooLargeError(f"The document's tables hold more than {MAX_TABLE_CELLS} cells.")
            rows.extend([cells] * repeat)
        width = max((len(row) for row in rows), default=0)
        kept = [column for column in range(width) if any(column < len(row) and row[column] for row in rows)]
        if not kept:
            return ""
        grid = [[row[column] if column < len(row) else "" for column in kept] for row in rows]
        lines = [_table_row(grid[0]), _table_row(["---"] * len(kept)), *(_table_row(row) for row in grid[1:])]
        return "\n".join(lines)

    def _rows(self, container: Element) -> Iterator[Element]:
        for child in container:
            if child.tag == _ROW:
                yield child
            elif child.tag in _ROW_GROUPS:
                with self._nested():
                    yield from self._rows(child)

    def _row_cells(self, row: Element) -> list[str]:
        runs: list[tuple[str, int]] = []
        for cell in row:
            if cell.tag in (_CELL, _COVERED):
                repeat = max(_int(cell.get(q("table:number-columns-repeated")), 1), 1)
                text = " ".join(self.plain_text(cell).split()) if cell.tag == _CELL else ""
                runs.append((text, repeat))
        while runs and not runs[-1][0]:
            runs.pop()  # trailing empty cells, often one run repeated to the sheet's last column
        cells: list[str] = []
        for text, repeat in runs:
            cells.extend([text] * min(repeat, MAX_TABLE_COLUMNS - len(cells)))
            if len(cells) >= MAX_TABLE_COLUMNS:
                break
        return cells

    # Inline text -------------------------------------------------------------------------------

    def plain_text(self, element: Element) -> str:
        """All paragraph text under ``element`` (tables, lists, frames flattened), one paragraph a line."""
        if element.tag in _SKIPPED:
            return ""
        if element.tag in (_P, _H):
            text, deferred = self.inline(element)
            return "\n".join([text, *deferred])
        with self._nested():
            return "\n".join(text for child in element if (text := self.plain_text(child)))

    def inline(self, paragraph: Element) -> tuple[str, list[str]]:
        """A paragraph's text, and the blocks of frames anchored in it (text boxes, tables) to follow it."""
        pieces: list[str] = []
        deferred: list[str] = []
        self._inline_into(paragraph, pieces, deferred, skip_tail=True)
        text = re.sub(r"[ \t\r\n]+", " ", "".join(pieces)).strip(" ")
        text = text.replace(_KEPT_SPACE, " ").replace(_KEPT_TAB, "\t").replace(_KEPT_BREAK, "\n")
        return "\n".join(line.strip() for line in text.split("\n")).strip(), deferred

    def _inline_into(self, element: Element, pieces: list[str], deferred: list[str], *, skip_tail: bool) -> None:
        tag = element.tag
        if tag in _SKIPPED:
            pass
        elif tag == _SPACE:
            pieces.append(_KEPT_SPACE * min(max(_int(element.get(q("text:c")), 1), 1), MAX_SPACE_RUN))
        elif tag == _TAB:
            pieces.append(_KEPT_TAB)
        elif tag == _LINE_BREAK:
            pieces.append(_KEPT_BREAK)
        elif tag == _NOTE:
            self._footnote(element, pieces)
        elif tag.startswith("{" + _NS["draw"] + "}") or tag == _TABLE:
            deferred.extend(self.blocks_of(element))
        else:
            pieces.append(element.text or "")
            with self._nested():
                for child in element:
                    self._inline_into(child, pieces, deferred, skip_tail=False)
        if not skip_tail:
            pieces.append(element.tail or "")

    def _footnote(self, note: Element, pieces: list[str]) -> None:
        label = " ".join((note.findtext(_NOTE_CITATION) or str(len(self.footnotes) + 1)).split())
        body = note.find(_NOTE_BODY)
        text = " ".join(self.plain_text(body).split()) if body is not None else ""
        pieces.append(f"[^{label}]")
        self.footnotes.append(f"[^{label}]: {text}")

    def _nested(self) -> _Depth:
        return _Depth(self)


class _Depth:
    """Counts recursion into nested elements; refuses documents nested deeper than MAX_NESTING."""

    def __init__(self, renderer: Renderer) -> None:
        self._renderer = renderer

    def __enter__(self) -> None:
        self._renderer.depth += 1
        if self._renderer.depth > MAX_NESTING:
            raise _errors.unparseable(ENGINE_NAME, f"elements nested deeper than {MAX_NESTING} levels")

    def __exit__(self, *_exc: object) -> None:
        self._renderer.depth -= 1


def _int(raw: str | None, default: int) -> int:
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def _table_row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _join(blocks: list[str]) -> str:
    return "\n\n".join(block for block in blocks if block.strip())

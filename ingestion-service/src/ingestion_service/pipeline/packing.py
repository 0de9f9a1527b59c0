"""One section's Markdown into chunk pieces: whole blocks where they fit, tables cut between rows.

A section (the text under one heading path) is read as blocks: paragraphs and lists (separated by
blank lines), fenced code, and pipe tables. Blocks are packed whole into pieces of at most the
budget in tokens of what is indexed; a list that does not fit is cut between its items, and a
paragraph (or list item) longer than the budget by ``pack_tokens`` (word boundaries, overlap). A
piece never ends on a heading. A table that fits stays whole with
the short paragraph that introduces it (its caption); a larger one is cut into row groups, and
each group after the first carries the caption, the table's title lines and its header row in
its *context*: indexed with it, never shown as its text, which stays the document's own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ingestion_service.pipeline.chunking import pack_tokens
from ingestion_service.pipeline.tables import Table, is_table_line, keyed_row, parse_pipe_table, row_line
from ingestion_service.tokens import TokenCounter

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+\S")
_LIST_ITEM = re.compile(r"^( {0,3})(?:[-*+]|\d{1,9}[.)])[ \t]+\S")
# A paragraph at most this long, right before a table, introduces it ("Table 2: run times").
CAPTION_MAX_TOKENS = 48
BLOCK_SEPARATOR = "\n\n"
# An open piece under this share of the budget leads the next long paragraph's first cut.
SMALL_LEAD_SHARE = 4


@dataclass(frozen=True)
class Block:
    """A paragraph, list, code fence or heading line (``tables`` empty), or a pipe table."""

    text: str
    tables: tuple[Table, ...] = ()

    @property
    def is_heading(self) -> bool:
        return not self.tables and bool(_HEADING.match(self.text)) and "\n" not in self.text


@dataclass(frozen=True)
class Piece:
    """A chunk's own text, what is indexed in its place (table rows as ``column: value``), and the
    context lines indexed with it (a continued table's caption, titles and header row)."""

    content: str
    index_body: str
    context: tuple[str, ...] = ()


def section_blocks(text: str) -> list[Block]:
    """``text`` as blocks, in order; a pipe table is one block however it is spaced."""
    blocks: list[Block] = []
    lines = text.split("\n")
    index = 0
    paragraph: list[str] = []

    def end_paragraph() -> None:
        if any(line.strip() for line in paragraph):
            blocks.append(Block("\n".join(paragraph).strip("\n")))
        paragraph.clear()

    while index < len(lines):
        line = lines[index]
        fence = _FENCE.match(line)
        if fence:
            end_paragraph()
            end = _fence_end(lines, index, fence.group(1))
            blocks.append(Block("\n".join(lines[index : end + 1])))
            index = end + 1
            continue
        if is_table_line(line):
            end = index
            while end + 1 < len(lines) and is_table_line(lines[end + 1]):
                end += 1
            tables = parse_pipe_table(lines[index : end + 1])
            if tables:
                end_paragraph()
                blocks.append(Block("\n".join(lines[index : end + 1]), tuple(tables)))
                index = end + 1
                continue
        if not line.strip():
            end_paragraph()
        elif _HEADING.match(line):
            end_paragraph()
            blocks.append(Block(line.strip()))
        else:
            paragraph.append(line)
        index += 1
    end_paragraph()
    return blocks


def list_items(text: str) -> list[str]:
    """A list block's top-level items (each with its continuation lines and nested items); any
    other block as one part."""
    lines = text.split("\n")
    first = _LIST_ITEM.match(lines[0])
    if first is None:
        return [text]
    indent = len(first.group(1))
    items: list[str] = []
    current: list[str] = []
    for line in lines:
        marker = _LIST_ITEM.match(line)
        if marker is not None and len(marker.group(1)) <= indent and current:
            items.append("\n".join(current))
            current = []
        current.append(line)
    items.append("\n".join(current))
    return items


def _fence_end(lines: Sequence[str], start: int, run: str) -> int:
    for index in range(start + 1, len(lines)):
        line = lines[index]
        match = _FENCE.match(line)
        # CommonMark: a closing fence is at least as long as the opening and carries no info string.
        if match and match.group(1)[0] == run[0] and len(match.group(1)) >= len(run) and not line.strip().strip(run[0]):
            return index
    return len(lines) - 1


@dataclass
class _Open:
    """The piece being filled: shown parts and indexed parts, block by block."""

    shown: list[str] = field(default_factory=lambda: list[str]())
    indexed: list[str] = field(default_factory=lambda: list[str]())
    heading: list[bool] = field(default_factory=lambda: list[bool]())

    def add(self, shown: str, indexed: str, *, heading: bool = False) -> None:
        self.shown.append(shown)
        self.indexed.append(indexed)
        self.heading.append(heading)

    def pop(self) -> str:
        self.indexed.pop()
        self.heading.pop()
        return self.shown.pop()

    @property
    def headings(self) -> int:
        """How many of the trailing parts are heading lines."""
        count = 0
        for is_heading in reversed(self.heading):
            if not is_heading:
                break
            count += 1
        return count

    def text(self) -> str:
        return BLOCK_SEPARATOR.join(self.indexed)


class SectionPacker:
    """Packs one section's blocks into pieces whose indexed text fits ``budget(context)`` tokens."""

    def __init__(
        self,
        counter: TokenCounter,
        budget: Callable[[Sequence[str]], int],
        *,
        overlap: int,
        keyed_tables: bool,
    ) -> None:
        self.counter = counter
        self.budget = budget
        self.overlap = overlap
        self.keyed_tables = keyed_tables
        self.pieces: list[Piece] = []
        self.open = _Open()

    def pack(self, text: str) -> list[Piece]:
        self.pieces, self.open = [], _Open()
        for block in section_blocks(text):
            if block.tables:
                for position, table in enumerate(block.tables):
                    self._table(table, caption_allowed=position == 0)
            else:
                self._text(block)
        self._flush(keep_headings=False)
        return self.pieces

    # -- text ------------------------------------------------------------------------------------

    def _tokens(self, text: str) -> int:
        return self.counter.count(text)

    def _fits(self, extra: str, context: Sequence[str] = ()) -> bool:
        candidate = self.open.text() + (BLOCK_SEPARATOR if self.open.indexed else "") + extra
        return self._tokens(candidate) <= self.budget(context)

    def _text(self, block: Block) -> None:
        if self._fits(block.text):
            self.open.add(block.text, block.text, heading=block.is_heading)
            return
        items = list_items(block.text)
        if len(items) > 1:
            self._list(items)
            return
        if not self._small_lead():
            self._flush(keep_headings=True)
            if self._fits(block.text):
                self.open.add(block.text, block.text, heading=block.is_heading)
                return
        # Longer than what is left: cut it, the open piece's headings or short lead (a title line)
        # in front of the first cut rather than alone in a piece of its own.
        lead = self.open.text()
        self.open = _Open()
        text = f"{lead}{BLOCK_SEPARATOR}{block.text}" if lead else block.text
        cuts = pack_tokens(text, self.counter, self.budget(()), self.overlap)
        for cut in cuts[:-1]:
            self.pieces.append(Piece(cut, cut))
        if cuts:
            self.open.add(cuts[-1], cuts[-1])

    def _list(self, items: Sequence[str]) -> None:
        """A list longer than the room left, cut between its items: as many as fit go with what is
        open (a heading and the sentence that introduces the list), the rest into the next pieces."""
        rest = list(items)
        while rest:
            taken = 0
            while taken < len(rest) and self._fits("\n".join(rest[: taken + 1])):
                taken += 1
            if taken:
                text = "\n".join(rest[:taken])
                self.open.add(text, text)
                rest = rest[taken:]
                continue
            if self.open.shown and self.open.headings < len(self.open.shown) and not self._small_lead():
                self._flush(keep_headings=True)
                continue
            # One item longer than the room: cut as a long paragraph (a small lead goes with it).
            self._text(Block(rest.pop(0)))

    def _small_lead(self) -> bool:
        """The open piece is a few lines of text only (no table), too little to stand alone."""
        if not self.open.shown or self.open.shown != self.open.indexed:
            return False
        return self._tokens(self.open.text()) < self.budget(()) // SMALL_LEAD_SHARE

    def _flush(self, *, keep_headings: bool) -> None:
        """End the open piece; with ``keep_headings`` its trailing heading lines open the next one."""
        carried = self.open.headings if keep_headings else 0
        if carried and carried == len(self.open.shown):
            return  # only headings so far: they wait for their body
        shown, indexed = self.open.shown, self.open.indexed
        cut = len(shown) - carried
        if cut > 0:
            self.pieces.append(Piece(BLOCK_SEPARATOR.join(shown[:cut]), BLOCK_SEPARATOR.join(indexed[:cut])))
        self.open = _Open()
        for position in range(cut, len(shown)):
            self.open.add(shown[position], indexed[position], heading=True)

    # -- tables ----------------------------------------------------------------------------------

    def _rows_indexed(self, table: Table, rows: Sequence[Sequence[str]], *, with_header: bool) -> str:
        if not self.keyed_tables:
            return table.markdown(rows, with_header=with_header)
        names = table.column_names()
        lines = [*table.titles] if with_header else []
        if with_header and any(table.header) and not rows:
            lines.append(table.header_line())
        lines.extend(keyed_row(names, row) for row in rows)
        return "\n".join(lines)

    def _table(self, table: Table, *, caption_allowed: bool) -> None:
        shown = table.markdown()
        indexed = self._rows_indexed(table, table.rows, with_header=True)
        if self._fits(indexed):
            self.open.add(shown, indexed)
            return
        caption = self._take_caption() if caption_allowed else None
        self._flush(keep_headings=True)
        lead_shown = [*self.open.shown, *([caption] if caption else [])]
        lead_indexed = [*self.open.indexed, *([caption] if caption else [])]
        self.open = _Open()
        whole = BLOCK_SEPARATOR.join([*lead_indexed, indexed])
        if self._tokens(whole) <= self.budget(()):
            self.pieces.append(Piece(BLOCK_SEPARATOR.join([*lead_shown, shown]), whole))
            return
        self._row_groups(table, lead_shown, lead_indexed, caption)

    def _take_caption(self) -> str | None:
        """The open piece's last paragraph when it is short enough to be the table's caption."""
        if not self.open.shown or self.open.headings:
            return None
        last = self.open.shown[-1]
        if self.open.indexed[-1] != last or self._tokens(last) > CAPTION_MAX_TOKENS:
            return None
        return self.open.pop()

    def _row_groups(self, table: Table, lead_shown: list[str], lead_indexed: list[str], caption: str | None) -> None:
        """Row groups of a table too large for one piece. The first group is shown and indexed with
        the lead (carried headings, caption), the table's titles and header; the others are shown as
        their rows alone and indexed with that caption, titles and header as context."""
        context = tuple(part for part in [caption, *table.titles, table.header_line()] if part)
        head_shown = BLOCK_SEPARATOR.join([*lead_shown, table.markdown([], with_header=True)])
        head_indexed = BLOCK_SEPARATOR.join([*lead_indexed, self._rows_indexed(table, [], with_header=True)])
        rows = table.rows
        start = 0
        while start < len(rows):
            first = start == 0
            budget = self.budget(() if first else context)
            end = start + 1
            # Grow the group row by row while its indexed text fits (at least one row per group).
            while (
                end < len(rows)
                and self._tokens(self._group(table, rows[start : end + 1], head_indexed, first)) <= budget
            ):
                end += 1
            group = rows[start:end]
            shown = "\n".join(row_line(row) for row in group)
            if first:
                shown = f"{head_shown}\n{shown}"
            indexed = self._group(table, group, head_indexed, first)
            piece_context = () if first else context
            if self._tokens(indexed) > budget:
                # One row alone longer than a piece: its text is cut (the context still travels).
                for cut in pack_tokens(indexed, self.counter, budget, self.overlap):
                    self.pieces.append(Piece(cut, cut, piece_context))
            else:
                self.pieces.append(Piece(shown, indexed, piece_context))
            start = end

    def _group(self, table: Table, rows: Sequence[Sequence[str]], head_indexed: str, first: bool) -> str:
        indexed = self._rows_indexed(table, rows, with_header=False)
        return f"{head_indexed}\n{indexed}" if first else indexed

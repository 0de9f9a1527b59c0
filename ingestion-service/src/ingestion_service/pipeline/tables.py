"""Markdown pipe tables as cells: parsed, compacted, their title and header rows found, rendered.

Every engine writes tables as Markdown pipe tables (kreuzberg, the OOXML chart reader, the
OpenDocument reader). A spreadsheet arrives as one pipe table per sheet whose first rows are often
a title ("3. Analyses by segment") and whose real header row comes later, with blank rows between
blocks. The chunker needs the table as rows to cut it between rows, repeat its header row in the
indexed text of every part, and name each value's column.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

_SEPARATOR_CELL = re.compile(r"^:?-{3,}:?$")
# A pipe that is not escaped (``\|`` is a literal pipe inside a cell).
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
# A row whose filled cells are at most this share of the table's columns is a title line, not a header.
HEADER_MIN_FILLED_SHARE = 0.5


def is_table_line(line: str) -> bool:
    """A line of a pipe table (kreuzberg always writes the leading pipe)."""
    return line.lstrip().startswith("|")


def split_cells(line: str) -> list[str]:
    """The cells of one pipe-table line, stripped; the outer pipes are not cells."""
    inner = line.strip()
    if inner.startswith("|"):
        inner = inner[1:]
    if inner.endswith("|") and not inner.endswith("\\|"):
        inner = inner[:-1]
    return [cell.strip() for cell in _CELL_SPLIT.split(inner)]


def is_separator(line: str) -> bool:
    """The ``| --- | --- |`` line under a header row."""
    cells = split_cells(line)
    return bool(cells) and all(_SEPARATOR_CELL.match(cell) for cell in cells)


def _filled(row: Sequence[str]) -> int:
    return sum(1 for cell in row if cell)


@dataclass
class Table:
    """One table: title lines above it, its header row (possibly empty) and its body rows.

    Columns empty in every row are dropped and so are rows with no cell at all, so ``header`` and
    every row have ``width`` cells.
    """

    header: list[str]
    rows: list[list[str]]
    titles: list[str] = field(default_factory=lambda: list[str]())

    @property
    def width(self) -> int:
        return len(self.header)

    def header_line(self) -> str:
        """The header row and its separator, as Markdown."""
        if not any(self.header):
            return ""
        return f"{row_line(self.header)}\n{row_line(['---'] * self.width)}"

    def markdown(self, rows: Sequence[Sequence[str]] | None = None, *, with_header: bool = True) -> str:
        """Title lines, header and ``rows`` (default: all) as Markdown."""
        body = self.rows if rows is None else rows
        lines = [*self.titles] if with_header else []
        header = self.header_line() if with_header else ""
        if header:
            lines.append(header)
        elif with_header and body:
            # A pipe table needs a header row; a table whose header is blank gets an empty one.
            lines.append(f"{row_line([''] * self.width)}\n{row_line(['---'] * self.width)}")
        lines.extend(row_line(row) for row in body)
        return "\n".join(lines)

    def column_names(self) -> list[str]:
        """One name per column: the header cell; a blank one right of a named cell takes that name
        (engines write a cell spanning columns once, then blanks)."""
        names: list[str] = []
        for index, cell in enumerate(self.header):
            names.append(cell or (names[index - 1] if index > 0 else ""))
        return names


def row_line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def parse_pipe_table(lines: Sequence[str]) -> list[Table]:
    """The tables in one block of pipe-table lines (header, separator, rows).

    Leading rows with few filled cells become the table's title lines, and the first row filled
    enough becomes its header; a blank row followed by such a title line starts another table
    (a sheet holding several blocks). Returns [] when ``lines`` is not a pipe table.
    """
    if len(lines) < 2 or not is_separator(lines[1]):
        return []
    grid = [split_cells(lines[0]), *(split_cells(line) for line in lines[2:])]
    width = max(len(row) for row in grid)
    grid = [row + [""] * (width - len(row)) for row in grid]
    tables: list[Table] = []
    for block in _blocks(grid):
        table = _table_of(block)
        if table is not None:
            tables.append(table)
    return tables


def _blocks(grid: list[list[str]]) -> list[list[list[str]]]:
    """Rows split at blank rows that are followed by a title-like row (a new block of a sheet)."""
    width = len(grid[0]) if grid else 0
    blocks: list[list[list[str]]] = [[]]
    blank_before = False
    for row in grid:
        filled = _filled(row)
        if filled == 0:
            blank_before = True
            continue
        # Only a block that already has a header and a body row ends there: a run of titles stays one block.
        if blank_before and len(blocks[-1]) >= 2 and _is_title_row(row, width):
            blocks.append([])
        blocks[-1].append(row)
        blank_before = False
    return [block for block in blocks if block]


def _is_title_row(row: Sequence[str], width: int) -> bool:
    filled = _filled(row)
    return filled > 0 and (filled == 1 or filled <= width * HEADER_MIN_FILLED_SHARE / 2)


_NUMBER = re.compile(r"^[-+(]?[\d.,' ]*\d[\d.,' ]*%?\)?$")


def _two_column_title(rows: Sequence[Sequence[str]]) -> bool:
    """A two-column block whose first row is a title (its first cell alone), the next its header
    (two names, no number) and a row of numbers follows: ``Ducks per year | `` over ``Year | Ducks``."""
    if len(rows) < 3 or not rows[0][0] or rows[0][1]:
        return False
    names = rows[1]
    if not all(names) or any(_NUMBER.match(cell) for cell in names):
        return False
    return any(_NUMBER.match(cell) for row in rows[2:] for cell in row)


def _table_of(rows: list[list[str]]) -> Table | None:
    """Compact the block (drop empty columns) and find its titles and header."""
    keep = [column for column in range(len(rows[0])) if any(row[column] for row in rows)]
    compact = [[row[column] for column in keep] for row in rows]
    if not keep:
        return None
    width = len(keep)
    titles: list[str] = []
    start = 0
    # Title lines: leading rows too sparse to be a header, while fuller rows follow.
    while (
        start < len(compact) - 1
        and width >= 3
        and _filled(compact[start]) <= max(1, int(width * HEADER_MIN_FILLED_SHARE) - 1)
        and _filled(compact[start]) < width
    ):
        titles.append("  ".join(cell for cell in compact[start] if cell))
        start += 1
    if width == 2 and _two_column_title(compact):
        # Two columns: one filled cell above a full row of names is a title only where numbers follow.
        titles.append(compact[0][0])
        start = 1
    header, body = compact[start], compact[start + 1 :]
    return Table(header=header, rows=body, titles=titles)


def keyed_row(names: Sequence[str], row: Sequence[str]) -> str:
    """One row as ``column: value`` pairs (its first cell, the row's key, leads without a name when
    its column has none); blank cells are left out."""
    parts: list[str] = []
    for index, value in enumerate(row):
        if not value:
            continue
        name = names[index] if index < len(names) else ""
        if name and name != value:
            parts.append(f"{name}: {value}")
        else:
            parts.append(value)
    return "; ".join(parts)

"""Ruled tables of a PDF's text layer as Markdown pipe tables, put into the page text.

kreuzberg often misses a ruled table in a PDF with a text layer and writes its cells as one run
of words and numbers, the header away from the values; pdfplumber finds such tables from their
ruling lines and rectangles. Everything here runs on pages that have a text layer and rules:

* **Which pages.** The survey (``pdf_survey``, one PDFium pass under its lock) counts each page's
  rule-like path objects; only a text-layer page that could hold a grid (``PageSurvey.ruled``) is
  parsed by pdfplumber (pure Python, no PDFium: a whole-page parse, 0.1-0.5 s). At most
  :data:`MAX_PAGES` pages and :data:`BUDGET_SECONDS` of parsing per document, a page with more
  than :data:`MAX_PAGE_PATHS` path objects (a drawing, a map) skipped, the run's checkpoint
  between pages; a page pdfplumber cannot read costs only its tables (a warning, and
  ``meta.pdf_tables_skipped`` on its document).
* **Which tables.** A grid of at least 2 x 2 whose cells tile it (every position covered by
  exactly one cell box: a partial grid or boxes in a drawing are not a table), with text in two
  rows and two columns, and short cells (a box of paragraphs is page layout, not a table).
* **Merged cells.** The grid's rows and columns are the distinct top and left edges of the cell
  boxes; a cell spanning several gets its text in each position it covers (a header spanning
  columns names each column, a row label spanning rows labels each row). An empty cell in a
  grid of single cells stays empty.
* **Header.** A top row that is one cell across the whole width is a title: it becomes a line
  above the table. A top row with a cell spanning some columns is a group header over the row
  below (and so on, up to :data:`MAX_HEADER_ROWS` rows): the band is merged into one header row,
  each column named by its texts top-down, a text repeated by a vertical span once ("Mac" over
  "Time" gives "Mac Time"). Otherwise the first row is the header.
* **Placement.** The table's words (letters and digits, each cell once, in reading order) are
  aligned with the page's words; the run that holds nearly all of them in order, and hardly
  any word that is not the table's (:func:`_run`), is replaced by the table. Otherwise the
  table goes after the page's text. A table kreuzberg already wrote as a pipe table is left as
  it is.
"""

from __future__ import annotations

import itertools
import logging
import re
import time
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path
from typing import TYPE_CHECKING, Any

from haystack import Document

from ingestion_service.run_control import checkpoint

if TYPE_CHECKING:
    from pdfplumber.table import Table as FoundTable

    from ingestion_service.documents.pdf_survey import PdfSurvey

logger = logging.getLogger(__name__)
# pdfminer warns about every odd font it meets (a missing FontBBox): noise for a table search.
logging.getLogger("pdfminer").setLevel(logging.ERROR)

# Per document: pages pdfplumber parses, and seconds it may spend on them (the rest keep
# kreuzberg's text; a warning says so).
MAX_PAGES = 100
BUDGET_SECONDS = 60.0
# A page with more path objects is a drawing or a map: pdfplumber's edge search on it is slow.
MAX_PAGE_PATHS = 5_000
# The text of a table's cells, averaged over those with text: above this the boxes hold paragraphs.
MAX_MEAN_CELL_WORDS = 40
MAX_HEADER_ROWS = 3
# Run matching: the run's words must be at least this share of the table's, in order ...
MIN_RUN_SHARE = 0.9
# ... with at most one page word in this many that is not the table's (removed with the run).
MAX_LOST_PER_WORDS = 50
# Page words not in the table that may sit between two matched ones of one run.
MAX_GAP_WORDS = 3
# A second run (the header written away from the body) is removed only with this many words.
MIN_SECOND_RUN_WORDS = 8
# Word-by-word alignment costs page words x table words; past this the table is only appended.
MAX_ALIGN_COST = 4_000_000
# Positions of two cell edges this close (points) are one (pdfplumber snaps edges within 3).
_EPSILON = 0.5

_WORD = re.compile(r"[^\W_]+")
# pdfminer writes a glyph it cannot map to Unicode as "(cid:N)".
_CID = re.compile(r"\(cid:\d+\)")
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Cn"})


@dataclass(frozen=True)
class Table:
    """One ruled table: its rows with merged cells resolved, ``rows[0]`` the header."""

    rows: tuple[tuple[str, ...], ...]
    # The words of each cell box once, in reading order: what kreuzberg's run holds.
    words: tuple[str, ...]
    title: str = ""

    @property
    def markdown(self) -> str:
        """A pipe table, with the title (if any) as a line above it."""
        width = len(self.rows[0])
        lines = [_row(self.rows[0]), "| " + " | ".join(["---"] * width) + " |"]
        lines.extend(_row(row) for row in self.rows[1:])
        table = "\n".join(lines)
        return f"{self.title}\n\n{table}" if self.title else table


@dataclass
class _Reading:
    """What pdfplumber gave for one document: tables by page, and pages whose tables were lost."""

    tables: dict[int, list[Table]] = field(default_factory=lambda: dict[int, list[Table]]())
    skipped: dict[int, str] = field(default_factory=lambda: dict[int, str]())


def with_pdf_tables(path: Path, documents: list[Document], survey: PdfSurvey, *, file_name: str) -> list[Document]:
    """``documents`` (one per page, ``meta.page`` 0-based) with the ruled tables pdfplumber finds
    on their text-layer pages put into their text; OCR'd pages are left as they are."""
    read = [document for document in documents if not document.meta.get("ocr")]
    if not read:
        return documents
    pages = [
        index
        for index, page in enumerate(survey.pages)
        if page.has_text and page.ruled and _owner(read, index) is not None
    ]
    if not pages:
        return documents
    reading = read_tables(path, pages, survey=survey, file_name=file_name)
    changed: dict[int, Document] = {}
    for index in pages:
        owner = _owner(read, index)
        if owner is None:
            continue
        current = changed.get(id(owner), owner)
        tables = reading.tables.get(index, [])
        content = place_tables(current.content or "", tables) if tables else current.content
        meta = current.meta
        if index in reading.skipped:
            skipped = [*meta.get("pdf_tables_skipped", []), f"page {index + 1}: {reading.skipped[index]}"]
            meta = {**meta, "pdf_tables_skipped": skipped}
        if content != current.content or meta is not current.meta:
            changed[id(owner)] = Document(content=content, meta=meta)
    return [changed.get(id(document), document) for document in documents]


def _owner(documents: Sequence[Document], page: int) -> Document | None:
    """The document holding ``page``'s text: the last one starting at or before it (a page the
    split could not cut out stays joined to the one before)."""
    owner = None
    for document in documents:
        if int(document.meta.get("page", 0)) <= page:
            owner = document
    return owner


def read_tables(path: Path, pages: Sequence[int], *, survey: PdfSurvey, file_name: str) -> _Reading:
    """The tables of ``pages`` (0-based), within the limits in the module doc."""
    import pdfplumber

    reading = _Reading()
    wanted = [number for number in pages if survey.pages[number].path_objects <= MAX_PAGE_PATHS]
    for number in sorted(set(pages) - set(wanted)):
        reading.skipped[number] = f"more than {MAX_PAGE_PATHS} path objects"
    if len(wanted) > MAX_PAGES:
        for number in wanted[MAX_PAGES:]:
            reading.skipped[number] = f"past the first {MAX_PAGES} pages with rules"
        wanted = wanted[:MAX_PAGES]
    if not wanted:
        return reading
    try:
        pdf = pdfplumber.open(path, pages=[number + 1 for number in wanted], raise_unicode_errors=False)
    except Exception as exc:  # a file kreuzberg read and pdfminer cannot costs only its tables
        return _unreadable(reading, wanted, exc, file_name)
    started = time.monotonic()
    parsed: set[int] = set()
    try:
        try:
            pages_read = pdf.pages
        except Exception as exc:  # a page tree pdfminer cannot walk: as above
            return _unreadable(reading, wanted, exc, file_name)
        for page in pages_read:
            number = page.page_number - 1
            parsed.add(number)
            checkpoint()
            if time.monotonic() - started > BUDGET_SECONDS:
                reading.skipped[number] = f"past {BUDGET_SECONDS:.0f} s of table parsing"
                continue
            try:
                tables = [table for table in (_table(found) for found in page.find_tables()) if table is not None]
            except Exception as exc:  # pdfminer raises what a damaged page gives it; it costs only the page's tables
                logger.warning(
                    "PDF tables of page %d skipped: %s: %s",
                    number + 1,
                    type(exc).__name__,
                    exc,
                    extra={"file_name": file_name, "page": number},
                )
                reading.skipped[number] = f"unreadable ({type(exc).__name__})"
                continue
            finally:
                page.close()
            if tables:
                reading.tables[number] = tables
    finally:
        pdf.close()
    for number in set(wanted) - parsed:
        reading.skipped[number] = "pdfplumber does not find the page"  # its page tree differs from PDFium's
    unlogged = {number: why for number, why in reading.skipped.items() if not why.startswith("unreadable")}
    if unlogged:
        logger.warning(
            "PDF tables skipped on %d pages: %s",
            len(unlogged),
            "; ".join(sorted(set(unlogged.values()))),
            extra={"file_name": file_name, "pages": sorted(unlogged)},
        )
    return reading


def _unreadable(reading: _Reading, pages: Sequence[int], exc: Exception, file_name: str) -> _Reading:
    logger.warning(
        "PDF tables skipped: pdfplumber cannot read the file: %s: %s",
        type(exc).__name__,
        exc,
        extra={"file_name": file_name},
    )
    for page in pages:
        reading.skipped[page] = f"unreadable ({type(exc).__name__})"
    return reading


def _table(found: FoundTable) -> Table | None:
    """A pdfplumber table as a :class:`Table`, or None when it is no table (module doc)."""
    boxes: list[tuple[float, float, float, float]] = []
    texts: list[str] = []
    chars = found.page.chars
    for row in found.rows:  # each box's text in reading order, as Table.extract() reads it
        row_chars = [char for char in chars if _inside(char, row.bbox)]
        for box in row.cells:
            if box is not None:
                boxes.append(box)
                texts.append(clean_cell(_cell_text([char for char in row_chars if _inside(char, box)])))
    return table_from_cells(boxes, texts)


def _inside(char: dict[str, Any], box: tuple[float, float, float, float]) -> bool:
    """Whether a character's middle lies in ``box`` (pdfplumber's own rule)."""
    middle_x, middle_y = (char["x0"] + char["x1"]) / 2, (char["top"] + char["bottom"]) / 2
    return bool(box[0] <= middle_x < box[2] and box[1] <= middle_y < box[3])


def _cell_text(chars: list[dict[str, Any]]) -> str:
    """A cell's text; text set sideways (a rotated column header) read in its own direction, where
    pdfplumber's default reads it top-down (so bottom-up text came out reversed)."""
    from pdfplumber.utils.text import extract_text, extract_words

    if not chars or sum(1 for char in chars if char["upright"]) * 2 >= len(chars):
        return str(extract_text(chars))
    upward = next(char for char in chars if not char["upright"])["matrix"][1] > 0
    words = extract_words(
        chars, char_dir_rotated="btt" if upward else "ttb", line_dir_rotated="ltr" if upward else "rtl"
    )
    # Lines are columns of characters: left to right for upward text, each read bottom-up.
    words.sort(key=lambda word: (round(word["x0"]), -word["bottom"]) if upward else (-round(word["x1"]), word["top"]))
    return " ".join(str(word["text"]) for word in words)


def clean_cell(text: str) -> str:
    """A cell's text on one line: unmapped glyphs, control and private-use characters dropped."""
    text = _CID.sub(" ", text)
    text = "".join(" " if unicodedata.category(char) in _DROPPED_CATEGORIES else char for char in text)
    return " ".join(text.split())


def table_from_cells(boxes: Sequence[tuple[float, float, float, float]], texts: Sequence[str]) -> Table | None:
    """The table of cell ``boxes`` (x0, top, x1, bottom) with their ``texts``, in reading order;
    None when the boxes do not tile a grid of 2 x 2 or more, or hold no table's text."""
    lefts = _distinct(box[0] for box in boxes)
    tops = _distinct(box[1] for box in boxes)
    if len(lefts) < 2 or len(tops) < 2:
        return None
    grid = _grid(boxes, lefts, tops)
    if grid is None:
        return None
    filled = {index for index, text in enumerate(texts) if text}
    text_rows = {row for row, cells in enumerate(grid) for cell in cells if cell in filled}
    text_columns = {column for cells in grid for column, cell in enumerate(cells) if cell in filled}
    if len(text_rows) < 2 or len(text_columns) < 2:
        return None
    if sum(len(texts[index].split()) for index in filled) > MAX_MEAN_CELL_WORDS * len(filled):
        return None
    resolved = [[texts[cell] for cell in row] for row in grid]
    title = ""
    if len(set(grid[0])) == 1 and len(grid) > 2:
        title, resolved, grid = resolved[0][0], resolved[1:], grid[1:]
    header_rows = 1
    while header_rows < MAX_HEADER_ROWS and header_rows < len(grid) - 1 and _spans_columns(grid[header_rows - 1]):
        header_rows += 1
    header = [_column_name(resolved[row][column] for row in range(header_rows)) for column in range(len(lefts))]
    words = tuple(word for text in texts for word in words_of(text))
    return Table(rows=tuple(map(tuple, [header, *resolved[header_rows:]])), words=words, title=title)


def _grid(
    boxes: Sequence[tuple[float, float, float, float]], lefts: Sequence[float], tops: Sequence[float]
) -> list[list[int]] | None:
    """Each grid position's box (its index), or None unless every position is covered by exactly one."""
    grid: list[list[int | None]] = [[None] * len(lefts) for _ in tops]
    for index, (x0, top, x1, bottom) in enumerate(boxes):
        rows = [at for at, edge in enumerate(tops) if top - _EPSILON <= edge < bottom - _EPSILON]
        columns = [at for at, edge in enumerate(lefts) if x0 - _EPSILON <= edge < x1 - _EPSILON]
        for row in rows:
            for column in columns:
                if grid[row][column] is not None:
                    return None  # overlapping boxes: a drawing
                grid[row][column] = index
    tiled = [[cell for cell in row if cell is not None] for row in grid]
    if any(len(row) != len(lefts) for row in tiled):
        return None  # a partial grid
    return tiled


def _distinct(values: Iterable[float]) -> list[float]:
    """Sorted positions, those within :data:`_EPSILON` of the one before merged into it."""
    merged: list[float] = []
    for value in sorted(values):
        if not merged or value - merged[-1] > _EPSILON:
            merged.append(value)
    return merged


def _spans_columns(row: Sequence[int]) -> bool:
    """Whether a cell of ``row`` covers more than one column (but not all of them)."""
    return any(a == b for a, b in itertools.pairwise(row)) and len(set(row)) > 1


def _column_name(parts: Iterable[str]) -> str:
    """A header band's texts for one column, top-down, each once."""
    names: list[str] = []
    for part in parts:
        if part and (not names or names[-1] != part):
            names.append(part)
    return " ".join(names)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def words_of(text: str) -> list[str]:
    """The words (runs of letters and digits), case-folded, as runs are matched."""
    return [word.casefold() for word in _WORD.findall(text)]


@dataclass(frozen=True)
class _Word:
    text: str
    start: int
    end: int


def place_tables(content: str, tables: Sequence[Table]) -> str:
    """``content`` with each of ``tables`` replacing its run of words, or after the text; a table
    already written as a pipe table is left out."""
    words = [_Word(match.group().casefold(), match.start(), match.end()) for match in _WORD.finditer(content)]
    written = _pipe_tables(content)
    claimed: set[int] = set()
    edits: list[tuple[int, int, str]] = []
    appended: list[str] = []
    for table in tables:
        if any(_coverage(table.words, block) >= MIN_RUN_SHARE for block in written):
            continue
        runs = _run(words, table.words, claimed)
        if runs is None:
            appended.append(table.markdown)
            continue
        (main_start, main_end), *others = runs
        for start, end in runs:
            claimed.update(range(start, end))
        start, end = _span(content, words[main_start].start, words[main_end - 1].end)
        edits.append((start, end, table.markdown))
        for start, end in others:
            start, end = _span(content, words[start].start, words[end - 1].end)
            edits.append((start, end, ""))
    for start, end, markdown in sorted(edits, reverse=True):
        before, after = content[:start].rstrip(), content[end:].lstrip()
        if markdown:
            content = "\n\n".join(part for part in (before, markdown, after) if part)
        else:
            joint = "\n\n" if start == 0 or content[start - 1] == "\n" or content[end : end + 1] in ("", "\n") else " "
            content = joint.join(part for part in (before, after) if part)
    if appended:
        content = "\n\n".join(part for part in (content.rstrip(), *appended) if part)
    return content


def _pipe_tables(content: str) -> list[list[str]]:
    """The words of each pipe table in ``content`` (consecutive lines starting with ``|``)."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in content.split("\n"):
        if line.lstrip().startswith("|"):
            if current is None:
                current = []
                blocks.append(current)
            current.extend(words_of(line))
        else:
            current = None
    return blocks


def _coverage(table: Sequence[str], words: Sequence[str]) -> float:
    """The share of ``table``'s words found in ``words`` in order."""
    if not table or len(table) * len(words) > MAX_ALIGN_COST:
        return 0.0
    matcher = SequenceMatcher(None, list(words), list(table), autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()) / len(table)


@dataclass
class _Run:
    """Page words ``[start, end)`` aligned with table words ``[first, last)``: ``matched`` of the
    table's words, ``lost`` page words in between that the table lacks."""

    start: int
    end: int
    first: int
    last: int
    matched: int
    lost: int = 0


def _run(words: Sequence[_Word], table: Sequence[str], claimed: set[int]) -> list[tuple[int, int]] | None:
    """The word ranges ``[start, end)`` of ``words`` that hold ``table``'s run, the main one first;
    None when the match is not convincing.

    The page's words are aligned with the table's (difflib); matched words less than
    :data:`MAX_GAP_WORDS` apart form a run. The longest run, plus any other run of at least
    :data:`MIN_SECOND_RUN_WORDS` words with nothing of the page's own inside it, must hold
    :data:`MIN_RUN_SHARE` of the table's words; the page words inside a run that the table
    lacks (removed with it) must stay below one in :data:`MAX_LOST_PER_WORDS`. Where the two
    spell one text differently ("750 1" and "7501": a footnote mark set apart; "JOBCTLQIBM" for
    two header cells run together) nothing is lost, and the main run takes in the page words
    next to it that spell the table's words before or after it.
    """
    if not table or len(words) * len(table) > MAX_ALIGN_COST:
        return None
    # A word an earlier table took can not be matched again.
    page = [word.text if at not in claimed else "\x00" for at, word in enumerate(words)]
    matcher = SequenceMatcher(None, page, list(table), autojunk=False)
    blocks = [block for block in matcher.get_matching_blocks() if block.size]
    if not blocks:
        return None
    runs = [_Run(blocks[0].a, blocks[0].a + blocks[0].size, blocks[0].b, blocks[0].b + blocks[0].size, blocks[0].size)]
    for block in blocks[1:]:
        run = runs[-1]
        gap = block.a - run.end
        if gap > MAX_GAP_WORDS:
            runs.append(_Run(block.a, block.a + block.size, block.b, block.b + block.size, block.size))
            continue
        if "".join(page[run.end : block.a]) == "".join(table[run.last : block.b]):
            run.matched += block.b - run.last
        else:
            run.lost += gap
        run.end, run.last, run.matched = block.a + block.size, block.b + block.size, run.matched + block.size
    main = max(runs, key=lambda run: run.matched)
    _extend(main, page, table)
    others = [
        run
        for run in runs
        if run is not main
        and run.matched >= MIN_SECOND_RUN_WORDS
        and run.lost == 0
        and (run.end <= main.start or run.start >= main.end)
    ]
    covered = main.matched + sum(run.matched for run in others)
    if covered < MIN_RUN_SHARE * len(table) or main.lost * MAX_LOST_PER_WORDS > len(table):
        return None
    return [(main.start, main.end), *((run.start, run.end) for run in others)]


def _extend(run: _Run, page: Sequence[str], table: Sequence[str]) -> None:
    """Widen ``run`` over the page words before and after it that spell, letter for letter, the
    table's words before and after its matched ones; count the table words they cover."""
    before = "".join(table[: run.first])
    spelled = ""
    while run.start > 0 and before.endswith(page[run.start - 1] + spelled):
        spelled = page[run.start - 1] + spelled
        run.start -= 1
    while run.first > 0 and len(table[run.first - 1]) <= len(spelled):
        spelled = spelled[: len(spelled) - len(table[run.first - 1])]
        run.first -= 1
        run.matched += 1
    after = "".join(table[run.last :])
    spelled = ""
    while run.end < len(page) and after.startswith(spelled + page[run.end]):
        spelled += page[run.end]
        run.end += 1
    while run.last < len(table) and len(table[run.last]) <= len(spelled):
        spelled = spelled[len(table[run.last]) :]
        run.last += 1
        run.matched += 1


def _span(content: str, start: int, end: int) -> tuple[int, int]:
    """``content[start:end]`` widened over the punctuation stuck to its ends, and to whole lines
    where what is left of a line holds no letter or digit (Markdown marks, a heading's ``#``)."""
    while start > 0 and not (content[start - 1].isspace() or content[start - 1].isalnum()):
        start -= 1
    while end < len(content) and not (content[end].isspace() or content[end].isalnum()):
        end += 1
    line_start = content.rfind("\n", 0, start) + 1
    if not _WORD.search(content[line_start:start]):
        start = line_start
    line_end = content.find("\n", end)
    line_end = len(content) if line_end < 0 else line_end
    if not _WORD.search(content[end:line_end]):
        end = line_end
    return start, end

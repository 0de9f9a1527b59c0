"""Where a chunk sits on its page: rectangles from a PDF's text layer (PDFium character boxes).

A chunk's text is Markdown the engine wrote (headings, pipes, escapes), so it is matched to the
page's own text by its words (letters and digits, case-folded), in order. The matched characters'
boxes are joined into one rectangle per line run. Boxes are fractions of the page as it is shown
(its crop box, turned by its /Rotate), origin top-left: ``(x0, y0, x1, y1)``. A page without a
text layer, or a chunk whose words are mostly not on it (OCR'd text, a rebuilt table), gets none.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ingestion_service.documents.pdfium_lock import PDFIUM_LOCK

if TYPE_CHECKING:
    import pypdfium2 as pdfium

Box = tuple[float, float, float, float]

# What ``meta.geometry`` says of a chunk: boxes from the text layer, or none to show.
TEXT_LAYER: Final = "text_layer"
NO_GEOMETRY: Final = "none"

_WORD = re.compile(r"[^\W_]+")
# Matched runs shorter than this (in words) are taken for chance: "the", "of the".
_MIN_RUN_WORDS: Final = 3
# Unmatched page words between two matched runs still inside the chunk (a hyphenated line end,
# a footnote mark, a ligature the engine spelled out).
_GAP_WORDS: Final = 4
# A chunk is placed only when this share of its words is found on the page.
_MIN_FOUND: Final = 0.5
_DIGITS: Final = 4


@dataclass(frozen=True)
class _Word:
    text: str
    start: int
    end: int


@dataclass
class _Page:
    text: str
    words: list[_Word]
    boxes: list[Box | None]


def words_of(text: str) -> list[str]:
    """``text``'s words as they are matched: runs of letters and digits, case-folded."""
    return [match.group().casefold() for match in _WORD.finditer(text)]


class PdfTextLayer:
    """One PDF's pages, read once each, answering where a text sits on a page."""

    def __init__(self, document: pdfium.PdfDocument) -> None:
        self._document = document
        self._pages: dict[int, _Page | None] = {}

    def regions(self, page: int, text: str) -> list[Box]:
        """The line rectangles of ``text`` on ``page`` (0-based), or [] when it is not found there."""
        read = self._page(page)
        wanted = words_of(text)
        if read is None or not wanted:
            return []
        chosen = _matched_words(read.words, wanted)
        if not chosen:
            return []
        return _line_boxes(read, chosen)

    def _page(self, number: int) -> _Page | None:
        if number not in self._pages:
            self._pages[number] = self._read(number)
        return self._pages[number]

    def _read(self, number: int) -> _Page | None:
        import pypdfium2 as pdfium

        with PDFIUM_LOCK:
            if not 0 <= number < len(self._document):
                return None
            try:
                page = self._document[number]
            except pdfium.PdfiumError:
                return None
            try:
                textpage = page.get_textpage()
                try:
                    count = textpage.count_chars()
                    if count <= 0:
                        return None
                    text = textpage.get_text_range(0, count)
                    if len(text) != count:
                        return None  # no 1:1 index between text and boxes to rely on
                    left, bottom, right, top = page.get_cropbox()
                    rotation = page.get_rotation()
                    width, height = right - left, top - bottom
                    if width <= 0 or height <= 0:
                        return None
                    boxes: list[Box | None] = []
                    for index in range(count):
                        x0, y0, x1, y1 = textpage.get_charbox(index, loose=True)
                        if x1 <= x0 or y1 <= y0:
                            boxes.append(None)
                            continue
                        unrotated = ((x0 - left) / width, (top - y1) / height, (x1 - left) / width, (top - y0) / height)
                        boxes.append(_turned(unrotated, rotation))
                finally:
                    textpage.close()
            finally:
                page.close()
        words = [_Word(match.group().casefold(), match.start(), match.end()) for match in _WORD.finditer(text)]
        return _Page(text, words, boxes)


@contextmanager
def pdf_text_layer(path: Path) -> Iterator[PdfTextLayer | None]:
    """The text layer of the PDF at ``path``, or None when PDFium cannot open it."""
    import pypdfium2 as pdfium

    with PDFIUM_LOCK:
        try:
            document = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError:
            document = None
    if document is None:
        yield None
        return
    try:
        yield PdfTextLayer(document)
    finally:
        with PDFIUM_LOCK:
            document.close()


def _turned(box: Box, rotation: int) -> Box:
    """``box`` on the unrotated page, as it lies on the page shown turned clockwise by ``rotation``."""
    x0, y0, x1, y1 = box
    if rotation == 90:
        return (1 - y1, x0, 1 - y0, x1)
    if rotation == 180:
        return (1 - x1, 1 - y1, 1 - x0, 1 - y0)
    if rotation == 270:
        return (y0, 1 - x1, y1, 1 - x0)
    return box


def _matched_words(page: Sequence[_Word], wanted: Sequence[str]) -> list[int]:
    """Indexes of the page words that are the chunk's, in page order (empty when too few match)."""
    matcher = difflib.SequenceMatcher(None, [word.text for word in page], list(wanted), autojunk=False)
    shortest = min(_MIN_RUN_WORDS, len(wanted))
    runs = [block for block in matcher.get_matching_blocks() if block.size >= shortest]
    found = sum(block.size for block in runs)
    if found < _MIN_FOUND * len(wanted):
        return []
    chosen: list[int] = []
    for block in runs:
        start = block.a
        if chosen and 0 < start - chosen[-1] - 1 <= _GAP_WORDS:
            chosen.extend(range(chosen[-1] + 1, start))
        chosen.extend(range(start, start + block.size))
    return chosen


def _line_boxes(page: _Page, chosen: Sequence[int]) -> list[Box]:
    """One rectangle per run of the chosen words' characters on one line, in reading order."""
    indexes: list[int] = []
    previous: _Word | None = None
    for position in chosen:
        word = page.words[position]
        if previous is not None and "\n" not in page.text[previous.end : word.start]:
            indexes.extend(range(previous.end, word.start))  # the space between words on one line
        indexes.extend(range(word.start, word.end))
        previous = word
    lines: list[list[float]] = []
    for index in indexes:
        box = page.boxes[index]
        if box is None:
            continue
        x0, y0, x1, y1 = box
        if lines:
            line = lines[-1]
            middle = (y0 + y1) / 2
            same_line = line[1] <= middle <= line[3] and x0 >= line[0] - (line[3] - line[1])
            if same_line and x0 - line[2] <= 3 * (line[3] - line[1]):
                line[0], line[1], line[2], line[3] = (
                    min(line[0], x0),
                    min(line[1], y0),
                    max(line[2], x1),
                    max(line[3], y1),
                )
                continue
        lines.append([x0, y0, x1, y1])
    return [_clamped(line) for line in lines]


def _clamped(line: Sequence[float]) -> Box:
    x0, y0, x1, y1 = (round(min(max(value, 0.0), 1.0), _DIGITS) for value in line)
    return (x0, y0, x1, y1)

"""Where a chunk sits on its page: rectangles from a PDF's text layer (PDFium character boxes) or
from the OCR engine's word boxes (scans and images).

A chunk's text is Markdown the engine wrote (headings, pipes, escapes), so it is matched to the
page's own text by its words (letters and digits, case-folded). One mechanism serves both sources:
a page is its text with a box per character (an OCR'd word's box for each of its letters), and
the matched characters' boxes are joined into one rectangle per line run. Boxes are fractions of
the page as it is shown (its crop box, turned by its /Rotate), origin top-left:
``(x0, y0, x1, y1)``. A page without a text layer, or a chunk whose words are mostly not on it (a
rebuilt table, text carried over from another page), gets none.

The match is made in order first. Text the engine wrote in another order than the page holds it
(columns read the other way, a turned page, right-to-left script) is then looked for anywhere on
the page among the words not yet taken. Chunks are placed in reading order, so a paragraph the
page holds twice goes to the copy after the previous chunk's start.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ingestion_service.documents.pdfium_lock import PDFIUM_LOCK
from shared_contract.citations import RENDERED_GEOMETRY

if TYPE_CHECKING:
    import pypdfium2 as pdfium

Box = tuple[float, float, float, float]

# What ``meta.geometry`` says of a chunk: boxes from the text layer, from the OCR engine's word
# boxes, from the text layer of an office document's PDF rendering (its pages), or none to show.
TEXT_LAYER: Final = "text_layer"
OCR: Final = "ocr"
RENDERING: Final = RENDERED_GEOMETRY
NO_GEOMETRY: Final = "none"

# A word: letters and digits, across a hyphen PDFium marks as a line-end break (\x02, or \ufffe in
# some files) or a soft hyphen, which the engines drop when they join the word.
_WORD = re.compile(r"[^\W_]+(?:[\x02\xad\ufffe]+[^\W_]+)*")
_JOINERS = re.compile(r"[\x02\xad\ufffe]")
_LINE_ENDS = re.compile(r"[ \t]+\n")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# Matched runs shorter than this (in words) are taken for chance: "the", "of the".
_MIN_RUN_WORDS: Final = 3
# Unmatched page words between two matched runs still inside the chunk (a hyphenated line end,
# a footnote mark, a ligature the engine spelled out).
_GAP_WORDS: Final = 4
# A chunk is placed only when this share of its words is found on the page.
_MIN_FOUND: Final = 0.5
# Alignments per chunk: the in-order one, then passes over what it left (text out of page order).
_PASSES: Final = 3
# Of the copies of a text the page holds, those with this share of the best one's words are as good.
_NEAR_COPY_SHARE: Final = 0.9
# Candidate places of a chunk on its page are found by its 3-grams: at most this many are weighed,
# a 3-gram found in more places than this is not counted, and votes this many words apart (or a
# fifth of the chunk) are one place.
_GRAM: Final = 3
_MAX_CANDIDATES: Final = 4
_MAX_GRAM_PLACES: Final = 50
_MIN_SPREAD: Final = 10
_DIGITS: Final = 4


# A chunk of a rendering is looked for on the page the one before it was found on and this many after.
_LOCATE_AHEAD: Final = 3


@dataclass(frozen=True)
class _Word:
    text: str
    start: int
    end: int


@dataclass(frozen=True, repr=False)
class PageWords:
    """An OCR'd page's words in the engine's reading order, each with its box (fractions of the
    page as it is shown, origin top-left). Immutable, so the chunks of a page share one."""

    words: tuple[tuple[str, Box], ...]

    def __deepcopy__(self, memo: dict[int, object]) -> PageWords:
        # Haystack deep-copies every component's inputs; nothing here can change.
        return self

    def __repr__(self) -> str:
        # Haystack hashes a Document's repr'd meta into its id; the words need not be in it.
        return f"PageWords({len(self.words)} words)"


class PageLayout:
    """One page's text with a box per character, answering where a chunk's text sits on it.

    Asked in reading order (one layout per page of a document): a text the page holds twice is
    placed on the copy that follows the previous chunk's start.
    """

    def __init__(self, text: str, boxes: Sequence[Box | None]) -> None:
        self._text = text
        self._boxes = boxes
        self._words = [_Word(_key(match.group()), match.start(), match.end()) for match in _WORD.finditer(text)]
        self._cursor = 0
        self._views: list[_View] | None = None
        self._turned: _View | None = None

    @classmethod
    def from_words(cls, page: PageWords) -> PageLayout:
        """An OCR'd page: its words joined by spaces, each letter boxed by its word's box."""
        parts: list[str] = []
        boxes: list[Box | None] = []
        previous: Box | None = None
        for text, box in page.words:
            if previous is not None:
                # A word below the last one's line, or back to its left, starts a line.
                middle = (box[1] + box[3]) / 2
                parts.append(" " if previous[1] <= middle <= previous[3] and box[0] >= previous[0] else "\n")
                boxes.append(None)
            parts.append(text)
            boxes.extend([box] * len(text))
            previous = box
        return cls("".join(parts), boxes)

    @property
    def text(self) -> str:
        """The page's text as PDFium reads it (reading order), one line per line of the page."""
        lines = _JOINERS.sub("", self._text).replace("\r\n", "\n").replace("\r", "\n")
        return _CONTROLS.sub("", _LINE_ENDS.sub("\n", lines)).strip()

    @property
    def words(self) -> list[str]:
        """The page's words in the order its text holds them, as they are matched (see words_of)."""
        return [word.text for word in self._words]

    def regions(self, text: str) -> list[Box]:
        """The line rectangles of ``text`` on this page, or [] when it is not found here."""
        wanted = words_of(text)
        if not wanted or not self._words:
            return []
        views = self._page_views()
        if _is_rtl(wanted):
            views = [*views, self._turned_lines()]
        chosen = _matched_words(views, wanted, self._cursor)
        if not chosen:
            return []
        self._cursor = chosen[0] + 1
        return self._line_boxes(chosen)

    def _page_views(self) -> list[_View]:
        if self._views is None:
            self._views = [_View([word.text for word in self._words], list(range(len(self._words))))]
        return self._views

    def _turned_lines(self) -> _View:
        """The page with the words of each line in the other order (built once, for right-to-left text)."""
        if self._turned is None:
            order: list[int] = []
            line: list[int] = []
            for index, word in enumerate(self._words):
                if line and "\n" in self._text[self._words[line[-1]].end : word.start]:
                    order.extend(reversed(line))
                    line = []
                line.append(index)
            order.extend(reversed(line))
            self._turned = _View([self._words[index].text for index in order], order)
        return self._turned

    def _line_boxes(self, chosen: Sequence[int]) -> list[Box]:
        """One rectangle per run of the chosen words' characters on one line, in page order."""
        indexes: list[int] = []
        previous: _Word | None = None
        for position in chosen:
            word = self._words[position]
            if previous is not None and "\n" not in self._text[previous.end : word.start]:
                indexes.extend(range(previous.end, word.start))  # the space between words on one line
            indexes.extend(range(word.start, word.end))
            previous = word
        lines: list[list[float]] = []
        for index in indexes:
            box = self._boxes[index]
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


def words_of(text: str) -> list[str]:
    """``text``'s words as they are matched: runs of letters and digits, case-folded."""
    return [_key(match.group()) for match in _WORD.finditer(text)]


def _key(word: str) -> str:
    return _JOINERS.sub("", word).casefold()


class PdfTextLayer:
    """One PDF's pages, read once each, answering where a text sits on a page."""

    def __init__(self, document: pdfium.PdfDocument) -> None:
        self._document = document
        self._pages: dict[int, PageLayout | None] = {}

    def regions(self, page: int, text: str) -> list[Box]:
        """The line rectangles of ``text`` on ``page`` (0-based), or [] when it is not found there."""
        layout = self._page(page)
        return [] if layout is None else layout.regions(text)

    def page(self, number: int) -> PageLayout | None:
        """Page ``number`` (0-based), or None when it has no text layer."""
        return self._page(number)

    def locate(self, text: str, *, near: int) -> tuple[int, list[Box]] | None:
        """The page ``text`` is found on, looking from page ``near`` a few pages on and one back (a
        document's chunks come in reading order), with its line rectangles; None when not found there."""
        with PDFIUM_LOCK:
            count = len(self._document)
        for number in (*range(near, near + _LOCATE_AHEAD + 1), near - 1):
            if 0 <= number < count and (boxes := self.regions(number, text)):
                return number, boxes
        return None

    def _page(self, number: int) -> PageLayout | None:
        if number not in self._pages:
            self._pages[number] = self._read(number)
        return self._pages[number]

    def _read(self, number: int) -> PageLayout | None:
        import pypdfium2 as pdfium
        import pypdfium2.raw as pdfium_c

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
                    left, bottom, right, top = page.get_cropbox()
                    rotation = page.get_rotation()
                    width, height = right - left, top - bottom
                    if width <= 0 or height <= 0:
                        return None
                    # Char by char: the text of a range leaves out control characters, and its
                    # indexes would no longer be those of the boxes.
                    text = "".join(chr(pdfium_c.FPDFText_GetUnicode(textpage.raw, index)) for index in range(count))
                    boxes: list[Box | None] = []
                    for index in range(count):
                        x0, y0, x1, y1 = textpage.get_charbox(index, loose=True)
                        if x1 <= x0 or y1 <= y0:
                            boxes.append(None)
                            continue
                        unrotated = ((x0 - left) / width, (top - y1) / height, (x1 - left) / width, (top - y0) / height)
                        boxes.append(turned(unrotated, rotation))
                finally:
                    textpage.close()
            finally:
                page.close()
        return PageLayout(text, boxes)


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


def turned(box: Box, rotation: int) -> Box:
    """``box`` on the unrotated page, as it lies on the page shown turned clockwise by ``rotation``."""
    x0, y0, x1, y1 = box
    if rotation == 90:
        return (1 - y1, x0, 1 - y0, x1)
    if rotation == 180:
        return (1 - x1, 1 - y1, 1 - x0, 1 - y0)
    if rotation == 270:
        return (y0, 1 - x1, y1, 1 - x0)
    return box


@dataclass
class _View:
    """The page's words in one order (as the page holds them, or each line turned for right-to-left
    text an engine wrote in visual order), each with its index on the page, and its 3-grams."""

    keys: list[str]
    pages: list[int]
    grams: dict[tuple[str, ...], list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for position in range(len(self.keys) - _GRAM + 1):
            self.grams.setdefault(tuple(self.keys[position : position + _GRAM]), []).append(position)


@dataclass
class _Match:
    """What one alignment pass placed: page word indexes and the chunk word indexes they match."""

    pages: list[int]
    chunk: list[int]


def _is_rtl(words: Sequence[str]) -> bool:
    return any(unicodedata.bidirectional(char) in ("R", "AL") for word in words for char in word)


def _candidates(view: _View, wanted: Sequence[str], matched: set[int], taken: set[int]) -> list[tuple[int, int]]:
    """Windows of ``view`` (start, end) where the chunk's unmatched words may sit, best supported first.

    Each 3-gram the chunk shares with the page votes for where the chunk would start there (page
    position minus chunk position); votes close together are one copy of the text.
    """
    size = len(wanted)
    if size < _GRAM:
        return [(0, len(view.keys))]
    votes: list[tuple[int, int]] = []
    for at in range(size - _GRAM + 1):
        if any(at + step in matched for step in range(_GRAM)):
            continue
        places = view.grams.get(tuple(wanted[at : at + _GRAM]), [])
        if len(places) > _MAX_GRAM_PLACES:
            continue  # a phrase the page is full of says nothing about where the chunk is
        for place in places:
            if not any(view.pages[place + step] in taken for step in range(_GRAM)):
                votes.append((place - at, at))
    if not votes:
        return []
    votes.sort()
    spread = max(_MIN_SPREAD, size // 5)
    groups: list[list[tuple[int, int]]] = [[votes[0]]]
    for vote in votes[1:]:
        if vote[0] - groups[-1][-1][0] <= spread:
            groups[-1].append(vote)
        else:
            groups.append([vote])
    groups.sort(key=lambda group: len({at for _, at in group}), reverse=True)
    return [
        (max(0, group[0][0] - spread), min(len(view.keys), group[-1][0] + size + spread))
        for group in groups[:_MAX_CANDIDATES]
    ]


def _aligned(
    view: _View, window: tuple[int, int], wanted: Sequence[str], matched: set[int], taken: set[int], shortest: int
) -> _Match:
    """The in-order alignment of the chunk's unmatched words with the free page words of ``window``.

    Sentinels that never match stand in for what is already placed, so indexes stay those of the
    page and of the chunk.
    """
    start, end = window
    page = ["\x00" if view.pages[position] in taken else view.keys[position] for position in range(start, end)]
    chunk = ["\x01" if position in matched else word for position, word in enumerate(wanted)]
    matcher = difflib.SequenceMatcher(None, page, chunk, autojunk=False)
    found = _Match([], [])
    for block in matcher.get_matching_blocks():
        if block.size >= shortest:
            found.pages.extend(view.pages[start + block.a + step] for step in range(block.size))
            found.chunk.extend(range(block.b, block.b + block.size))
    return found


def _matched_words(views: Sequence[_View], wanted: Sequence[str], cursor: int) -> list[int]:
    """Indexes of the page words that are the chunk's, in page order (empty when too few match).

    Up to _PASSES alignments, each on what the earlier ones left. Each pass weighs the copies the
    page may hold of the chunk's text and takes, of those that hold about the most of it, the one
    after ``cursor`` (where the previous chunk on this page starts, +1) on the first pass, and the
    one nearest to what is placed already on the later ones.
    """
    shortest = min(_MIN_RUN_WORDS, len(wanted))
    matched: set[int] = set()
    taken: set[int] = set()
    for _ in range(_PASSES):
        found = [
            _aligned(view, window, wanted, matched, taken, shortest)
            for view in views
            for window in _candidates(view, wanted, matched, taken)
        ]
        found = [match for match in found if match.pages]
        if not found:
            break
        most = max(len(match.pages) for match in found)
        near = [match for match in found if len(match.pages) >= _NEAR_COPY_SHARE * most]
        if taken:
            low, high = min(taken), max(taken)
            best = min(near, key=lambda match: max(low - max(match.pages), min(match.pages) - high, 0))
        else:
            after = [match for match in near if min(match.pages) >= cursor]
            best = min(after, key=lambda match: min(match.pages)) if after else max(near, key=lambda m: len(m.pages))
        taken.update(best.pages)
        matched.update(best.chunk)
        if len(matched) == len(wanted):
            break
    if len(matched) < _MIN_FOUND * len(wanted):
        return []
    chosen: list[int] = []
    for position in sorted(taken):
        if chosen and 0 < position - chosen[-1] - 1 <= _GAP_WORDS:
            chosen.extend(range(chosen[-1] + 1, position))
        chosen.append(position)
    return chosen


def _clamped(line: Sequence[float]) -> Box:
    x0, y0, x1, y1 = (round(min(max(value, 0.0), 1.0), _DIGITS) for value in line)
    return (x0, y0, x1, y1)

"""Cut kreuzberg's Markdown into pages, so each chunk can cite the page it comes from.

kreuzberg inserts page markers into its Markdown for slides and OCR'd pages but not for PDFs
with a text layer; for those it gives each page's plain text, and the Markdown is cut where the
next page's text begins. Pages are 0-based (Open WebUI shows ``page + 1``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Letters and digits only: kreuzberg's Markdown output escapes punctuation in what it inserts.
PAGE_MARKER_FORMAT = "\n\nRAGPAGEMARK{page_num}X\n\n"
_MARKER_WORD = "RAGPAGEMARK"
_MARKER = re.compile(r"\s*RAGPAGEMARK(\d+)X\s*")
# Characters of a page's start looked for in the Markdown; long enough to be unique on a page.
_ANCHOR_CHARS = 24
# The page's first lines tried as anchors, in order, when its start is not in the Markdown.
_ANCHOR_LINES = 6
# A page start found in several places: at most this many weighed, by up to this many of the
# page's first characters that follow each.
_MAX_PLACES = 64
_HEAD_CHARS = 2_000


@dataclass(frozen=True)
class Page:
    """Markdown of one page; ``number`` is 0-based."""

    number: int
    markdown: str


def split_markers(markdown: str) -> list[Page] | None:
    """Pages from inserted markers, or None when there are none."""
    if _MARKER_WORD not in markdown:
        return None  # the pattern, tried at every white space, is slow on tens of MB
    parts = _MARKER.split(markdown)
    if len(parts) < 3:
        return None
    pages: list[Page] = []
    if parts[0].strip():
        pages.append(Page(0, parts[0].strip()))
    for index in range(1, len(parts), 2):
        number = max(int(parts[index]) - 1, 0)
        text = parts[index + 1].strip()
        if not text:
            continue
        if pages and pages[-1].number == number:
            pages[-1] = Page(number, f"{pages[-1].markdown}\n\n{text}")
        else:
            pages.append(Page(number, text))
    return pages


def strip_markers(markdown: str) -> str:
    """The Markdown without page markers."""
    if _MARKER_WORD not in markdown:
        return markdown.strip()
    return _MARKER.sub("\n\n", markdown).strip()


def alnum_key(text: str) -> str:
    """``text``'s letters and digits, case-folded: what two renderings of one text share, whatever
    their markup, escapes, quotes or control characters."""
    return _alnum_index(text)[0]


def _alnum_index(text: str) -> tuple[str, list[int]]:
    """Case-folded letters and digits of ``text`` plus each one's index in ``text``."""
    chars: list[str] = []
    positions: list[int] = []
    for index, char in enumerate(text):
        if char.isalnum():
            folded = char.casefold()
            chars.append(folded)
            positions.extend([index] * len(folded))
    return "".join(chars), positions


def _anchors(page_text: str) -> list[str]:
    """What marks a page's start in the Markdown: its text's first characters, then the start of
    each of its first lines in turn (the Markdown may leave out a first line that kreuzberg took
    for a running header or a caption it placed elsewhere)."""
    starts = [page_text, *page_text.splitlines()[1:_ANCHOR_LINES]]
    anchors = [alnum_key(start)[:_ANCHOR_CHARS] for start in starts]
    return [anchor for anchor in anchors if len(anchor) >= _ANCHOR_CHARS // 2]


def split_by_page_text(markdown: str, page_texts: Sequence[str]) -> list[Page]:
    """Cut ``markdown`` at the line where each page's own text starts.

    A page's start may recur in the Markdown (a paragraph the document repeats): of its places,
    the one followed by most of the page's text wins, then the one nearest to where the page
    should start (the previous page's start plus its length). A page whose start is not found
    (its text was rearranged, or it is empty) stays joined to the page before it, so no text is
    lost or reordered.
    """
    if len(page_texts) <= 1:
        return [Page(0, markdown.strip())] if markdown.strip() else []
    folded, positions = _alnum_index(markdown)
    cuts: list[tuple[int, int]] = [(0, 0)]
    search_from = 0
    expected = len(alnum_key(page_texts[0]))
    for number, text in enumerate(page_texts[1:], start=1):
        page_key = alnum_key(text)
        for anchor in _anchors(text):
            found = _page_start(folded, anchor, page_key, search_from, expected)
            if found is None:
                continue
            line_start = markdown.rfind("\n", 0, positions[found]) + 1
            if line_start <= cuts[-1][1]:
                continue
            cuts.append((number, line_start))
            search_from = found + len(anchor)
            expected = found
            break
        expected += len(page_key)
    pages: list[Page] = []
    for (number, start), (_, end) in zip(cuts, [*cuts[1:], (0, len(markdown))], strict=True):
        text = markdown[start:end].strip()
        if text:
            pages.append(Page(number, text))
    return pages


def _page_start(folded: str, anchor: str, page_key: str, search_from: int, expected: int) -> int | None:
    """Where in ``folded`` (the Markdown's letters and digits) the page whose own are ``page_key``
    starts, by its ``anchor``: None when the anchor is not there after ``search_from``."""
    places: list[int] = []
    at = folded.find(anchor, search_from)
    while at >= 0 and len(places) < _MAX_PLACES:
        places.append(at)
        at = folded.find(anchor, at + 1)
    if len(places) <= 1:
        return places[0] if places else None
    offset = page_key.find(anchor)
    head = page_key[max(offset, 0) : max(offset, 0) + _HEAD_CHARS]
    return max(places, key=lambda place: (_shared_prefix(folded, place, head), -abs(place - expected)))


def _shared_prefix(folded: str, at: int, head: str) -> int:
    """How many of ``head``'s characters ``folded`` holds from ``at`` on, as they come."""
    length = 0
    for expected_char, char in zip(head, folded[at : at + len(head)], strict=False):
        if expected_char != char:
            break
        length += 1
    return length

"""Pure chunking functions: token packing and Markdown sectioning.

Sizes are tokens of the embedding model's tokenizer, so CHUNK_SIZE means what the model sees.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ingestion_service.tokens import TokenCounter

HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _word_boundary(text: str, offsets: list[tuple[int, int]], index: int) -> bool:
    """True when token ``index`` starts a new word (whitespace before it)."""
    if index <= 0 or index >= len(offsets):
        return True
    return offsets[index][0] > offsets[index - 1][1] and text[offsets[index - 1][1] : offsets[index][0]].isspace()


def pack_tokens(text: str, counter: TokenCounter, budget: int, overlap: int) -> list[str]:
    """Split ``text`` into pieces of at most ``budget`` tokens, ``overlap`` tokens shared.

    Cuts fall on word boundaries when one lies in the second half of the window; otherwise
    the cut is mid-word rather than over budget.
    """
    stripped = text.strip()
    if not stripped:
        return []
    offsets = counter.offsets(stripped)
    if len(offsets) <= budget:
        return [stripped]
    overlap = min(overlap, budget // 2)
    pieces: list[str] = []
    start = 0
    total = len(offsets)
    while start < total:
        end = min(start + budget, total)
        if end < total:
            cut = end
            floor = start + budget // 2
            while cut > floor and not _word_boundary(stripped, offsets, cut):
                cut -= 1
            if cut > floor:
                end = cut
        piece = stripped[offsets[start][0] : offsets[end - 1][1]].strip()
        if piece:
            pieces.append(piece)
        if end >= total:
            break
        next_start = max(end - overlap, start + 1)
        while next_start < end and not _word_boundary(stripped, offsets, next_start):
            next_start += 1
        start = next_start
    return pieces


@dataclass
class Section:
    """A run of Markdown under one heading path."""

    headers: list[str]
    lines: list[str] = field(default_factory=lambda: list[str]())

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip()


def markdown_sections(
    text: str, stack: list[tuple[int, str]] | None = None
) -> tuple[list[Section], list[tuple[int, str]]]:
    """Split Markdown at ATX headings (not inside fenced code).

    ``stack`` is the heading path (level, title) in force when ``text`` starts, so a document
    delivered page by page keeps its breadcrumb across pages. Returns the sections and the
    path in force at the end. Heading lines stay in their section's text.
    """
    path: list[tuple[int, str]] = list(stack or [])
    sections: list[Section] = [Section(headers=[title for _, title in path])]
    fence: str | None = None
    for line in text.splitlines():
        fence_match = _FENCE.match(line)
        if fence_match:
            run = fence_match.group(1)
            if fence is None:
                fence = run
            elif run[0] == fence[0] and len(run) >= len(fence) and not line.strip().strip(run[0]):
                # CommonMark: a closing fence is at least as long as the opening and carries no info string.
                fence = None
        heading = None if fence is not None else HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            title = heading.group(2).strip()
            path = [(lvl, name) for lvl, name in path if lvl < level]
            path.append((level, title))
            sections.append(Section(headers=[name for _, name in path], lines=[line]))
        else:
            sections[-1].lines.append(line)
    return [section for section in sections if section.text], path


def _common_prefix(first: list[str], second: list[str]) -> list[str]:
    prefix: list[str] = []
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        prefix.append(a)
    return prefix


@dataclass(frozen=True)
class SectionChunk:
    """Text plus the heading path it belongs to."""

    text: str
    headers: list[str]


def merge_small_sections(
    sections: list[Section],
    counter: TokenCounter,
    *,
    min_tokens: int,
    budget_for: Callable[[list[str]], int],
) -> list[SectionChunk]:
    """Merge each section under ``min_tokens`` into the next one (the last into the one before), so
    no section is only a heading or a line.

    When the merged text fits the budget of the parts' common heading path, it carries that path
    (its own heading lines are in the text); when it does not, the small part leads the larger
    section, which keeps its own path. ``budget_for(headers) -> int`` gives the content budget of a
    heading path.
    """
    merged: list[SectionChunk] = []
    pending: SectionChunk | None = None
    for section in sections:
        current = SectionChunk(section.text, list(section.headers))
        if pending is not None:
            current = _joined(pending, current, counter, budget_for, small_first=True)
        if min_tokens > 0 and counter.count(current.text) < min_tokens:
            pending = current
        else:
            merged.append(current)
            pending = None
    if pending is not None:
        if merged and min_tokens > 0:
            merged[-1] = _joined(merged[-1], pending, counter, budget_for, small_first=False)
        else:
            merged.append(pending)
    return merged


def _joined(
    first: SectionChunk,
    second: SectionChunk,
    counter: TokenCounter,
    budget_for: Callable[[list[str]], int],
    *,
    small_first: bool,
) -> SectionChunk:
    combined = f"{first.text}\n\n{second.text}"
    common = _common_prefix(first.headers, second.headers)
    if counter.count(combined) <= budget_for(common):
        return SectionChunk(combined, common)
    return SectionChunk(combined, second.headers if small_first else first.headers)

"""A document's text rebuilt from its chunks (the agent's read_document, ingestion's /text).

The splitters cut one text into windows that share CHUNK_OVERLAP tokens, and no chunk records how
much it shares, so the overlap is found in the text: the longest suffix of a chunk that is also a
prefix of the next one (word-aligned windows of the same text, so the shared part is
character-identical). Chunks that share nothing (a new Markdown section, a new page) are joined
by a blank line.
"""

from __future__ import annotations

from collections.abc import Sequence

# A shared run shorter than this is a coincidence ("the "), not a window overlap.
MIN_OVERLAP_CHARS = 20


def overlap_length(previous: str, following: str) -> int:
    """Length of the longest suffix of ``previous`` that is a prefix of ``following`` (KMP, linear time)."""
    window = previous[-len(following) :] if following else ""
    if not window:
        return 0
    pattern = following
    failure = [0] * len(pattern)
    matched = 0
    for index in range(1, len(pattern)):
        while matched and pattern[index] != pattern[matched]:
            matched = failure[matched - 1]
        if pattern[index] == pattern[matched]:
            matched += 1
        failure[index] = matched
    matched = 0
    last = len(window) - 1
    for index, char in enumerate(window):
        if matched == len(pattern):
            # ``following`` sat wholly inside the tail: keep scanning for a match that ends the text.
            matched = failure[matched - 1]
        while matched and char != pattern[matched]:
            matched = failure[matched - 1]
        if char == pattern[matched]:
            matched += 1
        if index == last:
            break
    return matched


def stitch(chunks: Sequence[str]) -> str:
    """The chunks as one text, in the given order, each window overlap kept once."""
    text = ""
    previous = ""
    for chunk in chunks:
        if not text:
            text = chunk
        else:
            shared = overlap_length(previous, chunk)
            text += chunk[shared:] if shared >= MIN_OVERLAP_CHARS else "\n\n" + chunk
        previous = chunk
    return text

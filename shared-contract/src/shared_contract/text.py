"""A document's text rebuilt from its chunks (the agent's read_document, ingestion's /text).

The splitters cut each extracted document (one page, or the whole file) into windows that share
up to CHUNK_OVERLAP tokens (or units), and the Markdown splitter cuts each section of it
separately; no chunk records how much it shares, so the overlap is found in the text: the longest
suffix of a chunk that is also a prefix of the next one (word-aligned windows of the same text, so
the shared part is character-identical). What the chunking guarantees bounds that search:

* a window starts after the previous one starts and ends after it ends (``pack_tokens`` moves on
  by at least one token and always takes a token past the previous end; Haystack's
  DocumentSplitter steps by CHUNK_SIZE - CHUNK_OVERLAP >= 1 units and skips a window that adds
  nothing), so an overlap is shorter than both chunks. A chunk equal to the one before it (pages
  that read the same), or one that begins with the whole of it, repeats content: it is kept whole;
* windows never cross an extracted document or a section, and every chunk of one carries its
  ``page`` and heading path (``headers``), so chunks of different origins (``chunk_origin``)
  share nothing, whatever their text (a running footer that opens the next page is kept).

Chunks that share nothing are joined by a blank line. Where the chunk finalizer re-packs an
over-long chunk, one of its pieces may by chance start or end exactly where the neighbouring
chunk does; that whole-chunk overlap is then written twice, never lost.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from shared_contract.schema import MetaKey

# A shared run shorter than this is a coincidence ("the "), not a window overlap.
MIN_OVERLAP_CHARS = 20


def chunk_origin(meta: Mapping[str, object]) -> Hashable:
    """What a chunk was cut from, as its metadata says: its page and its heading path.

    Two chunks with different origins never share a window overlap. Data without the keys gives
    (None, None) on every chunk, which constrains nothing.
    """
    page = meta.get(MetaKey.PAGE)
    headers = meta.get(MetaKey.HEADERS)
    return (
        page if isinstance(page, int | str) else None,
        tuple(str(header) for header in headers) if isinstance(headers, list) else None,
    )


def overlap_length(previous: str, following: str, *, at_least: int = 1) -> int:
    """Length of the longest suffix of ``previous`` that is a prefix of ``following`` and shorter than
    both, or 0 when it is shorter than ``at_least``.

    A window overlap never is a whole chunk (see the module docstring), so only the last
    ``len(following) - 1`` characters of ``previous``, never its first, are searched. Longest
    first, each candidate where ``following``'s first ``at_least`` characters occur, compared by
    the string methods (C speed: a per-character Python loop held the event loop for seconds on a
    large document; a longer ``at_least`` leaves few candidates to compare).
    """
    window = previous[max(1, len(previous) - len(following) + 1) :]
    head = following[: max(1, at_least)]
    if not window or len(head) < at_least or not head:
        return 0
    start = window.find(head)
    while start >= 0:
        if window.startswith(following[: len(window) - start], start):
            return len(window) - start
        start = window.find(head, start + 1)
    return 0


def stitch(chunks: Sequence[str], origins: Sequence[Hashable] | None = None) -> str:
    """The chunks as one text, in the given order, each window overlap kept once.

    ``origins``: one ``chunk_origin`` per chunk; an overlap is looked for only between neighbours
    of the same origin. Without it, only the text bounds the overlap.
    """
    if origins is not None and len(origins) != len(chunks):
        raise ValueError(f"{len(origins)} origins for {len(chunks)} chunks")
    parts: list[str] = []
    started = False  # whether any text came yet (empty chunks before it add nothing)
    previous = ""
    previous_origin: Hashable = None
    for index, chunk in enumerate(chunks):
        origin = origins[index] if origins is not None else None
        if not started:
            parts.append(chunk)
            started = bool(chunk)
        else:
            shared = overlap_length(previous, chunk, at_least=MIN_OVERLAP_CHARS) if origin == previous_origin else 0
            parts.append(chunk[shared:] if shared else "\n\n" + chunk)
        previous, previous_origin = chunk, origin
    return "".join(parts)

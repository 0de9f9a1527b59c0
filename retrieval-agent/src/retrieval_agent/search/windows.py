"""Each result read with the document text around it: its chunk and the chunks beside it.

A chunk is cut to fit the embedding model (a few hundred tokens), and the answer a reader needs is
often in the chunk before or after the one that ranked: a table's next rows, the paragraph under a
heading, the rest of a slide. So each final hit is returned as a *window*: its own chunk plus whole
neighbouring chunks of the same file version (``split_id`` order) while the text stays within
SEARCH_WINDOW_CHARS, first on the side whose next chunk the search itself ranked higher (else after
and before in turn), and joined as the document reads (``shared_contract.text.stitch`` drops the
window overlap). The room left is filled with the end of the chunk before (from a line or sentence
start) and the start of the chunk after (up to a line or sentence end). What is shown stays the
document's own text, in order; ``meta.window`` says which splits (first, last) it shows in whole or
in part, ``meta.split_id`` stays the hit's own chunk.

A whole chunk is shown once: a neighbour a better-ranked result already shows is not taken again,
and a hit whose chunk an earlier window shows is dropped (the next candidate takes its place); a
chunk shown only in part may still come as a result of its own. Hits without a ``split_id`` (data
written by other tools) are returned as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, NamedTuple

from rag_runtime.store import PointRecord, point_id_for
from retrieval_agent.adapters.store import SplitSpan
from retrieval_agent.search.postprocess import Hit
from shared_contract import PAYLOAD_CONTENT, PAYLOAD_META, MetaKey, meta_path
from shared_contract.schema import chunk_id
from shared_contract.text import MIN_OVERLAP_CHARS, chunk_origin, overlap_length, stitch

# The response-only meta key: the [first, last] split ids a result's text covers.
WINDOW_KEY: Final = "window"
# Neighbours read on each side of a hit: with the room filled from the next ones' ends, two fill
# the budget as well as four on the real-document questions, at half the read.
MAX_NEIGHBOURS: Final = 2
# What a window needs of a neighbour: its text, where it sits and what it was cut from.
NEIGHBOUR_PAYLOAD: Final = (
    PAYLOAD_CONTENT,
    *(
        meta_path(key)
        for key in (
            MetaKey.FILE_ID,
            MetaKey.COLLECTION_NAME,
            MetaKey.INGEST_SEQ,
            MetaKey.SPLIT_ID,
            MetaKey.PAGE,
            MetaKey.HEADERS,
        )
    ),
)


class FileVersion(NamedTuple):
    """One tenant's copy of one version of a file: the chunks a window may join (a tuple: a search
    builds dozens of these as dict keys)."""

    collection_name: str
    file_id: str
    # ``ingest_seq``; None on data that has none (then tenant + file id decide).
    seq: int | None


@dataclass(frozen=True, slots=True)
class NeighbourChunk:
    """A stored chunk beside a hit: its text and where it was cut from."""

    content: str
    meta: Mapping[str, object]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def hit_position(hit: Hit) -> tuple[FileVersion, int] | None:
    """The hit's file version and split id, or None when its meta lacks them."""
    split = _int(hit.meta.get(MetaKey.SPLIT_ID))
    file_id = hit.meta.get(MetaKey.FILE_ID)
    tenant = hit.meta.get(MetaKey.COLLECTION_NAME)
    if split is None or not isinstance(file_id, str) or not isinstance(tenant, str):
        return None
    return FileVersion(tenant, file_id, _int(hit.meta.get(MetaKey.INGEST_SEQ))), split


@dataclass(frozen=True, slots=True)
class NeighbourRead:
    """What to read around the hits: point ids where the hits' ids follow the contract's
    ``chunk_id`` (as ingestion writes them), split ranges for data written under other ids."""

    point_ids: list[str]
    spans: list[SplitSpan]


def neighbour_read(hits: Sequence[Hit]) -> NeighbourRead:
    """MAX_NEIGHBOURS chunks on each side of every hit, within its file (``chunk_count``) and not
    among the hits themselves: by id where a hit's own id shows the scheme, else by split range
    (overlapping ranges of one file version merged)."""
    positions = [(hit, hit_position(hit)) for hit in hits]
    known = {position for _, position in positions if position is not None}
    point_ids: list[str] = []
    ranges: dict[FileVersion, list[range]] = {}
    by_id: dict[FileVersion, bool] = {}
    for hit, position in positions:
        if position is None:
            continue
        version, split = position
        count = _int(hit.meta.get(MetaKey.CHUNK_COUNT))
        stop = split + MAX_NEIGHBOURS + 1 if count is None else min(split + MAX_NEIGHBOURS + 1, count)
        around = [index for index in range(max(0, split - MAX_NEIGHBOURS), stop) if (version, index) not in known]
        if not around:
            continue
        if version not in by_id:  # one file version's chunks are written under one scheme
            by_id[version] = point_id_for(chunk_id(hit.meta, split)) == hit.point_id
        if by_id[version]:
            point_ids.extend(point_id_for(chunk_id(hit.meta, index)) for index in around)
        else:
            ranges.setdefault(version, []).append(range(around[0], around[-1] + 1))
    spans: list[SplitSpan] = []
    for version, pieces in sorted(ranges.items(), key=lambda item: (item[0].collection_name, item[0].file_id)):
        pieces.sort(key=lambda piece: piece.start)
        start, stop = pieces[0].start, pieces[0].stop
        for piece in pieces[1:]:
            if piece.start > stop:
                spans.append(SplitSpan(version.collection_name, version.file_id, version.seq, range(start, stop)))
                start = piece.start
            stop = max(stop, piece.stop)
        spans.append(SplitSpan(version.collection_name, version.file_id, version.seq, range(start, stop)))
    return NeighbourRead(sorted(set(point_ids)), spans)


def by_position(records: Sequence[PointRecord], hits: Sequence[Hit]) -> dict[FileVersion, dict[int, NeighbourChunk]]:
    """The chunks around ``hits``: the records read and the hits themselves, by the hits' file
    versions and split id (a record of another version of a hit's file is left out)."""
    found: dict[FileVersion, dict[int, NeighbourChunk]] = {}
    versions: dict[tuple[str, str], FileVersion] = {}
    for hit in hits:
        position = hit_position(hit)
        if position is not None:
            versions[(position[0].collection_name, position[0].file_id)] = position[0]
            found.setdefault(position[0], {})[position[1]] = NeighbourChunk(hit.content, hit.meta)
    for record in records:
        meta = record.payload.get(PAYLOAD_META)
        content = record.payload.get(PAYLOAD_CONTENT)
        if not isinstance(meta, dict) or not isinstance(content, str):
            continue
        split = _int(meta.get(MetaKey.SPLIT_ID))
        version = versions.get((str(meta.get(MetaKey.COLLECTION_NAME)), str(meta.get(MetaKey.FILE_ID))))
        if split is None or version is None:
            continue
        if version.seq is not None and _int(meta.get(MetaKey.INGEST_SEQ)) != version.seq:
            continue
        found.setdefault(version, {})[split] = NeighbourChunk(content, meta)
    return found


def _grow(
    version: FileVersion,
    split: int,
    length: int,
    around: Mapping[int, NeighbourChunk],
    shown: set[tuple[FileVersion, int]],
    scores: Mapping[tuple[FileVersion, int], float],
    max_chars: int,
) -> tuple[int, int]:
    """The first and last split of the window around ``split`` (``length`` characters of its own)."""
    first = last = split
    total = length
    after_next = True  # the side taken when the search scored neither neighbour (or both the same)
    while True:
        after, before = last + 1, first - 1
        sides = [
            index
            for index in (after, before)
            if index in around and (version, index) not in shown and total + len(around[index].content) <= max_chars
        ]
        if not sides:
            return first, last
        after_score = scores.get((version, after), float("-inf"))
        before_score = scores.get((version, before), float("-inf"))
        if len(sides) == 1:
            index = sides[0]
        elif after_score != before_score:
            index = after if after_score > before_score else before
        else:
            index = after if after_next else before
        after_next = index != after
        total += len(around[index].content)
        first, last = min(first, index), max(last, index)


def windowed(
    hits: Sequence[Hit],
    neighbours: Mapping[FileVersion, Mapping[int, NeighbourChunk]],
    *,
    max_chars: int,
    k: int,
    ranked: Sequence[Hit] = (),
) -> list[Hit]:
    """At most ``k`` results in ``hits`` order, each its chunk read with the neighbours that fit.

    ``neighbours``: the stored chunks around the hits, by file version and split id (the hits' own
    chunks may be among them). A window grows by one whole chunk at a time, towards the neighbour the
    search scored higher among ``ranked`` (its candidates; default ``hits``), else after and before in
    turn; so a hit's own chunk is always returned whole, even when it alone is longer than ``max_chars``.
    """
    candidates = ranked or hits
    positions = [hit_position(candidate) for candidate in candidates]
    scores: dict[tuple[FileVersion, int], float] = {}
    for candidate, position in zip(candidates, positions, strict=True):
        if position is not None:
            scores.setdefault(position, candidate.score)
    own = positions if candidates is hits else [hit_position(hit) for hit in hits]
    shown: set[tuple[FileVersion, int]] = set()
    results: list[Hit] = []
    for hit, position in zip(hits, own, strict=True):
        if len(results) >= k:
            break
        if position is None:
            results.append(hit)
            continue
        version, split = position
        if position in shown:
            continue  # an earlier window already shows this chunk
        around = neighbours.get(version, {})
        first, last = _grow(version, split, len(hit.content), around, shown, scores, max_chars)
        shown.update((version, index) for index in range(first, last + 1))
        chunks = [
            NeighbourChunk(hit.content, hit.meta) if index == split else around[index]
            for index in range(first, last + 1)
        ]
        content = stitch([chunk.content for chunk in chunks], [chunk_origin(chunk.meta) for chunk in chunks])
        room = max_chars - len(content)
        before = around.get(first - 1) if (version, first - 1) not in shown else None
        after = around.get(last + 1) if (version, last + 1) not in shown else None
        lead = _lead_in(before, chunks[0], room // 2 if after is not None else room) if before is not None else ""
        follow = _follow_on(chunks[-1], after, room - len(lead)) if after is not None else ""
        span = [first - 1 if lead else first, last + 1 if follow else last]
        results.append(replace(hit, content=lead + content + follow, meta={**hit.meta, WINDOW_KEY: span}))
    return results


# Where a part of a neighbour may begin or end: a line break, or the space after a sentence's end.
_BREAK = re.compile(r"\n|(?<=[.!?;:])\s")
# The text up to the last such place (group 1 ends where the break starts), found from the end.
_UP_TO_LAST_BREAK = re.compile(r"(?s)(.*)(?:\n|(?<=[.!?;:])\s)")


def _shared(previous: NeighbourChunk, following: NeighbourChunk) -> int:
    """The window overlap of two consecutive chunks, as ``stitch`` finds it (0 when none)."""
    if chunk_origin(previous.meta) != chunk_origin(following.meta):
        return 0
    return overlap_length(previous.content, following.content, at_least=MIN_OVERLAP_CHARS)


def _lead_in(before: NeighbourChunk, first: NeighbourChunk, room: int) -> str:
    """The end of the chunk ``before`` the window, within ``room`` characters with its joint, from a
    line or sentence start on ("" when none fits)."""
    shared = _shared(before, first)
    text = before.content[: len(before.content) - shared]
    joint = "" if shared else "\n\n"
    room -= len(joint)
    if room <= 0:
        return ""
    part = text[-room:]
    if len(part) < len(text):
        boundary = _BREAK.search(part)
        part = part[boundary.end() :] if boundary else ""
    part = part.lstrip()
    return part + joint if part else ""


def _follow_on(last: NeighbourChunk, after: NeighbourChunk, room: int) -> str:
    """The start of the chunk ``after`` the window, within ``room`` characters with its joint, up to
    a line or sentence end ("" when none fits)."""
    shared = _shared(last, after)
    text = after.content[shared:]
    joint = "" if shared else "\n\n"
    room -= len(joint)
    if room <= 0:
        return ""
    part = text[:room]
    if len(part) < len(text):
        through = _UP_TO_LAST_BREAK.match(part)
        part = part[: through.end(1)] if through else ""
    part = part.rstrip()
    return joint + part if part else ""

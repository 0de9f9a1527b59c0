from __future__ import annotations

import dataclasses
from typing import Any

from rag_runtime.store import point_id_for
from retrieval_agent.adapters.store import SplitSpan
from retrieval_agent.search.postprocess import Hit
from retrieval_agent.search.windows import FileVersion, NeighbourChunk, neighbour_read, windowed
from shared_contract.schema import chunk_id

VERSION = FileVersion("kb", "f1", 3)


def meta(split: int | None, *, file_id: str = "f1", page: int = 1) -> dict[str, Any]:
    values: dict[str, Any] = {"file_id": file_id, "collection_name": "kb", "ingest_seq": 3, "page": page}
    if split is not None:
        values["split_id"] = split
    return values


def hit(split: int | None, content: str, **options: Any) -> Hit:
    return Hit(point_id=f"p{split}", content=content, meta=meta(split, **options))


def test_neighbours_are_read_by_contract_id_else_by_merged_split_ranges() -> None:
    written = hit(10, "a", file_id="f3")  # its point id follows the contract: neighbours by id
    written = dataclasses.replace(written, point_id=point_id_for(chunk_id(written.meta, 10)))
    read = neighbour_read([written, hit(2, "b"), hit(40, "c"), hit(None, "d"), hit(1, "e", file_id="f2"), hit(4, "f")])
    assert read.point_ids == sorted(point_id_for(chunk_id(written.meta, index)) for index in [8, 9, 11, 12])
    # Splits 2 and 4 are hits themselves: not read again.
    assert read.spans == [
        SplitSpan("kb", "f1", 3, range(0, 7)),
        SplitSpan("kb", "f1", 3, range(38, 43)),
        SplitSpan("kb", "f2", 3, range(0, 4)),
    ]


def test_no_neighbour_is_read_past_the_end_of_its_file() -> None:
    last = dataclasses.replace(hit(1, "b"), meta={**meta(1), "chunk_count": 2})
    alone = dataclasses.replace(hit(0, "x", file_id="f2"), meta={**meta(0, file_id="f2"), "chunk_count": 1})
    read = neighbour_read([last, alone])
    assert (read.point_ids, read.spans) == ([], [SplitSpan("kb", "f1", 3, range(0, 1))])


def test_a_window_overlap_between_chunks_of_one_page_is_shown_once() -> None:
    shared = "the overlap both windows hold"
    neighbours = {
        VERSION: {5: NeighbourChunk(f"Then {shared}", meta(5)), 6: NeighbourChunk(f"{shared} and more.", meta(6))}
    }
    (result,) = windowed([hit(5, f"Then {shared}")], neighbours, max_chars=1000, k=1)
    assert result.content == f"Then {shared} and more."
    assert result.meta["window"] == [5, 6]


def test_hits_without_a_split_id_are_returned_as_they_are() -> None:
    plain = hit(None, "stored by another tool")
    assert windowed([plain], {}, max_chars=1000, k=1) == [plain]


def test_a_window_grows_first_towards_the_neighbour_the_search_ranked() -> None:
    neighbours = {VERSION: {index: NeighbourChunk(f"chunk {index} text", meta(index)) for index in range(3, 8)}}
    ranked = [hit(5, "chunk 5 text"), hit(7, "chunk 7 text"), hit(4, "chunk 4 text")]
    ranked = [dataclasses.replace(item, score=score) for item, score in zip(ranked, (0.9, 0.1, 0.5), strict=True)]
    # Room for one neighbour (12 characters each): split 4 scored above split 6 (not a candidate).
    (result, *_) = windowed(ranked, neighbours, max_chars=24, k=1)
    assert result.meta["window"] == [4, 5]
    # Neither neighbour scored: after first, then before, in turn.
    (plain,) = windowed([hit(5, "chunk 5 text")], neighbours, max_chars=36, k=1)
    assert plain.meta["window"] == [4, 6]


def test_the_room_left_takes_the_ends_of_the_chunks_beside_the_window_at_sentence_bounds() -> None:
    before = "An opening line.\nThe clause before says one thing. Module Three covers prototypes."
    after = "Prototype testing follows. A long closing paragraph that will not fit in the room."
    neighbours = {VERSION: {4: NeighbourChunk(before, meta(4, page=0)), 6: NeighbourChunk(after, meta(6, page=2))}}
    center = "The hit's own chunk."
    budget = len(center) + 2 * (len("Module Three covers prototypes.") + 2) + 8
    (result,) = windowed([hit(5, center)], neighbours, max_chars=budget, k=1)
    # Neither whole neighbour fits: the last sentence before, the first sentence after.
    assert result.content == f"Module Three covers prototypes.\n\n{center}\n\nPrototype testing follows."
    assert result.meta["window"] == [4, 6]
    assert len(result.content) <= budget


def test_a_part_of_the_next_chunk_of_one_page_skips_the_window_overlap() -> None:
    shared = "the sentence both chunks share."
    center = f"The hit ends with {shared}"
    after = f"{shared} Then the next one. And a last, long sentence that the room cannot hold at all."
    neighbours = {VERSION: {6: NeighbourChunk(after, meta(6))}}
    (result,) = windowed([hit(5, center)], neighbours, max_chars=len(center) + 25, k=1)
    assert result.content == f"{center} Then the next one."

"""The writer stage: what each chunk's point carries, batch by batch."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio.to_thread
import pytest
from fastapi.testclient import TestClient
from haystack import Document

from ingestion_service.pipeline.components.chunk_writer import ChunkWriter
from shared_contract.store import ChunkPoint

if TYPE_CHECKING:
    from ..conftest import AppFactory, Points, Upload  # noqa: TID252

pytestmark = pytest.mark.anyio

CHUNKS = [
    "Revenue grew in the first quarter of the year",
    "first quarter of the year while costs fell sharply",  # overlaps the end of the first
    "The board approved the dividend.",
]


def _documents() -> list[Document]:
    return [
        Document(id=f"c{index}", content=text, meta={"languages": ["en"]}, embedding=[0.1, 0.2])
        for index, text in enumerate(CHUNKS)
    ]


async def _write(writer_window: int) -> list[ChunkPoint]:
    written: list[ChunkPoint] = []

    async def write(points: Sequence[ChunkPoint]) -> None:
        written.extend(points)

    writer = ChunkWriter(write, batch_size=2, lexical_window=writer_window)
    result = await anyio.to_thread.run_sync(writer.run, _documents())
    assert result == {"documents_written": 3}
    return written


async def test_each_chunks_bm25_entry_is_its_window_and_content_stays_the_chunk() -> None:
    points = await _write(1)
    assert [point.payload["content"] for point in points] == CHUNKS
    joined = "Revenue grew in the first quarter of the year while costs fell sharply"
    assert [point.payload["lexical_en"] for point in points] == [
        f"{joined}\n{CHUNKS[0]}",
        f"{joined}\nThe board approved the dividend.\n{CHUNKS[1]}",
        f"{CHUNKS[1]}\nThe board approved the dividend.\n{CHUNKS[2]}",
    ]


async def test_window_zero_indexes_each_chunk_alone() -> None:
    points = await _write(0)
    assert [point.payload["lexical_en"] for point in points] == CHUNKS


def test_lexical_window_setting_reaches_the_stored_points_through_the_api(
    app_client: AppFactory, upload: Upload, points: Points, docs: Path
) -> None:
    with app_client(lexical_window_chunks=1) as client:
        response = upload(client, docs / "md" / "docling__wiki.md", file_id="wiki-window")
        assert response.status_code == 200, response.text
        stored = sorted(points(client, file_id="wiki-window"), key=lambda point: point.payload["meta"]["split_id"])
    assert len(stored) >= 3
    contents = [point.payload["content"] for point in stored]
    for index, point in enumerate(stored):
        field = point.payload[f"lexical_{point.payload['meta']['lexical_language']}"]
        assert contents[index] in field
        if index > 0:
            assert field.startswith(contents[index - 1])
        # Neighbours first, then the chunk's own text again.
        assert field.endswith("\n" + contents[index])
        if index + 1 < len(stored):
            assert contents[index + 1][-40:] in field


def test_by_default_the_bm25_entry_is_the_chunk_itself(
    client: TestClient, upload: Upload, points: Points, docs: Path
) -> None:
    response = upload(client, docs / "md" / "docling__wiki.md", file_id="wiki-plain")
    assert response.status_code == 200, response.text
    for point in points(client, file_id="wiki-plain"):
        assert point.payload[f"lexical_{point.payload['meta']['lexical_language']}"] == point.payload["content"]

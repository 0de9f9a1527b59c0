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
from ingestion_service.pipeline.embed_text import CONTEXT_KEY, INDEX_BODY_KEY, EmbedTextBuilder
from rag_runtime.store import ChunkPoint

from .word_tokens import word_counter  # noqa: TID252

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


def _embed_text() -> EmbedTextBuilder:
    return EmbedTextBuilder(word_counter(), max_tokens=256, chunk_size=400, prefix="", use_breadcrumb=True)


async def _write(writer_window: int, documents: list[Document] | None = None) -> list[ChunkPoint]:
    written: list[ChunkPoint] = []

    async def write(points: Sequence[ChunkPoint]) -> None:
        written.extend(points)

    writer = ChunkWriter(write, _embed_text(), batch_size=2, lexical_window=writer_window)
    chunks = _documents() if documents is None else documents
    result = await anyio.to_thread.run_sync(writer.run, chunks)
    assert result == {"documents_written": len(chunks)}
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


async def test_bm25_indexes_a_chunks_context_and_body_while_content_stays_its_own_text() -> None:
    table_rows = "| Nespresso | 3128 |"
    chunk = Document(
        id="t1",
        content=table_rows,
        meta={
            "languages": ["en"],
            CONTEXT_KEY: ["Half-year report", "| Segment | Sales |\n| --- | --- |"],
            INDEX_BODY_KEY: "Segment: Nespresso; Sales: 3128",
        },
        embedding=[0.1, 0.2],
    )
    [point] = await _write(0, [chunk])
    assert point.payload["content"] == table_rows
    assert point.payload["lexical_en"] == (
        "Half-year report\n| Segment | Sales |\n| --- | --- |\n\nSegment: Nespresso; Sales: 3128"
    )
    # The transient index keys never reach the stored payload.
    assert CONTEXT_KEY not in point.payload["meta"]
    assert INDEX_BODY_KEY not in point.payload["meta"]


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
        indexed = point.payload[f"lexical_{point.payload['meta']['lexical_language']}"]
        # The chunk's context lines (its document's title and heading path) first, then its window.
        context, _, field = indexed.partition("\n\n")
        assert context.split("\n")[0] == "IBM"
        assert contents[index] in field
        if index > 0:
            assert field.startswith(contents[index - 1])
        # Neighbours first, then the chunk's own text again.
        assert field.endswith("\n" + contents[index])
        if index + 1 < len(stored):
            assert contents[index + 1][-40:] in field


def test_by_default_the_bm25_entry_is_the_chunk_with_its_title_and_heading_path(
    client: TestClient, upload: Upload, points: Points, docs: Path
) -> None:
    response = upload(client, docs / "md" / "docling__wiki.md", file_id="wiki-plain")
    assert response.status_code == 200, response.text
    stored = sorted(points(client, file_id="wiki-plain"), key=lambda point: point.payload["meta"]["split_id"])
    assert len(stored) >= 3
    for point in stored:
        meta = point.payload["meta"]
        # The document's first heading is its title; deeper headings follow it as the path.
        path = " > ".join(meta["headers"][1:])
        context = "IBM" + (f"\n{path}" if path else "")
        assert point.payload[f"lexical_{meta['lexical_language']}"] == f"{context}\n\n{point.payload['content']}"

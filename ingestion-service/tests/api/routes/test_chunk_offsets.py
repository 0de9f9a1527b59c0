"""Each chunk's ``meta.char_start``: where its text starts in the document's extracted text (the
pages in order, joined by a blank line), checked against what the loader extracts from the same file."""

from __future__ import annotations

import mimetypes
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fastapi.testclient import TestClient

if TYPE_CHECKING:
    from ...conftest import AppFactory, Points, Upload  # noqa: TID252

KB = "kb-offsets"
FILES = {
    "paged": "pdf/unstructured__list-item-example.pdf",
    "wiki": "md/docling__wiki.md",
}


def extracted_text(client: TestClient, path: Path) -> str:
    media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    response = client.put(
        "/process", content=path.read_bytes(), headers={"X-Filename": path.name, "Content-Type": media_type}
    )
    assert response.status_code == 200, response.text
    return "\n\n".join(page["page_content"] for page in response.json())


@pytest.mark.parametrize("file_id", sorted(FILES))
def test_each_chunk_records_where_its_text_starts_in_the_document(
    app_client: AppFactory, upload: Upload, points: Points, docs: Path, file_id: str
) -> None:
    # Word chunks, with overlap, so a document has several chunks that share text.
    settings: dict[str, Any] = {"chunk_split_by": "word", "chunk_size": 60, "chunk_overlap": 10, "chunk_min_size": 0}
    with app_client(**settings) as client:
        response = upload(client, docs / FILES[file_id], file_id=file_id, collection_name=KB)
        assert response.status_code == 200, response.text
        text = extracted_text(client, docs / FILES[file_id])
        stored = points(client, file_id=file_id, collection_name=KB)
    chunks = sorted(stored, key=lambda record: record.payload["meta"]["split_id"])
    assert len(chunks) > 2
    starts = []
    for record in chunks:
        content = str(record.payload["content"])
        start = record.payload["meta"]["char_start"]
        assert text[start : start + len(content)] == content
        starts.append(start)
    assert starts == sorted(starts)
    assert len(set(starts)) == len(starts)

"""A collection reindex over HTTP, on a real `rag dev`: an uploaded PDF keeps its pages and title.

An upload's bytes are not kept, so a reindex rebuilds the document from its stored chunks; the
chunks then still cite the pages they come from (``meta.page``, 0-based), which is what Open WebUI's
citations show.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from integration_support import FIXTURES, Stack, ingest_multipart

# Ten pages, with a title and an author in its metadata.
CONTRACT_PDF = FIXTURES / "kreuzberg__sample_contract.pdf"
# On the third page (page 2) only: the notice a consultant gives to end the agreement.
THIRD_PAGE = ("How many days of advance written notice must the consultant give to terminate?", "(120) days")
FINAL = {"succeeded", "failed", "cancelled"}
# Only a guard against a stuck job; no assertion depends on how long it takes.
GUARD_SECONDS = 300


def stored_chunks(stack: Stack, file_id: str, collection: str) -> list[dict[str, Any]]:
    response = stack.ingestion().get(
        f"/api/v1/documents/{file_id}/chunks",
        params={"collection_name": collection, "limit": 1000, "include_content": "full"},
    )
    assert response.status_code == 200, response.text
    chunks: list[dict[str, Any]] = response.json()["chunks"]
    return sorted(chunks, key=lambda chunk: chunk["split_id"])


def reindexed(stack: Stack, collection: str) -> dict[str, Any]:
    """A forced reindex of ``collection``, waited for: the finished job."""
    client = stack.ingestion()
    response = client.post(f"/api/v1/collections/{collection}/reindex", json={"force": True})
    assert response.status_code == 202, response.text
    location = response.headers["location"]
    deadline = time.monotonic() + GUARD_SECONDS
    while True:
        job: dict[str, Any] = client.get(location).json()
        if job["state"] in FINAL:
            return job
        assert time.monotonic() < deadline, f"the reindex never finished: {job}"
        time.sleep(0.2)


def test_a_reindexed_pdf_keeps_its_pages_and_title(stack: Stack, unique: str) -> None:
    collection, file_id = f"kb-reindex-pages-{unique}", str(uuid.uuid4())
    ingest_multipart(stack.ingestion(), CONTRACT_PDF, file_id, collection)
    before = stored_chunks(stack, file_id, collection)
    assert sorted({chunk["meta"].get("page") for chunk in before}) == list(range(10))
    assert {chunk["meta"].get("title") for chunk in before} == {"Microsoft Word - SampleContract-Shuttle"}

    job = reindexed(stack, collection)
    assert (job["state"], job["reingested"], job["failed"]) == ("succeeded", 1, 0), job

    after = stored_chunks(stack, file_id, collection)
    assert {chunk["meta"]["ingest_version"] for chunk in after}.isdisjoint(
        chunk["meta"]["ingest_version"] for chunk in before
    )
    # Each page's text rebuilt once (no overlap doubled), cut into the same chunks on the same pages.
    assert [(chunk["meta"].get("page"), chunk["content"]) for chunk in after] == [
        (chunk["meta"].get("page"), chunk["content"]) for chunk in before
    ]
    for key in ("title", "authors", "mime_type"):
        assert {str(chunk["meta"].get(key)) for chunk in after} == {str(before[0]["meta"].get(key))}, key

    query, words = THIRD_PAGE
    response = stack.retrieval().post("/search", json={"queries": [query], "collection_names": [collection], "k": 3})
    assert response.status_code == 200, response.text
    top_text, top_meta = response.json()["documents"][0][0], response.json()["metadatas"][0][0]
    assert words in top_text
    assert (top_meta["file_id"], top_meta["page"]) == (file_id, 2)

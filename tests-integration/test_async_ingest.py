"""Async ingest through the real HTTP APIs: multipart with `Prefer: respond-async`, poll the job, search finds it."""

from __future__ import annotations

import time
import uuid
from typing import Any

from integration_support import FIXTURES, Stack

CONTRACT_PDF = FIXTURES / "kreuzberg__sample_contract.pdf"
# Only a guard against a stuck job; no assertion depends on how long the ingest takes.
JOB_GUARD_S = 300


def test_async_multipart_ingest_is_polled_to_success_and_found_by_search(stack: Stack, unique: str) -> None:
    kb, file_id = f"kb-async-{unique}", str(uuid.uuid4())
    ingestion = stack.ingestion()
    with CONTRACT_PDF.open("rb") as handle:
        response = ingestion.put(
            "/api/v1/ingest",
            headers={"Prefer": "respond-async"},
            files={"file": (CONTRACT_PDF.name, handle, "application/pdf")},
            data={"file_id": file_id, "filename": CONTRACT_PDF.name, "collection_name": kb, "user_id": "user-1"},
        )
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["state"] == "queued"
    assert response.headers["location"] == accepted["status_url"] == f"/api/v1/ingest/jobs/{accepted['job_id']}"

    deadline = time.monotonic() + JOB_GUARD_S
    while True:
        polled = ingestion.get(response.headers["location"])
        assert polled.status_code == 200, polled.text
        job: dict[str, Any] = polled.json()
        if job["state"] in {"succeeded", "failed", "aborted"}:
            break
        assert time.monotonic() < deadline, f"the job never finished: {job}"
        time.sleep(0.2)
    assert job["state"] == "succeeded", job
    assert job["error"] is None
    assert job["result"]["status"] is True
    assert job["result"]["collection_name"] == kb
    assert job["result"]["chunks_count"] >= 5

    search = stack.retrieval().post(
        f"{stack.retrieval_url}/search",
        json={
            "queries": ["What insurance coverage must the consultant obtain and maintain?"],
            "collection_names": [kb],
            "k": 5,
        },
    )
    assert search.status_code == 200, search.text
    body = search.json()
    top_text, top_meta = body["documents"][0][0], body["metadatas"][0][0]
    assert top_meta["file_id"] == file_id
    assert "insurance" in top_text.lower()

    missing = ingestion.get(f"/api/v1/ingest/jobs/{uuid.uuid4().hex}")
    assert missing.status_code == 404
    assert missing.json()["code"] == "JOB_NOT_FOUND"

"""Reindex through the HTTP API: POST /api/v1/collections/{name}/reindex, then GET and DELETE
/api/v1/reindex/jobs/{job_id}, on a real embedded store with real models.

A change of settings is a second app on the same store and state directory (as a redeploy is).
Runs are held with events inside the pipeline, never timed; polls have a deadline only as a guard.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ingestion_service.indexing.job import IngestJob
from ingestion_service.jobs.reindex import ReindexManager
from ingestion_service.runtime import ServiceHooks

if TYPE_CHECKING:
    from ...conftest import AppFactory, Points, Upload  # noqa: TID252

WIKI = "md/docling__wiki.md"
TABLE = "md/unstructured__simple-table.md"
PDF = "pdf/kreuzberg__searchable.pdf"
# Two pages, and a title in its metadata.
PAGED_PDF = "pdf/unstructured__list-item-example.pdf"
KB = "kb-reindex"
FINAL = {"succeeded", "failed", "cancelled"}
# Only a guard against a deadlocked test; no assertion depends on how long anything takes.
GUARD_SECONDS = 120
# Word chunks, so the layout change is plain to see: the new settings cut more, smaller chunks.
OLD: dict[str, Any] = {"chunk_split_by": "word", "chunk_size": 120, "chunk_overlap": 20, "chunk_min_size": 0}
NEW: dict[str, Any] = {"chunk_split_by": "word", "chunk_size": 50, "chunk_overlap": 10, "chunk_min_size": 0}


# --- helpers ------------------------------------------------------------------------------------


def s3_client(endpoint: str) -> Any:
    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    )


@pytest.fixture
def bucket(s3_endpoint: str) -> str:
    name = f"r-{uuid.uuid4().hex[:8]}"
    s3_client(s3_endpoint).create_bucket(Bucket=name)
    return name


def ingest_from_s3(client: TestClient, bucket: str, key: str, file_id: str, **fields: Any) -> None:
    body = {
        "s3_bucket": bucket,
        "s3_key": key,
        "file_id": file_id,
        "filename": Path(key).name,
        "collection_name": KB,
        "user_id": "u1",
        **fields,
    }
    response = client.put("/api/v1/ingest", json=body)
    assert response.status_code == 200, response.text


def start(client: TestClient, body: dict[str, Any] | None = None, name: str = KB) -> dict[str, Any]:
    response = client.post(f"/api/v1/collections/{name}/reindex", json=body)
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    assert response.headers["location"] == f"/api/v1/reindex/jobs/{job['job_id']}"
    return job


def poll(client: TestClient, job_id: str, until: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + GUARD_SECONDS
    while True:
        response = client.get(f"/api/v1/reindex/jobs/{job_id}")
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        if until(job):
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job never got there: {job}")
        time.sleep(0.05)


def finished(client: TestClient, job_id: str) -> dict[str, Any]:
    return poll(client, job_id, lambda job: job["state"] in FINAL)


def metas(points: Points, client: TestClient, file_id: str, collection_name: str = KB) -> list[dict[str, Any]]:
    stored = points(client, file_id=file_id, collection_name=collection_name)
    return sorted((record.payload["meta"] for record in stored), key=lambda meta: meta["split_id"])


def text_of(points: Points, client: TestClient, file_id: str, collection_name: str = KB) -> str:
    stored = points(client, file_id=file_id, collection_name=collection_name)
    return " ".join(str(record.payload["content"]) for record in stored)


def version_of(points: Points, client: TestClient, file_id: str, collection_name: str = KB) -> str:
    versions = {str(meta["ingest_version"]) for meta in metas(points, client, file_id, collection_name)}
    assert len(versions) == 1, versions
    return versions.pop()


def manager_of(client: TestClient) -> ReindexManager:
    assert isinstance(client.app, FastAPI)
    manager: ReindexManager = client.app.state.reindex
    return manager


def metric(client: TestClient, line_start: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


class Gate:
    """A ``before_commit`` hook that holds the run of one file until released (in its worker thread)."""

    def __init__(self, file_id: str) -> None:
        self.file_id = file_id
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, job: IngestJob) -> None:
        if job.file_id == self.file_id:
            self.entered.set()
            assert self.release.wait(GUARD_SECONDS), "the test never released the run"

    def wait_entered(self) -> None:
        assert self.entered.wait(GUARD_SECONDS), "the run never reached its commit"


# --- tests --------------------------------------------------------------------------------------


def test_collection_stats_count_the_documents_a_reindex_would_bring_up_to_date(
    app_client: AppFactory, upload: Upload, docs: Path, tmp_path: Path
) -> None:
    shared: dict[str, Any] = {"qdrant_index": f"test_{uuid.uuid4().hex[:12]}", "ingest_state_dir": tmp_path}
    with app_client(**shared, chunk_table_rows="markdown") as client:
        for file_id, path in (("t-a", WIKI), ("t-b", TABLE)):
            response = upload(client, docs / path, file_id=file_id, collection_name=KB)
            assert response.status_code == 200, response.text
        assert client.get(f"/api/v1/collections/{KB}/stats").json()["outdated_documents"] == 0
    with app_client(**shared) as client:
        # Built with table rows indexed as Markdown; this service indexes them as pairs.
        assert client.get(f"/api/v1/collections/{KB}/stats").json()["outdated_documents"] == 2
        done = finished(client, start(client)["job_id"])
        assert (done["state"], done["reingested"]) == ("succeeded", 2), done
        assert client.get(f"/api/v1/collections/{KB}/stats").json()["outdated_documents"] == 0


def test_reindex_rebuilds_every_document_under_the_new_settings(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    shared: dict[str, Any] = {
        "qdrant_index": f"test_{uuid.uuid4().hex[:12]}",
        "ingest_state_dir": tmp_path,
        "s3_endpoint_url": s3_endpoint,
    }
    s3 = s3_client(s3_endpoint)
    s3.put_object(Bucket=bucket, Key="kb/wiki.md", Body=(docs / WIKI).read_bytes())
    with app_client(**shared, **OLD) as client:
        for file_id, path, tags in (("doc-a", WIKI, "alpha"), ("doc-b", PDF, "pdf")):
            response = upload(client, docs / path, file_id=file_id, collection_name=KB, tags=tags, category="kept")
            assert response.status_code == 200, response.text
        ingest_from_s3(client, bucket, "kb/wiki.md", "doc-c", tags=["s3"], category="kept")
        before = {file_id: metas(points, client, file_id) for file_id in ("doc-a", "doc-b", "doc-c")}
        pdf_text = text_of(points, client, "doc-b")
    # The object changed since: an S3 document is read from S3 again, not rebuilt from its chunks.
    changed = (docs / WIKI).read_bytes() + b"\n\nA closing paragraph about zebras in the archive.\n"
    s3.put_object(Bucket=bucket, Key="kb/wiki.md", Body=changed)

    with app_client(**shared, **NEW) as client:
        reindexed_before = metric(client, 'reindex_documents_total{outcome="reingested"}')
        job = start(client)
        assert job["state"] in {"queued", "running"}
        assert (job["collection_name"], job["source_index"], job["force"]) == (KB, None, False)
        done = finished(client, job["job_id"])
        assert done["state"] == "succeeded", done
        assert (done["total"], done["done"], done["reingested"], done["unchanged"], done["failed"]) == (3, 3, 3, 0, 0)
        assert (done["failures"], done["current"], done["error"]) == ([], None, None)
        assert done["started_at"] is not None
        assert done["finished_at"] is not None
        assert metric(client, 'reindex_documents_total{outcome="reingested"}') == reindexed_before + 3

        after = {file_id: metas(points, client, file_id) for file_id in ("doc-a", "doc-b", "doc-c")}
        fingerprints = {meta["ingest_fingerprint"] for chunks in after.values() for meta in chunks}
        assert len(fingerprints) == 1
        assert fingerprints.isdisjoint(meta["ingest_fingerprint"] for meta in before["doc-a"])
        for file_id, chunks in after.items():
            old = before[file_id]
            assert {meta["ingest_version"] for meta in chunks}.isdisjoint(meta["ingest_version"] for meta in old)
            assert len({meta["ingest_version"] for meta in chunks}) == 1
            assert [meta["split_id"] for meta in chunks] == list(range(len(chunks)))
            assert {meta["ingest_state"] for meta in chunks} == {"live"}
            assert {meta["category"] for meta in chunks} == {"kept"}
            assert {tuple(meta["tags"]) for meta in chunks} == {tuple(old[0]["tags"])}
            assert {(meta["name"], meta["format"]) for meta in chunks} == {(old[0]["name"], old[0]["format"])}
        # The smaller CHUNK_SIZE cut more chunks.
        assert len(after["doc-a"]) > len(before["doc-a"])
        # Uploads keep the identity of their original file (a later sync of it is still unchanged).
        for file_id in ("doc-a", "doc-b"):
            assert {meta["source_sha256"] for meta in after[file_id]} == {before[file_id][0]["source_sha256"]}
            assert {meta["source_bytes"] for meta in after[file_id]} == {before[file_id][0]["source_bytes"]}
        assert after["doc-b"][0]["format"] == "pdf"
        assert {meta["source_sha256"] for meta in after["doc-c"]} == {hashlib.sha256(changed).hexdigest()}
        assert "International Business Machines" in text_of(points, client, "doc-a")
        assert "zebras" in text_of(points, client, "doc-c")
        pdf_words = set(pdf_text.split())
        assert len(pdf_words & set(text_of(points, client, "doc-b").split())) >= 0.9 * len(pdf_words)

        # Everything is built under these settings now: a second reindex changes nothing.
        versions = {file_id: version_of(points, client, file_id) for file_id in after}
        again = finished(client, start(client)["job_id"])
        assert again["state"] == "succeeded", again
        assert (again["total"], again["reingested"], again["unchanged"], again["failed"]) == (3, 0, 3, 0)
        assert {file_id: version_of(points, client, file_id) for file_id in after} == versions


def test_a_document_whose_object_is_gone_fails_alone(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, s3_endpoint: str, bucket: str, tmp_path: Path
) -> None:
    s3 = s3_client(s3_endpoint)
    s3.put_object(Bucket=bucket, Key="gone.md", Body=(docs / TABLE).read_bytes())
    with app_client(ingest_state_dir=tmp_path, s3_endpoint_url=s3_endpoint) as client:
        assert upload(client, docs / TABLE, file_id="kept", collection_name=KB).status_code == 200
        ingest_from_s3(client, bucket, "gone.md", "gone")
        kept_version = version_of(points, client, "kept")
        gone_before = sorted(record.point_id for record in points(client, file_id="gone"))
        s3.delete_object(Bucket=bucket, Key="gone.md")

        done = finished(client, start(client, {"force": True})["job_id"])
        assert done["state"] == "succeeded", done
        assert (done["total"], done["done"], done["reingested"], done["failed"]) == (2, 2, 1, 1)
        [failure] = done["failures"]
        assert (failure["file_id"], failure["name"], failure["code"]) == ("gone", "gone.md", "S3_FETCH_FAILED")
        assert failure["error"]
        # force re-embedded the other one; the failed one keeps its previous version.
        assert version_of(points, client, "kept") != kept_version
        assert sorted(record.point_id for record in points(client, file_id="gone")) == gone_before


def test_a_job_stopped_by_the_shutdown_resumes_at_the_next_start(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, tmp_path: Path
) -> None:
    shared: dict[str, Any] = {"qdrant_index": f"test_{uuid.uuid4().hex[:12]}", "ingest_state_dir": tmp_path}
    with app_client(**shared, **OLD) as client:
        for file_id, path in (("r-a", WIKI), ("r-b", TABLE), ("r-c", WIKI)):
            assert upload(client, docs / path, file_id=file_id, collection_name=KB).status_code == 200
        old_versions = {file_id: version_of(points, client, file_id) for file_id in ("r-a", "r-b", "r-c")}

    gate = Gate("r-b")  # documents go in file_id order: r-a is done when r-b is held
    with app_client(**shared, **NEW, hooks=ServiceHooks(before_commit=gate)) as client:
        job_id = start(client)["job_id"]
        gate.wait_entered()
        held = client.get(f"/api/v1/reindex/jobs/{job_id}").json()
        assert (held["done"], held["total"], held["progress"]) == (1, 3, 1 / 3)
        assert held["eta_seconds"] > 0  # r-a's pace for the two left
        # One reindex per collection at a time.
        second = client.post(f"/api/v1/collections/{KB}/reindex")
        assert second.status_code == 409
        assert second.json()["code"] == "REINDEX_RUNNING"
        assert job_id in second.json()["error"]
        # The shutdown's first step, then the held run may go on: it is aborted before its commit.
        manager = manager_of(client)
        assert client.portal is not None
        client.portal.call(manager.stop)
        gate.release.set()
        assert client.portal.call(manager.wait_stopped)
        stopped = client.get(f"/api/v1/reindex/jobs/{job_id}").json()
        assert (stopped["state"], stopped["done"], stopped["reingested"]) == ("running", 1, 1)
        assert client.post(f"/api/v1/collections/{KB}/reindex").json()["code"] == "SHUTTING_DOWN"
        a_version = version_of(points, client, "r-a")
        assert a_version != old_versions["r-a"]
        assert version_of(points, client, "r-b") == old_versions["r-b"]  # the aborted run kept the old one

    with app_client(**shared, **NEW) as client:
        done = finished(client, job_id)
        assert done["state"] == "succeeded", done
        assert (done["total"], done["done"], done["reingested"], done["unchanged"], done["failed"]) == (3, 3, 3, 0, 0)
        assert (done["progress"], done["eta_seconds"]) == (1.0, None)
        # r-a was finished before the restart and not done again.
        assert version_of(points, client, "r-a") == a_version
        fingerprints = {
            meta["ingest_fingerprint"] for file_id in ("r-a", "r-b", "r-c") for meta in metas(points, client, file_id)
        }
        assert len(fingerprints) == 1


def test_delete_cancels_and_the_document_being_indexed_keeps_its_version(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, tmp_path: Path
) -> None:
    shared: dict[str, Any] = {"qdrant_index": f"test_{uuid.uuid4().hex[:12]}", "ingest_state_dir": tmp_path}
    with app_client(**shared, **OLD) as client:
        for file_id in ("c-a", "c-b"):
            assert upload(client, docs / TABLE, file_id=file_id, collection_name=KB).status_code == 200
        old_versions = {file_id: version_of(points, client, file_id) for file_id in ("c-a", "c-b")}

    gate = Gate("c-a")
    with app_client(**shared, **NEW, hooks=ServiceHooks(before_commit=gate)) as client:
        job_id = start(client)["job_id"]
        gate.wait_entered()
        cancelled = client.delete(f"/api/v1/reindex/jobs/{job_id}")
        assert cancelled.status_code == 202
        gate.release.set()
        done = finished(client, job_id)
        assert done["state"] == "cancelled", done
        assert (done["done"], done["current"]) == (0, None)
        assert {file_id: version_of(points, client, file_id) for file_id in ("c-a", "c-b")} == old_versions
        # A finished job is left as it is.
        assert client.delete(f"/api/v1/reindex/jobs/{job_id}").status_code == 200
        # The collection is free again.
        assert finished(client, start(client)["job_id"])["state"] == "succeeded"

    # A cancelled job does not come back after a restart.
    with app_client(**shared, **NEW) as client:
        assert client.get(f"/api/v1/reindex/jobs/{job_id}").json()["state"] == "cancelled"


def test_source_index_reads_the_documents_of_another_index(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, tmp_path: Path
) -> None:
    source_index = f"test_{uuid.uuid4().hex[:12]}"
    with app_client(qdrant_index=source_index, ingest_state_dir=tmp_path) as client:
        response = upload(client, docs / WIKI, file_id="moved", collection_name=KB, tags="alpha", category="wiki")
        assert response.status_code == 200, response.text
        old = metas(points, client, "moved")

    target_index = f"test_{uuid.uuid4().hex[:12]}"
    with app_client(qdrant_index=target_index, ingest_state_dir=tmp_path) as client:
        assert points(client, file_id="moved") == []
        job = start(client, {"source_index": source_index})
        assert job["source_index"] == source_index
        done = finished(client, job["job_id"])
        assert done["state"] == "succeeded", done
        assert (done["total"], done["reingested"], done["failed"]) == (1, 1, 0)
        moved = metas(points, client, "moved")
        assert moved
        assert {(tuple(meta["tags"]), meta["category"], meta["source_sha256"]) for meta in moved} == {
            (("alpha",), "wiki", old[0]["source_sha256"])
        }
        assert "International Business Machines" in text_of(points, client, "moved")
        # This index is the source now: the document is already built here.
        again = finished(client, start(client, {"source_index": target_index})["job_id"])
        assert again["source_index"] is None
        assert (again["total"], again["unchanged"], again["reingested"]) == (1, 1, 0)

        missing = client.post(f"/api/v1/collections/{KB}/reindex", json={"source_index": f"absent_{uuid.uuid4().hex}"})
        assert missing.status_code == 404
        assert missing.json()["code"] == "SOURCE_INDEX_NOT_FOUND"
        for body in ({"source_index": "../elsewhere"}, {"force": "yes"}, {"collection": KB}):
            refused = client.post(f"/api/v1/collections/{KB}/reindex", json=body)
            assert refused.status_code == 422, body
            assert refused.json()["code"] == "INVALID_REQUEST"
        unknown = client.get(f"/api/v1/reindex/jobs/{uuid.uuid4().hex}")
        assert unknown.status_code == 404
        assert unknown.json()["code"] == "REINDEX_JOB_NOT_FOUND"
        assert client.delete(f"/api/v1/reindex/jobs/{uuid.uuid4().hex}").status_code == 404


def test_an_empty_collection_succeeds_with_nothing_to_do(app_client: AppFactory, tmp_path: Path) -> None:
    with app_client(ingest_state_dir=tmp_path) as client:
        done = finished(client, start(client, name="kb-empty")["job_id"])
        assert done["state"] == "succeeded", done
        assert (done["total"], done["done"]) == (0, 0)


def test_a_document_whose_chunks_repeat_keeps_every_one_through_text_and_a_forced_reindex(
    app_client: AppFactory, upload: Upload, points: Points, tmp_path: Path
) -> None:
    # One chunk per paragraph, nothing shared: the three form pages read the same, as pages a scan
    # OCRs to one sentence do. None of them is a window overlap of the one before.
    passages: dict[str, Any] = {"chunk_split_by": "passage", "chunk_size": 1, "chunk_overlap": 0, "chunk_min_size": 0}
    form = "Form 7 of the harbour office, to be signed by the applicant and a witness."
    paragraphs = ["Applications for a mooring permit.", form, form, form, "Return the forms to the harbour office."]
    path = tmp_path / "forms.md"
    path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    # Without its original, the upload is rebuilt from its stored text.
    with app_client(ingest_state_dir=tmp_path, keep_originals=False, **passages) as client:
        assert upload(client, path, file_id="forms", collection_name=KB).status_code == 200
        before = [str(record.payload["content"]) for record in points(client, file_id="forms")]
        assert sorted(before) == sorted(paragraphs)

        def document_text() -> dict[str, Any]:
            response = client.get("/api/v1/documents/forms/text", params={"collection_name": KB})
            assert response.status_code == 200, response.text
            body: dict[str, Any] = response.json()
            return body

        read = document_text()
        assert (read["text"], read["chunks"]) == ("\n\n".join(paragraphs), 5)

        # An upload is rebuilt from that text: every form page comes back as its own chunk.
        old_version = version_of(points, client, "forms")
        done = finished(client, start(client, {"force": True})["job_id"])
        assert done["state"] == "succeeded", done
        assert (done["total"], done["reingested"], done["failed"]) == (1, 1, 0)
        assert version_of(points, client, "forms") != old_version
        after = metas(points, client, "forms")
        assert [meta["split_id"] for meta in after] == list(range(5))
        assert [
            str(record.payload["content"])
            for record in sorted(points(client, file_id="forms"), key=lambda record: record.payload["meta"]["split_id"])
        ] == paragraphs
        assert document_text() == read


def stored_chunks(client: TestClient, file_id: str) -> list[dict[str, Any]]:
    """The file's chunks in ``split_id`` order, read through the inspection API."""
    response = client.get(
        f"/api/v1/documents/{file_id}/chunks",
        params={"collection_name": KB, "limit": 1000, "include_content": "full"},
    )
    assert response.status_code == 200, response.text
    chunks: list[dict[str, Any]] = response.json()["chunks"]
    return sorted(chunks, key=lambda chunk: chunk["split_id"])


def test_a_reindexed_pdf_upload_keeps_its_pages_title_and_page_text(
    app_client: AppFactory, upload: Upload, docs: Path, tmp_path: Path
) -> None:
    shared: dict[str, Any] = {
        "qdrant_index": f"test_{uuid.uuid4().hex[:12]}",
        "ingest_state_dir": tmp_path,
        "enable_inspection_api": True,
        # The text path: a document whose original is not kept.
        "keep_originals": False,
    }

    def document_text(client: TestClient) -> str:
        response = client.get("/api/v1/documents/paged/text", params={"collection_name": KB})
        assert response.status_code == 200, response.text
        text: str = response.json()["text"]
        return text

    def extractor_meta(chunks: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
        keys = ("title", "authors", "languages", "mime_type", "extractor")
        return {tuple(str(chunk["meta"].get(key)) for key in keys) for chunk in chunks}

    with app_client(**shared) as client:
        response = upload(client, docs / PAGED_PDF, file_id="paged", collection_name=KB)
        assert response.status_code == 200, response.text
        before = stored_chunks(client, "paged")
        assert sorted({chunk["meta"].get("page") for chunk in before}) == [0, 1]
        assert {chunk["meta"]["title"] for chunk in before} == {"Unstructured-test-doc"}
        text = document_text(client)

        # Rebuilt from its chunks (its original is not kept) under the same settings: the same
        # chunks on the same pages, so each page's text came back once, its overlaps not doubled.
        done = finished(client, start(client, {"force": True})["job_id"])
        assert (done["state"], done["reingested"], done["failed"]) == ("succeeded", 1, 0), done
        forced = stored_chunks(client, "paged")
        assert {chunk["meta"]["ingest_version"] for chunk in forced}.isdisjoint(
            chunk["meta"]["ingest_version"] for chunk in before
        )
        assert [(chunk["meta"].get("page"), chunk["content"]) for chunk in forced] == [
            (chunk["meta"].get("page"), chunk["content"]) for chunk in before
        ]
        assert extractor_meta(forced) == extractor_meta(before)
        assert len(extractor_meta(before)) == 1

    # Smaller chunks: cut anew, still page by page, the text unchanged.
    with app_client(**shared, chunk_size=120, chunk_overlap=30, chunk_min_size=0) as client:
        done = finished(client, start(client)["job_id"])
        assert (done["state"], done["reingested"], done["failed"]) == ("succeeded", 1, 0), done
        smaller = stored_chunks(client, "paged")
        assert len(smaller) > len(before)
        pages = [chunk["meta"].get("page") for chunk in smaller]
        assert sorted(set(pages)) == [0, 1]
        assert pages == sorted(pages)
        assert extractor_meta(smaller) == extractor_meta(before)
        assert document_text(client) == text


def test_a_reindexed_pdf_upload_is_extracted_again_from_its_original_with_its_regions(
    app_client: AppFactory, upload: Upload, docs: Path, tmp_path: Path
) -> None:
    with app_client(ingest_state_dir=tmp_path, enable_inspection_api=True) as client:
        response = upload(client, docs / PAGED_PDF, file_id="paged", collection_name=KB)
        assert response.status_code == 200, response.text
        before = stored_chunks(client, "paged")
        done = finished(client, start(client, {"force": True})["job_id"])
        assert (done["state"], done["reingested"], done["failed"]) == ("succeeded", 1, 0), done
        after = stored_chunks(client, "paged")
        stats = client.get(f"/api/v1/collections/{KB}/stats").json()
    assert {chunk["meta"]["ingest_version"] for chunk in after}.isdisjoint(
        chunk["meta"]["ingest_version"] for chunk in before
    )

    def placed(chunks: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [
            (chunk["meta"]["page"], chunk["meta"]["geometry"], chunk["meta"].get("regions"), chunk["content"])
            for chunk in chunks
        ]

    # The same chunks on the same pages with the same regions: extracted again from the PDF itself.
    assert placed(after) == placed(before)
    assert {chunk["meta"]["geometry"] for chunk in after} == {"text_layer"}
    assert {chunk["meta"]["extractor"] for chunk in after} == {"kreuzberg"}
    assert stats["originals"] == {"originals": 1, "bytes": (docs / PAGED_PDF).stat().st_size}

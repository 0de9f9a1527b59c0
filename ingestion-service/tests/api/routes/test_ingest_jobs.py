"""Async ingest through the HTTP API: PUT /api/v1/ingest with `Prefer: respond-async` or `?mode=async`,
then GET and DELETE /api/v1/ingest/jobs/{job_id}.

Runs are held with events inside the pipeline, never timed; expiry moves an injected clock.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fastapi.testclient import TestClient
from haystack import Document, component

from ingestion_service.api.routes.ingest import prefers_async
from ingestion_service.indexing.assembly import PipelineParts
from ingestion_service.indexing.job import IngestJob
from ingestion_service.run_control import checkpoint
from ingestion_service.runtime import ServiceHooks

if TYPE_CHECKING:
    import httpx2

    from ...conftest import AppFactory, Points  # noqa: TID252

WIKI = "md/docling__wiki.md"
TABLE = "md/unstructured__simple-table.md"
SCAN = "pdf/kreuzberg__non_searchable.pdf"
ASYNC = {"Prefer": "respond-async"}
FINAL = {"succeeded", "failed", "aborted"}
# Only a guard against a deadlocked test; no assertion depends on how long anything takes.
GUARD_SECONDS = 60


def submit(
    client: TestClient,
    path: Path,
    file_id: str,
    *,
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    **fields: str,
) -> httpx2.Response:
    """Multipart ingest of ``path``, asking for async unless ``headers`` say otherwise."""
    data = {
        "file_id": file_id,
        "filename": fields.pop("filename", path.name),
        "collection_name": fields.pop("collection_name", f"file-{file_id}"),
        "user_id": "u1",
        **fields,
    }
    with path.open("rb") as handle:
        return client.put(
            "/api/v1/ingest",
            data=data,
            files={"file": (path.name, handle)},
            headers=ASYNC if headers is None else headers,
            params=params,
        )


def accepted(response: httpx2.Response) -> str:
    """The job id of a 202, after checking the answer's shape."""
    assert response.status_code == 202, response.text
    body = response.json()
    url = f"/api/v1/ingest/jobs/{body['job_id']}"
    assert response.headers["location"] == url
    assert body["status_url"] == url
    assert body["status"] is True
    assert body["state"] == "queued"
    job_id: str = body["job_id"]
    return job_id


def poll(client: TestClient, job_id: str) -> dict[str, Any]:
    """GET the job until it has finished."""
    deadline = time.monotonic() + GUARD_SECONDS
    while True:
        response = client.get(f"/api/v1/ingest/jobs/{job_id}")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        if body["state"] in FINAL:
            return body
        assert time.monotonic() < deadline, f"job {job_id} never finished: {body}"
        time.sleep(0.02)


def flat(body: dict[str, Any]) -> dict[str, Any]:
    """The flat error body's fields every error carries (the shared helpers may add more, e.g. a hint)."""
    return {key: body[key] for key in ("status", "error", "code", "request_id")}


def state_of(client: TestClient, job_id: str) -> str:
    state: str = client.get(f"/api/v1/ingest/jobs/{job_id}").json()["state"]
    return state


class Clock:
    """The monotonic clock jobs expire by, moved by hand."""

    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


@component
class WriteThenStall:
    """The real writer, then a stall that only the run's abort ends (counted, so tests can wait for it)."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.arrivals = threading.Semaphore(0)

    @component.output_types(documents_written=int)
    def run(self, documents: list[Document], multilingual: dict[str, list[float]] | None = None) -> dict[str, int]:
        self.writer.run(documents=documents, multilingual=multilingual)
        self.arrivals.release()
        deadline = time.monotonic() + GUARD_SECONDS
        while time.monotonic() < deadline:
            checkpoint()
            time.sleep(0.01)
        raise AssertionError("the run was never stopped")

    def wait_for(self, runs: int = 1) -> None:
        for _ in range(runs):
            assert self.arrivals.acquire(timeout=GUARD_SECONDS), "a run never reached the writer"


def stalling_hooks() -> tuple[ServiceHooks, list[WriteThenStall]]:
    stall: list[WriteThenStall] = []

    def customize(parts: PipelineParts) -> PipelineParts:
        stall.append(WriteThenStall(parts.writer))
        return replace(parts, writer=stall[0])

    return ServiceHooks(customize_parts=customize), stall


def live_points(points: Points, client: TestClient, file_id: str) -> list[str]:
    records = points(client, file_id=file_id)
    assert {record.payload["meta"]["ingest_state"] for record in records} <= {"live"}
    return sorted(record.point_id for record in records)


# --- the async answer and a successful job ------------------------------------------------------


def test_async_ingest_answers_202_and_the_job_ends_with_the_sync_answer(
    app_client: AppFactory, docs: Path, points: Points
) -> None:
    with app_client(enable_inspection_api=True) as client:
        response = submit(client, docs / WIKI, "asyncwiki")
        job_id = accepted(response)
        assert response.headers["preference-applied"] == "respond-async"
        assert response.json()["file_id"] == "asyncwiki"
        assert response.json()["collection_name"] == "file-asyncwiki"
        job = poll(client, job_id)
        sync = submit(client, docs / WIKI, "syncwiki", headers={}).json()

        assert job["state"] == "succeeded"
        assert job["error"] is None
        assert (job["job_id"], job["file_id"], job["collection_name"]) == (job_id, "asyncwiki", "file-asyncwiki")
        assert job["created_at"] <= job["started_at"] <= job["finished_at"]
        result = job["result"]
        # The body a sync ingest of the same document answers, but for its own version.
        version = result["extraction"].pop("ingest_version")
        sync["extraction"].pop("ingest_version")
        assert result == {**sync, "collection_name": "file-asyncwiki"}
        # Committed (live: what search reads) and listed.
        stored = points(client, file_id="asyncwiki")
        assert len(stored) == result["chunks_count"] > 1
        assert {r.payload["meta"]["ingest_version"] for r in stored} == {version}
        assert {r.payload["meta"]["ingest_state"] for r in stored} == {"live"}
        listed = client.get("/api/v1/documents/asyncwiki/chunks", params={"include_content": "full"}).json()
        assert listed["stats"]["total_chunks"] == result["chunks_count"]
        assert any("International Business Machines" in chunk["content"] for chunk in listed["chunks"])

        text = client.get("/metrics").text
        assert 'ingest_jobs_total{state="succeeded"} 1.0' in text
        assert 'ingest_jobs_active{state="queued"} 0.0' in text
        assert 'ingest_jobs_active{state="running"} 0.0' in text
        # The job counts as an ingest like the sync one.
        assert 'ingest_requests_total{code="OK",outcome="success"} 2.0' in text


def test_mode_query_parameter_picks_the_answer(client: TestClient, docs: Path) -> None:
    by_query = submit(client, docs / TABLE, "q1", headers={}, params={"mode": "async"})
    job_id = accepted(by_query)
    # Not asked through Prefer, so no Preference-Applied.
    assert "preference-applied" not in by_query.headers
    assert poll(client, job_id)["state"] == "succeeded"
    forced_sync = submit(client, docs / TABLE, "q2", params={"mode": "sync"})
    assert forced_sync.status_code == 200
    assert forced_sync.json()["chunks_count"] >= 1
    assert "preference-applied" not in forced_sync.headers
    bogus = submit(client, docs / TABLE, "q3", params={"mode": "later"})
    assert bogus.status_code == 422
    assert bogus.json()["code"] == "INVALID_REQUEST"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (["respond-async"], True),
        (["Respond-Async"], True),
        (["wait=10, respond-async"], True),
        (["handling=lenient", "respond-async; x=1"], True),
        (["respond-async-later"], False),
        (["return=minimal"], False),
        ([], False),
    ],
)
def test_prefer_header_parsing(headers: list[str], expected: bool) -> None:
    assert prefers_async(headers) is expected


def test_async_json_mode_stages_the_s3_object_then_runs_the_job(
    app_client: AppFactory, s3_endpoint: str, docs: Path, points: Points
) -> None:
    import boto3

    bucket = f"b-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client(
        "s3", endpoint_url=s3_endpoint, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    )
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="wiki.md", Body=(docs / WIKI).read_bytes())
    body = {
        "s3_bucket": bucket,
        "s3_key": "wiki.md",
        "file_id": "s3async",
        "filename": "wiki.md",
        "collection_name": "file-s3async",
        "user_id": "u1",
    }
    with app_client(s3_endpoint_url=s3_endpoint) as client:
        job_id = accepted(client.put("/api/v1/ingest", json=body, headers=ASYNC))
        job = poll(client, job_id)
        assert job["state"] == "succeeded"
        assert len(points(client, file_id="s3async")) == job["result"]["chunks_count"] > 1
        # A missing object is found while staging: the usual synchronous 502, no job.
        missing = client.put("/api/v1/ingest", json={**body, "s3_key": "absent"}, headers=ASYNC)
        assert missing.status_code == 502
        assert missing.json()["code"] == "S3_FETCH_FAILED"


# --- what is checked before the 202 -------------------------------------------------------------


def test_request_problems_are_answered_synchronously_in_async_mode(
    app_client: AppFactory, docs: Path, points: Points, tmp_path: Path
) -> None:
    elf = tmp_path / "program.md"
    elf.write_bytes(b"\x7fELF\x02\x01\x01" + b"\x00" * 200)
    with app_client(max_upload_bytes=4000) as client:
        cases = [
            (submit(client, docs / TABLE, "bind", collection_name="file-other"), 403, "INVALID_REQUEST"),
            (submit(client, docs / WIKI, "big"), 413, "DOCUMENT_TOO_LARGE"),
            (submit(client, elf, "elf"), 415, "UNSUPPORTED_CONTENT"),
            (submit(client, docs / TABLE, "blank", user_id=" "), 422, "INVALID_REQUEST"),
            (client.put("/api/v1/ingest", content=b"x", headers={**ASYNC, "Content-Type": "text/plain"}), 415, None),
        ]
        for response, status, code in cases:
            assert response.status_code == status, response.text
            body = response.json()
            assert body["status"] is False
            assert body["request_id"] == response.headers["x-request-id"]
            if code is not None:
                assert body["code"] == code
            assert "location" not in response.headers
        assert points(client) == []
        text = client.get("/metrics").text
        assert "ingest_jobs_total{" not in text
        assert 'ingest_jobs_active{state="queued"} 0.0' in text


def test_a_failing_document_ends_failed_with_the_sync_error(app_client: AppFactory, docs: Path, points: Points) -> None:
    with app_client(enable_ocr=False) as client:
        assert submit(client, docs / WIKI, "scan", headers={}).status_code == 200
        before = live_points(points, client, "scan")
        sync = submit(client, docs / SCAN, "scan", headers={})
        assert sync.status_code == 422
        response = submit(client, docs / SCAN, "scan", headers={**ASYNC, "X-Request-ID": "async-scan-1"})
        job = poll(client, accepted(response))
        assert job["state"] == "failed"
        assert job["result"] is None
        assert job["error"] == {**sync.json(), "request_id": "async-scan-1"}
        assert job["error"]["code"] == "EXTRACTION_FAILED"
        assert live_points(points, client, "scan") == before
        text = client.get("/metrics").text
        assert 'ingest_jobs_total{state="failed"} 1.0' in text
        assert 'ingest_requests_total{code="EXTRACTION_FAILED",outcome="failure"} 2.0' in text


# --- the job resource ---------------------------------------------------------------------------


def test_unknown_job_is_404_job_not_found(client: TestClient) -> None:
    for method in ("GET", "DELETE"):
        response = client.request(method, "/api/v1/ingest/jobs/no-such-job")
        assert response.status_code == 404
        assert flat(response.json()) == {
            "status": False,
            "error": "No ingest job with this id: unknown, finished longer than INGEST_JOB_TTL_SECONDS ago, "
            "or created by another process or before a restart (jobs live in memory).",
            "code": "JOB_NOT_FOUND",
            "request_id": response.headers["x-request-id"],
        }


def test_job_routes_need_the_api_key(client: TestClient) -> None:
    response = client.get("/api/v1/ingest/jobs/anything", headers={"Authorization": ""})
    assert response.status_code == 401
    assert response.json()["code"] == "UNAUTHORIZED"


def test_finished_jobs_expire_after_the_ttl(app_client: AppFactory, docs: Path) -> None:
    clock = Clock()
    with app_client(hooks=ServiceHooks(job_clock=clock), ingest_job_ttl_seconds=120) as client:
        job_id = accepted(submit(client, docs / TABLE, "ttl"))
        assert poll(client, job_id)["state"] == "succeeded"
        clock.now += 119.5
        assert state_of(client, job_id) == "succeeded"
        clock.now += 0.5
        response = client.get(f"/api/v1/ingest/jobs/{job_id}")
        assert response.status_code == 404
        assert response.json()["code"] == "JOB_NOT_FOUND"


def test_full_of_unfinished_jobs_is_503_and_a_finished_job_makes_room(app_client: AppFactory, docs: Path) -> None:
    arrived, release = threading.Event(), threading.Event()

    def hold(job: IngestJob) -> None:
        if job.file_id == "cap1":
            arrived.set()
            assert release.wait(timeout=GUARD_SECONDS)

    with app_client(hooks=ServiceHooks(before_commit=hold), ingest_jobs_max=1) as client:
        try:
            first = accepted(submit(client, docs / TABLE, "cap1"))
            assert arrived.wait(timeout=GUARD_SECONDS)
            assert state_of(client, first) == "running"
            assert 'ingest_jobs_active{state="running"} 1.0' in client.get("/metrics").text
            refused = submit(client, docs / TABLE, "cap2")
            assert refused.status_code == 503
            assert flat(refused.json()) == {
                "status": False,
                "error": "1 ingest jobs (INGEST_JOBS_MAX) are queued or running; retry later.",
                "code": "JOB_QUEUE_FULL",
                "request_id": refused.headers["x-request-id"],
            }
            # Sync ingests do not take a job slot.
            assert submit(client, docs / TABLE, "cap3", headers={}).status_code == 200
        finally:
            release.set()
        assert poll(client, first)["state"] == "succeeded"
        # The finished job is dropped to make room for the next one.
        third = accepted(submit(client, docs / TABLE, "cap4"))
        assert client.get(f"/api/v1/ingest/jobs/{first}").json()["code"] == "JOB_NOT_FOUND"
        assert poll(client, third)["state"] == "succeeded"


def test_a_running_job_shows_its_stage_and_a_finished_one_none(app_client: AppFactory, docs: Path) -> None:
    arrived, release = threading.Event(), threading.Event()

    def hold(job: IngestJob) -> None:
        arrived.set()
        assert release.wait(timeout=GUARD_SECONDS)

    with app_client(hooks=ServiceHooks(before_commit=hold)) as client:
        try:
            job_id = accepted(submit(client, docs / WIKI, "staged"))
            assert arrived.wait(timeout=GUARD_SECONDS)
            held = client.get(f"/api/v1/ingest/jobs/{job_id}").json()
        finally:
            release.set()
        done = poll(client, job_id)
    # Held before its commit: every chunk written, nothing left of the stage.
    assert held["state"] == "running"
    assert held["stage"]["name"] == "writing"
    assert held["stage"]["done"] == held["stage"]["total"] == done["result"]["chunks_count"] > 1
    assert held["stage"]["eta_seconds"] == 0.0
    assert (done["state"], done["stage"]) == ("succeeded", None)


def test_documents_waiting_for_the_pipeline_stage_at_most_scratch_max_bytes(
    app_client: AppFactory, docs: Path, tmp_path: Path
) -> None:
    arrived, release = threading.Event(), threading.Event()
    pdf = docs / "pdf/kreuzberg__searchable.pdf"  # 18.8 KB: each upload reserves its ~19.5 KB body

    def hold(job: IngestJob) -> None:
        if job.file_id == "stage1":
            arrived.set()
            assert release.wait(timeout=GUARD_SECONDS)

    with app_client(
        hooks=ServiceHooks(before_commit=hold),
        scratch_dir=tmp_path,
        max_upload_bytes=20_000,
        scratch_max_bytes=45_000,
        ingest_concurrency=1,
    ) as client:
        try:
            first = accepted(submit(client, pdf, "stage1"))
            assert arrived.wait(timeout=GUARD_SECONDS)
            second = accepted(submit(client, pdf, "stage2"))  # waits for the one slot, staged
            refused = submit(client, pdf, "stage3")
            assert refused.status_code == 503
            body = flat(refused.json())
            assert body["code"] == "STAGING_FULL"
            staged = 2 * int(refused.request.headers["content-length"])
            assert body["error"] == (
                f"Documents waiting to be ingested hold {staged} bytes of the staging area and this one needs "
                f"{staged // 2} more, over SCRATCH_MAX_BYTES (45000); retry later."
            )
            # A sync ingest is refused alike, before its body is read.
            assert submit(client, pdf, "stage4", headers={}).json()["code"] == "STAGING_FULL"
            [own] = tmp_path.glob("proc-*")
            assert len(list(own.iterdir())) == 2  # the two staged documents; the refused left nothing
        finally:
            release.set()
        assert [poll(client, job)["state"] for job in (first, second)] == ["succeeded", "succeeded"]
        # Their room is given back when they end.
        assert poll(client, accepted(submit(client, pdf, "stage3")))["state"] == "succeeded"


def test_two_async_ingests_of_one_file_end_with_the_newest_version(
    app_client: AppFactory, docs: Path, points: Points
) -> None:
    with app_client(ingest_concurrency=2) as client:
        job_ids = [accepted(submit(client, docs / WIKI, "twice")) for _ in range(2)]
        jobs = [poll(client, job_id) for job_id in job_ids]
        assert [job["state"] for job in jobs] == ["succeeded", "succeeded"]
        # Each version is taken when its request starts; the newest one stays, whichever committed first.
        newest = max(job["result"]["extraction"]["ingest_version"] for job in jobs)
        stored = points(client, file_id="twice")
        assert {r.payload["meta"]["ingest_version"] for r in stored} == {newest}
        assert {r.payload["meta"]["ingest_state"] for r in stored} == {"live"}


# --- cancelling -----------------------------------------------------------------------------------


def test_delete_aborts_a_running_and_a_queued_job_and_keeps_the_previous_version(
    app_client: AppFactory, docs: Path, points: Points
) -> None:
    index_name = f"cancel_{uuid.uuid4().hex[:12]}"
    with app_client(qdrant_index=index_name) as client:
        assert submit(client, docs / TABLE, "cancel", headers={}).status_code == 200
        before = live_points(points, client, "cancel")
    hooks, stall = stalling_hooks()
    # The same collection, with a writer that stalls after writing until the run is stopped.
    with app_client(hooks=hooks, qdrant_index=index_name, ingest_concurrency=1, shutdown_grace_seconds=0) as client:
        # force: the same bytes would otherwise answer unchanged without running the pipeline.
        running = accepted(submit(client, docs / TABLE, "cancel", force="true"))
        stall[0].wait_for(1)
        queued = accepted(submit(client, docs / WIKI, "cancel"))
        assert state_of(client, running) == "running"
        assert state_of(client, queued) == "queued"

        response = client.delete(f"/api/v1/ingest/jobs/{queued}")
        assert response.status_code == 202
        assert response.json()["state"] == "queued"
        job = poll(client, queued)
        assert job["state"] == "aborted"
        assert job["started_at"] is None
        assert job["error"]["code"] == "JOB_CANCELLED"
        assert state_of(client, running) == "running"

        response = client.delete(f"/api/v1/ingest/jobs/{running}")
        assert response.status_code == 202
        job = poll(client, running)
        assert job["state"] == "aborted"
        assert flat(job["error"]) == {
            "status": False,
            "error": "The ingest job was cancelled; nothing was stored and the previous version is kept.",
            "code": "JOB_CANCELLED",
            "request_id": job["error"]["request_id"],
        }
        # Its pending points are gone; the previous version is untouched.
        assert live_points(points, client, "cancel") == before
        # A finished job is left as it ended.
        again = client.delete(f"/api/v1/ingest/jobs/{running}")
        assert again.status_code == 200
        assert again.json() == job
        text = client.get("/metrics").text
        assert 'ingest_jobs_total{state="aborted"} 2.0' in text
        assert 'ingest_requests_total{code="JOB_CANCELLED",outcome="aborted"} 2.0' in text

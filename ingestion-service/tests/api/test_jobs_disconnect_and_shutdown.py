"""Async ingest jobs on a real uvicorn server: a client that leaves after the 202 does not stop its job,
and a server that stops aborts its running jobs after the grace period, keeping the previous version.

Runs are held inside the pipeline (a commit gate, or a writer that stalls until the run is
stopped), never timed; the stall gives up after 60 s, failing the test, if the abort never comes.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from ingestion_service.indexing.job import IngestJob
from ingestion_service.runtime import ServiceHooks
from rag_runtime.embedding import ContractEmbedder

from .served import GUARD_SECONDS, StallingWriter, ingest_form, served_overrides, serving, stored_points  # noqa: TID252

if TYPE_CHECKING:
    from ..conftest import AppFactory, MakeSettings, Points, Upload  # noqa: TID252

WIKI = "md/docling__wiki.md"
TABLE = "md/unstructured__simple-table.md"


def test_a_client_that_leaves_after_the_202_does_not_stop_its_job(
    make_test_settings: MakeSettings, embedder: ContractEmbedder, docs: Path, tmp_path: Path
) -> None:
    arrived, release = threading.Event(), threading.Event()

    def hold(job: IngestJob) -> None:
        arrived.set()
        assert release.wait(timeout=GUARD_SECONDS), "the test never released the commit"

    settings = make_test_settings(**served_overrides(tmp_path, "jobs"), enable_inspection_api=True)
    hooks = ServiceHooks(embedder=embedder, before_commit=hold)
    with serving(settings, hooks) as served:
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.sendall(served.raw_ingest_request(docs / WIKI, "left", {"Prefer": "respond-async"}))
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                chunk = sock.recv(65536)
                assert chunk, f"the server closed the connection early: {answer!r}"
                answer += chunk
            # The client goes away right after the 202, its job still queued or running.
        status_line, _, rest = answer.partition(b"\r\n")
        assert status_line.startswith(b"HTTP/1.1 202"), answer
        job_id = json.loads(rest.partition(b"\r\n\r\n")[2])["job_id"]
        assert arrived.wait(timeout=GUARD_SECONDS), "the job never reached its commit"
        assert served.job(job_id)["state"] == "running"
        release.set()
        job = served.poll(job_id)
        assert job["state"] == "succeeded", job
        chunks = httpx.get(
            f"{served.url}/api/v1/documents/left/chunks", params={"limit": 1000}, headers=served.headers
        ).json()
        assert chunks["stats"]["total_chunks"] == job["result"]["chunks_count"] > 1
        metrics = httpx.get(f"{served.url}/metrics", headers=served.headers).text
        assert "CLIENT_DISCONNECTED" not in metrics
        assert 'ingest_jobs_total{state="succeeded"} 1.0' in metrics


def test_shutdown_aborts_a_running_job_after_the_grace_period_and_keeps_the_previous_version(
    app_client: AppFactory,
    upload: Upload,
    points: Points,
    make_test_settings: MakeSettings,
    embedder: ContractEmbedder,
    docs: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    overrides = served_overrides(tmp_path, "jobs")
    with app_client(qdrant_index=overrides["qdrant_index"]) as client:
        assert upload(client, docs / TABLE, file_id="d").status_code == 200
        before = sorted(record.point_id for record in points(client, file_id="d"))
    writer = StallingWriter()
    settings = make_test_settings(**overrides)
    hooks = ServiceHooks(embedder=embedder, customize_parts=writer)
    with caplog.at_level(logging.INFO), serving(settings, hooks) as served:
        response = httpx.put(
            f"{served.url}/api/v1/ingest",
            headers={**served.headers, "Prefer": "respond-async", "X-Request-ID": "submit-1"},
            **ingest_form(docs / WIKI, "d"),
        )
        assert response.status_code == 202, response.text
        job_id = response.json()["job_id"]
        assert writer.stall.written.wait(GUARD_SECONDS), "the run never wrote its chunks"
        assert served.job(job_id)["state"] == "running"
        served.server.should_exit = True  # what uvicorn's SIGTERM handler does
        # The server stops within the grace period plus the abort, long before the stall would end.
        served.thread.join(timeout=GUARD_SECONDS / 2)
        assert not served.thread.is_alive()
    runtime = served.app.state.runtime
    job = served.app.state.jobs.get(job_id)
    assert job.state == "aborted"
    assert job.error is not None
    assert (job.error["code"], job.error["request_id"]) == ("SHUTTING_DOWN", "submit-1")
    text = runtime.metrics.render().decode()
    assert 'ingest_jobs_total{state="aborted"} 1.0' in text
    assert 'ingest_requests_total{code="SHUTTING_DOWN",outcome="aborted"} 1.0' in text
    assert 'ingest_jobs_active{state="running"} 0.0' in text
    [ended] = [record for record in caplog.records if getattr(record, "job_id", None) == job_id]
    assert {name: getattr(ended, name) for name in ("file_id", "state", "code", "request_id")} == {
        "file_id": "d",
        "state": "aborted",
        "code": "SHUTTING_DOWN",
        "request_id": "submit-1",
    }
    assert not list(overrides["scratch_dir"].glob("proc-*"))
    stored = stored_points(settings, "d")
    assert sorted(record.point_id for record in stored) == before
    assert {record.payload["meta"]["ingest_state"] for record in stored} == {"live"}

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
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from haystack import Document, component
from qdrant_client import models

from ingestion_service.main import create_app, server_config
from ingestion_service.pipeline.indexing import IngestJob, PipelineParts
from ingestion_service.pipeline.run_control import checkpoint
from ingestion_service.runtime import ServiceHooks
from ingestion_service.settings import Settings
from shared_contract import ContractEmbedder, MetaKey
from shared_contract.store import PointRecord, close_store, match, open_store

if TYPE_CHECKING:
    from ..conftest import AppFactory, MakeSettings, Points, Upload  # noqa: TID252

WIKI = "md/docling__wiki.md"
TABLE = "md/unstructured__simple-table.md"
GUARD_SECONDS = 60
FINAL = {"succeeded", "failed", "aborted"}


@component
class WriteThenStall:
    """The real writer, then a stall that only the run's abort ends."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.written = threading.Event()

    @component.output_types(documents_written=int)
    def run(self, documents: list[Document]) -> dict[str, int]:
        self.writer.run(documents=documents)
        self.written.set()
        deadline = time.monotonic() + GUARD_SECONDS
        while time.monotonic() < deadline:
            checkpoint()
            time.sleep(0.01)
        raise AssertionError("the run was never stopped")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    url: str
    port: int
    app: FastAPI
    server: uvicorn.Server
    thread: threading.Thread
    headers: dict[str, str]

    def job(self, job_id: str) -> dict[str, Any]:
        response = httpx.get(f"{self.url}/api/v1/ingest/jobs/{job_id}", headers=self.headers)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def poll(self, job_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + GUARD_SECONDS
        while (body := self.job(job_id))["state"] not in FINAL:
            assert time.monotonic() < deadline, f"job never finished: {body}"
            time.sleep(0.02)
        return body


@contextmanager
def serving(settings: Settings, hooks: ServiceHooks) -> Iterator[Served]:
    app = create_app(settings, hooks=hooks)
    server = uvicorn.Server(server_config(app, settings))
    thread = threading.Thread(target=server.run, name="uvicorn-under-test")
    thread.start()
    url = f"http://127.0.0.1:{settings.port}"
    deadline = time.monotonic() + GUARD_SECONDS
    while True:
        try:
            if httpx.get(f"{url}/health/ready").status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "server never became ready"
        time.sleep(0.05)
    headers = {"Authorization": f"Bearer {settings.api_key.get_secret_value()}"}
    try:
        yield Served(url, settings.port, app, server, thread, headers)
    finally:
        server.should_exit = True
        thread.join(timeout=GUARD_SECONDS)


def _form(path: Path, file_id: str) -> dict[str, Any]:
    return {
        "data": {"file_id": file_id, "filename": path.name, "collection_name": f"file-{file_id}", "user_id": "u1"},
        "files": {"file": (path.name, path.read_bytes())},
    }


def _stored(settings: Settings, file_id: str) -> list[PointRecord]:
    """Every point of the file, pending ones too, read from the store after the server has stopped."""

    async def read() -> list[PointRecord]:
        store = open_store(settings)
        try:
            records, _ = await store.scroll(models.Filter(must=[match(MetaKey.FILE_ID, file_id)]), limit=10_000)
            return list(records)
        finally:
            await close_store(store)

    return anyio.run(read)


def _overrides(tmp_path: Path) -> dict[str, Any]:
    return {
        "qdrant_index": f"jobs_{tmp_path.name[-12:].replace('-', '_')}",
        "scratch_dir": tmp_path / "scratch",
        "host": "127.0.0.1",
        "port": _free_port(),
        "shutdown_grace_seconds": 1,
    }


def test_a_client_that_leaves_after_the_202_does_not_stop_its_job(
    make_test_settings: MakeSettings, embedder: ContractEmbedder, docs: Path, tmp_path: Path
) -> None:
    arrived, release = threading.Event(), threading.Event()

    def hold(job: IngestJob) -> None:
        arrived.set()
        assert release.wait(timeout=GUARD_SECONDS), "the test never released the commit"

    settings = make_test_settings(**_overrides(tmp_path), enable_inspection_api=True)
    hooks = ServiceHooks(embedder=embedder, before_commit=hold)
    with serving(settings, hooks) as served:
        request = httpx.Request(
            "PUT",
            f"{served.url}/api/v1/ingest",
            headers={**served.headers, "Prefer": "respond-async"},
            **_form(docs / WIKI, "left"),
        )
        body = request.read()
        head = f"PUT /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n" + "".join(
            f"{name}: {value}\r\n" for name, value in request.headers.items() if name.lower() != "host"
        )
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.sendall(head.encode() + b"\r\n" + body)
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
    overrides = _overrides(tmp_path)
    with app_client(qdrant_index=overrides["qdrant_index"]) as client:
        assert upload(client, docs / TABLE, file_id="d").status_code == 200
        before = sorted(record.point_id for record in points(client, file_id="d"))
    stall: list[WriteThenStall] = []

    def stalling(parts: PipelineParts) -> PipelineParts:
        stall.append(WriteThenStall(parts.writer))
        return replace(parts, writer=stall[0])

    settings = make_test_settings(**overrides)
    hooks = ServiceHooks(embedder=embedder, customize_parts=stalling)
    with caplog.at_level(logging.INFO), serving(settings, hooks) as served:
        response = httpx.put(
            f"{served.url}/api/v1/ingest",
            headers={**served.headers, "Prefer": "respond-async", "X-Request-ID": "submit-1"},
            **_form(docs / WIKI, "d"),
        )
        assert response.status_code == 202, response.text
        job_id = response.json()["job_id"]
        assert stall[0].written.wait(GUARD_SECONDS), "the run never wrote its chunks"
        assert served.job(job_id)["state"] == "running"
        served.server.should_exit = True  # what uvicorn's SIGTERM handler does
        # The server stops within the grace period plus the abort, long before the stall would end.
        served.thread.join(timeout=GUARD_SECONDS / 2)
        assert not served.thread.is_alive()
    runtime = served.app.state.runtime
    job = runtime.jobs.get(job_id)
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
    stored = _stored(settings, "d")
    assert sorted(record.point_id for record in stored) == before
    assert {record.payload["meta"]["ingest_state"] for record in stored} == {"live"}

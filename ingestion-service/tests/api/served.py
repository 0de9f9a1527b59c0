"""The ingestion app on a real uvicorn server in a thread, for tests of sockets, disconnects and shutdown.

Runs are held inside the pipeline (a writer that stalls until the run is stopped, or a commit
gate), never timed; every wait gives up after ``GUARD_SECONDS``, failing the test.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import httpx
import uvicorn
from fastapi import FastAPI
from haystack import Document, component
from qdrant_client import models

from ingestion_service.indexing.assembly import PipelineParts
from ingestion_service.main import create_app, server_config
from ingestion_service.run_control import checkpoint
from ingestion_service.runtime import ServiceHooks
from ingestion_service.settings import Settings
from rag_runtime.store import PointRecord, close_store, match, open_store
from shared_contract import MetaKey

GUARD_SECONDS = 60
FINAL_JOB_STATES = frozenset({"succeeded", "failed", "aborted"})


@component
class WriteThenStall:
    """The real writer, then a stall that only the run's abort ends."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.written = threading.Event()

    @component.output_types(documents_written=int)
    def run(self, documents: list[Document], multilingual: dict[str, list[float]] | None = None) -> dict[str, int]:
        self.writer.run(documents=documents, multilingual=multilingual)
        self.written.set()
        deadline = time.monotonic() + GUARD_SECONDS
        while time.monotonic() < deadline:
            checkpoint()
            time.sleep(0.01)
        raise AssertionError("the run was never stopped")


class StallingWriter:
    """A ``customize_parts`` hook that puts :class:`WriteThenStall` in place of the pipeline's writer."""

    def __init__(self) -> None:
        self._stalls: list[WriteThenStall] = []

    def __call__(self, parts: PipelineParts) -> PipelineParts:
        self._stalls.append(WriteThenStall(parts.writer))
        return replace(parts, writer=self._stalls[-1])

    @property
    def stall(self) -> WriteThenStall:
        assert self._stalls, "the pipeline was never built"
        return self._stalls[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def served_overrides(tmp_path: Path, prefix: str) -> dict[str, Any]:
    """Settings of a served app: its own collection and scratch, a free port, a 1 s shutdown grace."""
    return {
        "qdrant_index": f"{prefix}_{tmp_path.name[-12:].replace('-', '_')}",
        "scratch_dir": tmp_path / "scratch",
        "host": "127.0.0.1",
        "port": free_port(),
        "shutdown_grace_seconds": 1,
    }


@dataclass
class Served:
    url: str
    port: int
    app: FastAPI
    server: uvicorn.Server
    thread: threading.Thread
    headers: dict[str, str]

    def metrics(self) -> str:
        return httpx.get(f"{self.url}/metrics", headers=self.headers).text

    def wait_for_metric(self, line: str) -> str:
        deadline = time.monotonic() + GUARD_SECONDS
        while time.monotonic() < deadline:
            text = self.metrics()
            if line in text:
                return text
            time.sleep(0.05)
        raise AssertionError(f"{line!r} never appeared")

    def job(self, job_id: str) -> dict[str, Any]:
        response = httpx.get(f"{self.url}/api/v1/ingest/jobs/{job_id}", headers=self.headers)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def poll(self, job_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + GUARD_SECONDS
        while (body := self.job(job_id))["state"] not in FINAL_JOB_STATES:
            assert time.monotonic() < deadline, f"job never finished: {body}"
            time.sleep(0.02)
        return body

    def raw_ingest_request(self, path: Path, file_id: str, extra_headers: dict[str, str] | None = None) -> bytes:
        """The bytes of a multipart ``PUT /api/v1/ingest``, to send (or cut short) on a raw socket."""
        request = httpx.Request(
            "PUT",
            f"{self.url}/api/v1/ingest",
            headers={**self.headers, **(extra_headers or {})},
            **ingest_form(path, file_id),
        )
        body = request.read()
        head = f"PUT /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n" + "".join(
            f"{name}: {value}\r\n" for name, value in request.headers.items() if name.lower() != "host"
        )
        return head.encode() + b"\r\n" + body


def ingest_form(path: Path, file_id: str) -> dict[str, Any]:
    """httpx ``data`` and ``files`` of the fork's multipart ingest of ``path`` into ``file-<file_id>``.

    ``force``: these tests stop runs mid-pipeline, so re-sent bytes must run it, not answer unchanged.
    """
    return {
        "data": {
            "file_id": file_id,
            "filename": path.name,
            "collection_name": f"file-{file_id}",
            "user_id": "u1",
            "force": "true",
        },
        "files": {"file": (path.name, path.read_bytes())},
    }


@contextmanager
def serving(settings: Settings, hooks: ServiceHooks) -> Iterator[Served]:
    """The app on uvicorn in a thread, ready; asked to exit (and joined) on the way out."""
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


def stored_points(settings: Settings, file_id: str) -> list[PointRecord]:
    """Every point of the file, pending ones too, read from the store after the server has stopped."""

    async def read() -> list[PointRecord]:
        store = open_store(settings)
        try:
            records, _ = await store.scroll(models.Filter(must=[match(MetaKey.FILE_ID, file_id)]), limit=10_000)
            return list(records)
        finally:
            await close_store(store)

    return anyio.run(read)

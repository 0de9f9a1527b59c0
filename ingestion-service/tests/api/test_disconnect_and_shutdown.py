"""Clients that go away and servers that stop, on a real uvicorn server (real sockets, real signals' effect).

The pipeline under test writes its chunks (pending) and then stalls until the run is stopped, so
every test shows that a stopped run removes what it wrote, never commits, and keeps the previous
version live. The stall only ends through the service's own abort; if that never comes the stall
gives up after 60 s and the test fails.
"""

from __future__ import annotations

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
from haystack import Document, component
from qdrant_client import models

from ingestion_service.main import create_app, server_config
from ingestion_service.pipeline.indexing import PipelineParts
from ingestion_service.pipeline.run_control import checkpoint
from ingestion_service.runtime import ServiceHooks
from ingestion_service.settings import Settings
from shared_contract import ContractEmbedder, MetaKey
from shared_contract.store import PointRecord, close_store, match, open_store

if TYPE_CHECKING:
    from ..conftest import AppFactory, MakeSettings, Points, Upload  # noqa: TID252

WIKI = "md/docling__wiki.md"
STALL_LIMIT_S = 60


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
        deadline = time.monotonic() + STALL_LIMIT_S
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
    settings: Settings
    server: uvicorn.Server
    thread: threading.Thread
    stall: WriteThenStall
    api_key: str

    def metrics(self) -> str:
        return httpx.get(f"{self.url}/metrics", headers={"Authorization": f"Bearer {self.api_key}"}).text

    def wait_for_metric(self, line: str) -> str:
        deadline = time.monotonic() + STALL_LIMIT_S
        while time.monotonic() < deadline:
            text = self.metrics()
            if line in text:
                return text
            time.sleep(0.05)
        raise AssertionError(f"{line!r} never appeared")


@contextmanager
def serving(settings: Settings, embedder: ContractEmbedder) -> Iterator[Served]:
    stall: list[WriteThenStall] = []

    def stalling(parts: PipelineParts) -> PipelineParts:
        stall.append(WriteThenStall(parts.writer))
        return replace(parts, writer=stall[0])

    app = create_app(settings, hooks=ServiceHooks(embedder=embedder, customize_parts=stalling))
    server = uvicorn.Server(server_config(app, settings))
    thread = threading.Thread(target=server.run, name="uvicorn-under-test")
    thread.start()
    url = f"http://127.0.0.1:{settings.port}"
    deadline = time.monotonic() + STALL_LIMIT_S
    while True:
        try:
            if httpx.get(f"{url}/health/ready").status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "server never became ready"
        time.sleep(0.05)
    served = Served(url, settings.port, settings, server, thread, stall[0], settings.api_key.get_secret_value())
    try:
        yield served
    finally:
        server.should_exit = True
        thread.join(timeout=STALL_LIMIT_S)


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


def _request_bytes(served: Served, path: Path, file_id: str) -> bytes:
    request = httpx.Request(
        "PUT",
        f"{served.url}/api/v1/ingest",
        data={"file_id": file_id, "filename": path.name, "collection_name": f"file-{file_id}", "user_id": "u1"},
        files={"file": (path.name, path.read_bytes())},
        headers={"Authorization": f"Bearer {served.api_key}"},
    )
    body = request.read()
    head = f"PUT /api/v1/ingest HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in request.headers.items() if name.lower() != "host"
    )
    return head.encode() + b"\r\n" + body


@pytest.fixture
def previous_version(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, tmp_path: Path
) -> tuple[dict[str, Any], list[str]]:
    """Settings of a served app whose collection already holds a committed version of file 'd'."""
    overrides: dict[str, Any] = {
        "qdrant_index": f"served_{tmp_path.name[-12:].replace('-', '_')}",
        "scratch_dir": tmp_path / "scratch",
        "host": "127.0.0.1",
        "port": _free_port(),
        "shutdown_grace_seconds": 1,
    }
    with app_client(qdrant_index=overrides["qdrant_index"]) as client:
        assert upload(client, docs / WIKI, file_id="d").status_code == 200
        before = sorted(record.point_id for record in points(client, file_id="d"))
    return overrides, before


def _assert_previous_version_only(settings: Settings, before: list[str]) -> None:
    stored = _stored(settings, "d")
    assert sorted(record.point_id for record in stored) == before
    assert {record.payload["meta"]["ingest_state"] for record in stored} == {"live"}


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]


def test_client_disconnect_mid_pipeline_aborts_the_run(
    make_test_settings: MakeSettings,
    embedder: ContractEmbedder,
    docs: Path,
    previous_version: tuple[dict[str, Any], list[str]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    overrides, before = previous_version
    settings = make_test_settings(**overrides)
    with caplog.at_level(logging.INFO), serving(settings, embedder) as served:
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.sendall(_request_bytes(served, docs / WIKI, "d"))
            assert served.stall.written.wait(STALL_LIMIT_S), "the run never wrote its chunks"
        text = served.wait_for_metric('ingest_requests_total{code="CLIENT_DISCONNECTED",outcome="aborted"} 1.0')
        assert 'outcome="failure"' not in text
        assert 'outcome="success"' not in text
        assert list(overrides["scratch_dir"].glob("proc-*/ingest-*")) == []
    assert not served.thread.is_alive()
    assert _errors(caplog) == []
    assert any("ingest aborted (CLIENT_DISCONNECTED)" in record.getMessage() for record in caplog.records)
    _assert_previous_version_only(settings, before)


def test_client_disconnect_mid_upload_is_logged_and_counted_as_a_disconnect(
    make_test_settings: MakeSettings,
    embedder: ContractEmbedder,
    docs: Path,
    previous_version: tuple[dict[str, Any], list[str]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    overrides, before = previous_version
    settings = make_test_settings(**overrides)
    with caplog.at_level(logging.INFO), serving(settings, embedder) as served:
        request = _request_bytes(served, docs / WIKI, "d")
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.sendall(request[: len(request) - 2000])  # headers promise the full length
        text = served.wait_for_metric('ingest_requests_total{code="CLIENT_DISCONNECTED",outcome="aborted"} 1.0')
        assert 'outcome="failure"' not in text
        assert not served.stall.written.is_set()
        assert list(overrides["scratch_dir"].glob("proc-*/ingest-*")) == []
    assert _errors(caplog) == []
    assert not [record for record in caplog.records if record.exc_info]
    _assert_previous_version_only(settings, before)


def test_shutdown_aborts_a_running_ingest_after_the_grace_period(
    make_test_settings: MakeSettings,
    embedder: ContractEmbedder,
    docs: Path,
    previous_version: tuple[dict[str, Any], list[str]],
) -> None:
    overrides, before = previous_version
    settings = make_test_settings(**overrides)
    with serving(settings, embedder) as served, socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.sendall(_request_bytes(served, docs / WIKI, "d"))
        assert served.stall.written.wait(STALL_LIMIT_S), "the run never wrote its chunks"
        served.server.should_exit = True  # what uvicorn's SIGTERM handler does
        # The server stops within the grace period plus the abort, long before the stall would end.
        served.thread.join(timeout=STALL_LIMIT_S / 2)
        assert not served.thread.is_alive()
    assert not list(overrides["scratch_dir"].glob("proc-*"))
    _assert_previous_version_only(settings, before)

"""Clients that go away and servers that stop, on a real uvicorn server (real sockets, real signals' effect).

The pipeline under test writes its chunks (pending) and then stalls until the run is stopped, so
every test shows that a stopped run removes what it wrote, never commits, and keeps the previous
version live. The stall only ends through the service's own abort; if that never comes the stall
gives up after 60 s and the test fails.
"""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ingestion_service.runtime import ServiceHooks
from ingestion_service.settings import Settings
from rag_runtime.embedding import ContractEmbedder
from rag_runtime.http import hint_for

from .served import GUARD_SECONDS, StallingWriter, served_overrides, serving, stored_points  # noqa: TID252

if TYPE_CHECKING:
    from ..conftest import AppFactory, MakeSettings, Points, Upload  # noqa: TID252

WIKI = "md/docling__wiki.md"


@pytest.fixture
def previous_version(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, tmp_path: Path
) -> tuple[dict[str, Any], list[str]]:
    """Settings of a served app whose collection already holds a committed version of file 'd'."""
    overrides = served_overrides(tmp_path, "served")
    with app_client(qdrant_index=overrides["qdrant_index"]) as client:
        assert upload(client, docs / WIKI, file_id="d").status_code == 200
        before = sorted(record.point_id for record in points(client, file_id="d"))
    return overrides, before


def _assert_previous_version_only(settings: Settings, before: list[str]) -> None:
    stored = stored_points(settings, "d")
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
    writer = StallingWriter()
    with (
        caplog.at_level(logging.INFO),
        serving(settings, ServiceHooks(embedder=embedder, customize_parts=writer)) as served,
    ):
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.sendall(served.raw_ingest_request(docs / WIKI, "d"))
            assert writer.stall.written.wait(GUARD_SECONDS), "the run never wrote its chunks"
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
    writer = StallingWriter()
    with (
        caplog.at_level(logging.INFO),
        serving(settings, ServiceHooks(embedder=embedder, customize_parts=writer)) as served,
    ):
        request = served.raw_ingest_request(docs / WIKI, "d")
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.sendall(request[: len(request) - 2000])  # headers promise the full length
        text = served.wait_for_metric('ingest_requests_total{code="CLIENT_DISCONNECTED",outcome="aborted"} 1.0')
        assert 'outcome="failure"' not in text
        assert not writer.stall.written.is_set()
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
    writer = StallingWriter()
    hooks = ServiceHooks(embedder=embedder, customize_parts=writer)
    with serving(settings, hooks) as served, socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.sendall(served.raw_ingest_request(docs / WIKI, "d"))
        assert writer.stall.written.wait(GUARD_SECONDS), "the run never wrote its chunks"
        served.server.should_exit = True  # what uvicorn's SIGTERM handler does
        # The server stops within the grace period plus the abort, long before the stall would end.
        served.thread.join(timeout=GUARD_SECONDS / 2)
        assert not served.thread.is_alive()
        answer = _read_until_closed(sock)
    # The cancelled request is answered in the error shape, not with uvicorn's plain-text 500.
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 503 Service Unavailable"
    error = json.loads(body)
    assert (error["code"], error["status"]) == ("SHUTTING_DOWN", False)
    assert error["hint"] == hint_for("SHUTTING_DOWN")
    assert f"x-request-id: {error['request_id']}".encode() in head.lower()
    assert not list(overrides["scratch_dir"].glob("proc-*"))
    _assert_previous_version_only(settings, before)


def _read_until_closed(sock: socket.socket) -> bytes:
    sock.settimeout(GUARD_SECONDS)
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received

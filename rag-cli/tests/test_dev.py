"""``rag dev`` as a subprocess, the way a test fixture starts it: ready line, real use, clean stop."""

from __future__ import annotations

import io
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from rag_cli.commands import run_ingest, run_search
from rag_cli.config import Endpoint
from rag_cli.dev import DevOptions, server_configs
from retrieval_agent.main import SHUTDOWN_GRACE_SECONDS

from .conftest import INGESTION_KEY, RETRIEVAL_KEY  # noqa: TID252

pytestmark = [pytest.mark.slow, pytest.mark.models]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(tmp_path: Path, *ports: int, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "rag_cli",
        "dev",
        "--ingestion-port",
        str(ports[0]),
        "--retrieval-port",
        str(ports[1]),
        "--qdrant-path",
        str(tmp_path / "qdrant"),
        "--ready-timeout",
        "120",
        "--log-level",
        "warning",
    ]
    environment = {**os.environ, "INGESTION_API_KEY": INGESTION_KEY, "RETRIEVAL_API_KEY": RETRIEVAL_KEY, **(env or {})}
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment, cwd=tmp_path
    )


def exit_output(process: subprocess.Popen[str]) -> tuple[str, str]:
    """stdout and stderr of a run expected to stop by itself (killed when it does not)."""
    try:
        return process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()


def wait_for_line(process: subprocess.Popen[str], prefix: str, timeout: float = 120) -> str:
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not selector.select(timeout=1):
            if process.poll() is not None:
                break
            continue
        line = process.stdout.readline()
        if line.startswith(prefix):
            return line.strip()
        if not line and process.poll() is not None:
            break
    stderr = process.stderr.read() if process.stderr and process.poll() is not None else ""
    raise AssertionError(f"no {prefix!r} line; exit={process.poll()} stderr={stderr[-2000:]}")


def test_dev_serves_both_apps_at_its_log_level_and_stops_cleanly(tmp_path: Path) -> None:
    ingestion_port, retrieval_port = free_port(), free_port()
    process = start(tmp_path, ingestion_port, retrieval_port)
    try:
        ready = wait_for_line(process, "ready:")
        assert (
            ready == f"ready: ingestion=http://127.0.0.1:{ingestion_port} retrieval=http://127.0.0.1:{retrieval_port}"
        )
        doc = tmp_path / "notes.md"
        doc.write_text(
            "# Zebras\n\nThe zebra crossing in Aarhus was repainted on Tuesday with bright yellow stripes.\n"
        )
        out = Console(file=io.StringIO(), width=200)
        assert (
            run_ingest(
                Endpoint(f"http://127.0.0.1:{ingestion_port}", INGESTION_KEY),
                [doc],
                collection="kb-dev",
                user_id="u",
                concurrency=1,
                console=out,
            )
            == 0
        )
        buffer = io.StringIO()
        assert (
            run_search(
                Endpoint(f"http://127.0.0.1:{retrieval_port}", RETRIEVAL_KEY),
                "zebra crossing",
                collections=["kb-dev"],
                k=3,
                console=Console(file=buffer, width=300),
            )
            == 0
        )
        assert "repainted on Tuesday" in buffer.getvalue()
        assert "notes.md" in buffer.getvalue()
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert process.returncode == 0
    assert process.stdout is not None
    assert process.stderr is not None
    output = process.stdout.read() + process.stderr.read()
    assert "rag dev: stopped" in output
    # --log-level warning: no INFO line from either service (the search line was one per request).
    assert " INFO " not in output


def test_dev_exits_non_zero_when_a_port_is_taken_and_logs_why_as_log_format_says(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        process = start(tmp_path, free_port(), port, env={"LOG_FORMAT": "json"})
        stdout, stderr = exit_output(process)
    assert process.returncode == 1
    assert "rag dev: start-up failed" in stderr
    assert "retrieval-agent" in stderr
    logged = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert any("address already in use" in line["message"] for line in logged), stderr
    assert all(line.startswith("rag dev: ") for line in stdout.splitlines()), stdout


class _AlwaysReady(BaseHTTPRequestHandler):
    """Another program on the port, answering 200 to everything (readiness probes included)."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_dev_is_never_ready_on_ports_another_program_serves(tmp_path: Path) -> None:
    others = [ThreadingHTTPServer(("127.0.0.1", 0), _AlwaysReady) for _ in range(2)]
    for other in others:
        threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        process = start(tmp_path, *(other.server_address[1] for other in others))
        stdout, stderr = exit_output(process)
    finally:
        for other in others:
            other.shutdown()
            other.server_close()
    assert process.returncode == 1
    assert "ready:" not in stdout
    assert "rag dev: start-up failed:" in stderr
    assert "stopped during start-up" in stderr  # its bind failed: the port is the other program's


def test_dev_fails_fast_when_another_process_holds_the_store(tmp_path: Path) -> None:
    first = start(tmp_path, free_port(), free_port())
    try:
        wait_for_line(first, "ready:")
        second = start(tmp_path, free_port(), free_port())
        _, stderr = exit_output(second)
    finally:
        first.send_signal(signal.SIGTERM)
        try:
            first.wait(timeout=30)
        except subprocess.TimeoutExpired:
            first.kill()
            raise
    # Said as soon as a readiness probe reports the held lock, not after `start`'s 120 s ready timeout.
    assert second.returncode == 1
    assert f"rag dev: start-up failed: the embedded store at {tmp_path / 'qdrant'} is in use by another process" in (
        stderr
    )


def test_both_servers_bound_their_graceful_shutdown(tmp_path: Path) -> None:
    # Without a bound on the retrieval server, a chat stream that never ends kept SIGTERM waiting.
    options = DevOptions("127.0.0.1", 8001, 8002, tmp_path / "qdrant", ready_timeout=5, log_level="warning")
    ingestion_app = SimpleNamespace(state=SimpleNamespace(settings=SimpleNamespace(shutdown_grace_seconds=7.0)))
    ingestion, retrieval = server_configs(options, ingestion_app, object())
    assert (ingestion.port, ingestion.timeout_graceful_shutdown) == (8001, 7.0)
    assert (retrieval.port, retrieval.timeout_graceful_shutdown) == (8002, SHUTDOWN_GRACE_SECONDS)

"""A download from an S3 endpoint that trickles stops when the service aborts it (shutdown)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ingestion_service.adapters.s3 import CHUNK_BYTES, S3Source, build_s3_client
from ingestion_service.errors import ShuttingDownError

if TYPE_CHECKING:
    from ..conftest import MakeSettings  # noqa: TID252

OBJECT_BYTES = 5 * 1024 * 1024


class _TrickleServer(ThreadingHTTPServer):
    daemon_threads = True
    sent_first: threading.Event
    send_more: threading.Event
    stopping: threading.Event


class _TrickleHandler(BaseHTTPRequestHandler):
    """GET: announces 5 MiB, sends two pieces, one more when the test says so, then stalls."""

    server: _TrickleServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(OBJECT_BYTES))
        self.send_header("ETag", '"abc"')
        self.end_headers()
        try:
            self.wfile.write(b"x" * (2 * CHUNK_BYTES))
            self.wfile.flush()
            self.server.sent_first.set()
            self.server.send_more.wait()
            self.wfile.write(b"x" * CHUNK_BYTES)
            self.wfile.flush()
            self.server.stopping.wait()  # the rest never comes
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client closed the body

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def trickle_server() -> Any:
    server = _TrickleServer(("127.0.0.1", 0), _TrickleHandler)
    server.sent_first, server.send_more, server.stopping = threading.Event(), threading.Event(), threading.Event()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.send_more.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_abort_stops_a_trickling_download_and_removes_the_staged_file(
    trickle_server: _TrickleServer, make_test_settings: MakeSettings, tmp_path: Path
) -> None:
    port = trickle_server.server_address[1]
    settings = make_test_settings(s3_endpoint_url=f"http://127.0.0.1:{port}")
    source = S3Source(build_s3_client(settings))
    destination = tmp_path / "source.pdf"
    outcome: list[BaseException | int] = []

    def download() -> None:
        try:
            outcome.append(source.download("bucket", "key", destination, max_bytes=OBJECT_BYTES))
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=download, daemon=True)
    worker.start()
    try:
        assert trickle_server.sent_first.wait(timeout=30)
        source.abort()
        trickle_server.send_more.set()  # one more piece arrives; the stalled rest never does
        worker.join(timeout=30)
        assert not worker.is_alive(), "the download did not stop after abort()"
        assert len(outcome) == 1
        assert isinstance(outcome[0], ShuttingDownError)
        assert not destination.exists()
        # Later downloads are refused at once (the service is stopping).
        with pytest.raises(ShuttingDownError):
            source.download("bucket", "key", tmp_path / "other", max_bytes=OBJECT_BYTES)
    finally:
        source.close()

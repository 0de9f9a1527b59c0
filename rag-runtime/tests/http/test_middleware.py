"""The edge on a real uvicorn server: a request the server cancels at shutdown gets the error shape."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from pydantic import SecretStr

from rag_runtime.http import BodyLimit, EdgeMiddleware, hint_for, install_framework_error_handlers, public_paths

API_KEY = "k" * 40
GUARD_SECONDS = 30


def _stalling_app(entered: threading.Event) -> FastAPI:
    """Two routes that never end on their own: one before its response starts, one mid-stream."""
    app = FastAPI()
    install_framework_error_handlers(app)

    @app.get("/stall")
    async def stall() -> dict[str, str]:
        entered.set()
        await asyncio.Event().wait()
        return {}

    @app.get("/stream")
    async def stream() -> StreamingResponse:
        async def parts() -> AsyncIterator[bytes]:
            yield b"first part\n"
            entered.set()
            await asyncio.Event().wait()

        return StreamingResponse(parts(), media_type="text/plain")

    app.add_middleware(
        EdgeMiddleware,
        api_key=SecretStr(API_KEY),
        public_paths=public_paths(app),
        body_limit=lambda _path: BodyLimit(1000, "MAX_REQUEST_BYTES"),
    )
    return app


@contextmanager
def _served(app: FastAPI) -> Iterator[tuple[uvicorn.Server, int]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    config = uvicorn.Config(app, host="127.0.0.1", port=port, timeout_graceful_shutdown=1, log_config=None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run)
    thread.start()
    deadline = time.monotonic() + GUARD_SECONDS
    while not server.started:
        assert time.monotonic() < deadline, "the server never started"
        time.sleep(0.02)
    try:
        yield server, port
    finally:
        server.should_exit = True
        thread.join(GUARD_SECONDS)
        assert not thread.is_alive()


def _request_then_shut_down(path: str) -> bytes:
    """Send GET ``path``, stop the server once the route runs (as SIGTERM does), read until closed."""
    entered = threading.Event()
    with _served(_stalling_app(entered)) as (server, port), socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {API_KEY}\r\n\r\n".encode())
        assert entered.wait(GUARD_SECONDS), "the route never ran"
        server.should_exit = True
        sock.settimeout(GUARD_SECONDS)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_a_request_cancelled_by_the_servers_shutdown_is_answered_503_shutting_down() -> None:
    head, _, body = _request_then_shut_down("/stall").partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 503 Service Unavailable"
    error = json.loads(body)
    assert error == {
        "status": False,
        "error": "The service was shutting down and stopped this request before it finished.",
        "code": "SHUTTING_DOWN",
        "hint": hint_for("SHUTTING_DOWN"),
        "request_id": error["request_id"],
    }
    assert f"x-request-id: {error['request_id']}".encode() in head.lower()


def test_a_response_already_streaming_at_shutdown_is_cut_off_not_followed_by_an_error() -> None:
    received = _request_then_shut_down("/stream")
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"SHUTTING_DOWN" not in received

"""A scripted OpenAI-compatible model for benchmarks, served from its own process (as a remote model
would be: it does not share the load generator's GIL)."""

from __future__ import annotations

import json
import multiprocessing
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from benchmarks.stack import free_port

# The answer body (JSON bytes) to one request body.
Reply = Callable[[dict[str, Any]], bytes]


def _handler(reply: Reply) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        """``POST /v1/chat/completions`` answered at once by ``reply``."""

        protocol_version = "HTTP/1.1"  # keep-alive, as a real proxy
        # Headers and body are two writes: without TCP_NODELAY, Nagle + delayed ACK add ~40 ms each.
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            payload = reply(json.loads(self.rfile.read(length) or b"{}"))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: ARG002 - silence the access log
            return

    return Handler


def _serve(port: int, reply: Reply) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(reply))
    server.daemon_threads = True
    server.serve_forever()


@contextmanager
def scripted_model(reply: Reply) -> Iterator[str]:
    """``reply`` served on a loopback port from a forked process; yields the /v1 base URL."""
    port = free_port()
    # fork: the child needs no import path (a spawned one could not import ``benchmarks`` under pytest);
    # this runs before any thread of ours starts.
    process = multiprocessing.get_context("fork").Process(target=_serve, args=(port, reply), daemon=True)
    process.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or not process.is_alive():
                    raise RuntimeError("the scripted model server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.join(timeout=10)

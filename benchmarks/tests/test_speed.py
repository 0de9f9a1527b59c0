"""benchmarks.speed's load test: at c=1 the lean client and httpx take turns on every query, against a
scripted /search service on loopback that logs which client sent what."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from benchmarks import speed
from benchmarks.stack import INGESTION_KEY, RETRIEVAL_KEY, Stack


@contextmanager
def scripted_search(arrivals: list[tuple[str, str]]) -> Iterator[str]:
    """A /search service logging (client, query); the client is told apart by its User-Agent."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            assert self.headers["Authorization"] == f"Bearer {RETRIEVAL_KEY}"
            client = "httpx" if self.headers["User-Agent"].startswith("python-httpx") else "lean"
            arrivals.append((client, body["queries"][0]))
            data = b'{"documents": [["a chunk"]], "metadatas": [[{"file_id": "f"}]], "distances": [[0.5]]}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def stack_at(url: str) -> Stack:
    return Stack(ingestion_url=url, retrieval_url=url, ingestion_key=INGESTION_KEY, retrieval_key=RETRIEVAL_KEY)


def test_at_concurrency_one_each_query_goes_through_both_clients_in_turns() -> None:
    queries = ["q0", "q1", "q2"]
    arrivals: list[tuple[str, str]] = []
    with scripted_search(arrivals) as url:
        summary = asyncio.run(speed.load_test(stack_at(url), "tenant", queries, 1, 4))
    warm_up = [("lean", query) for query in queries] + [("httpx", query) for query in queries]
    timed = [
        ("lean", "q0"),
        ("httpx", "q0"),
        ("httpx", "q1"),
        ("lean", "q1"),
        ("lean", "q2"),
        ("httpx", "q2"),
        ("httpx", "q0"),
        ("lean", "q0"),
    ]
    assert arrivals == warm_up + timed
    assert summary["requests"] == 4  # the lean client's searches; httpx's are the reference
    assert summary["httpx_p50_ms"] > 0
    assert summary["httpx_p95_ms"] >= summary["httpx_p50_ms"]


def test_above_concurrency_one_only_the_lean_client_searches() -> None:
    arrivals: list[tuple[str, str]] = []
    with scripted_search(arrivals) as url:
        summary = asyncio.run(speed.load_test(stack_at(url), "tenant", ["q0", "q1"], 2, 6))
    assert {client for client, _ in arrivals} == {"lean"}
    assert len(arrivals) == 2 + 6  # the warm-up, then the load
    assert summary["requests"] == 6
    assert "httpx_p50_ms" not in summary

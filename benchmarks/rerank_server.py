"""A scripted local rerank endpoint, for timing the rerank stage when no cross-encoder is available.

It scores by query-term overlap (no model), so it measures the pipeline's cost around a reranker
(the candidate fetch, the HTTP round trip, the re-sort), not a cross-encoder's quality or speed.
Speaks the Cohere/Jina shape (POST /v1/rerank {query, documents, top_n} -> {results: [{index,
relevance_score}]}) and the TEI shape (POST /rerank {query, texts} -> [{index, score}]).
An optional fixed delay per call stands in for a model's inference time.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_WORD = re.compile(r"\w+")


def overlap_score(query: str, text: str) -> float:
    terms = set(_WORD.findall(query.lower()))
    if not terms:
        return 0.0
    words = set(_WORD.findall(text.lower()))
    return len(terms & words) / len(terms)


def rerank_body(body: dict[str, Any]) -> tuple[Any, int]:
    query = str(body.get("query", ""))
    if "texts" in body:  # TEI
        texts = [str(t) for t in body["texts"]]
        scored = sorted(
            ({"index": i, "score": overlap_score(query, t)} for i, t in enumerate(texts)),
            key=lambda r: -float(r["score"]),
        )
        return scored, len(texts)
    documents = body.get("documents") or []
    texts = [str(d.get("text", "")) if isinstance(d, dict) else str(d) for d in documents]
    top_n = int(body.get("top_n") or len(texts))
    results = sorted(
        ({"index": i, "relevance_score": overlap_score(query, t)} for i, t in enumerate(texts)),
        key=lambda r: -float(r["relevance_score"]),
    )[:top_n]
    return {"model": body.get("model", "scripted-overlap"), "results": results}, len(texts)


class RerankServer:
    """Serve on a free loopback port in a daemon thread; use as a context manager."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.calls = 0
        self.documents = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: ARG002 - quiet, stdlib signature
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") not in ("/v1/rerank", "/rerank"):
                    self.send_error(404)
                    return
                payload, count = rerank_body(body)
                server.calls += 1
                server.documents += count
                if server.delay_s:
                    time.sleep(server.delay_s)
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> RerankServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

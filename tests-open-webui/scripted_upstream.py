"""A scripted OpenAI-compatible upstream on loopback: the only "model provider" stock Open WebUI sees.

- ``GET /v1/models``: one chat model (``MODEL_ID``) and one embedding model (``EMBEDDING_MODEL``);
- ``POST /v1/chat/completions``: answers ``ANSWER`` (as SSE chunks when ``"stream": true``), and
  records every request body, so a test can read the context the model was given;
- ``POST /v1/embeddings``: deterministic vectors (a hash of each input), and records every call,
  so Open WebUI's own embedding of uploads runs offline and a test can see whether Open WebUI
  embedded a query (its own retrieval) while a chat ran.

Every request is recorded with its path and its caller, so "nothing else was called" can be
asserted too. Two keys are accepted, one per caller, and each call records whose it was:
``api_key`` is Open WebUI's (its direct connection and its embedding engine), ``agent_key`` the
retrieval agent's (CHAT_UPSTREAM_API_KEY: its /v1/chat/completions and /v1/models call through).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_ID = "scripted-model"
EMBEDDING_MODEL = "scripted-embedding"
EMBEDDING_DIMENSIONS = 64
ANSWER = "The answer is on page 3 [1]."
# Who sent a request (``Call.caller``), told apart by the key it came with.
OPEN_WEBUI = "open-webui"
RETRIEVAL_AGENT = "retrieval-agent"


@dataclass
class Call:
    """One request the upstream answered."""

    at: float  # time.monotonic() when it arrived
    method: str
    path: str
    body: dict[str, Any]
    authorization: str | None
    caller: str | None  # OPEN_WEBUI or RETRIEVAL_AGENT by the key sent; None for a wrong key (answered 401)


@dataclass
class Recorder:
    calls: list[Call] = field(default_factory=lambda: list[Call]())
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, call: Call) -> None:
        with self.lock:
            self.calls.append(call)

    def since(self, mark: int, path: str | None = None, caller: str | None = None) -> list[Call]:
        """The calls after the first ``mark`` ones (``mark = len(recorder)`` taken earlier), of
        ``path`` and ``caller`` when given."""
        with self.lock:
            later = self.calls[mark:]
        return [
            call for call in later if (path is None or call.path == path) and (caller is None or call.caller == caller)
        ]

    def __len__(self) -> int:
        with self.lock:
            return len(self.calls)


def embedding(text: str) -> list[float]:
    """A deterministic unit vector for ``text`` (no model: only Open WebUI's own index uses it)."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    raw = [((digest[i % len(digest)] ^ (i * 31)) % 255) / 127.0 - 1.0 for i in range(EMBEDDING_DIMENSIONS)]
    norm = sum(value * value for value in raw) ** 0.5 or 1.0
    return [value / norm for value in raw]


def _completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def _stream(content: str) -> bytes:
    """``content`` as SSE chunks (a word per chunk), a final chunk with ``finish_reason``, then ``[DONE]``."""
    base = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL_ID,
    }
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": word} for word in re.findall(r"\S+\s*", content)]
    chunks = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks).encode() + b"data: [DONE]\n\n"


class _Server(ThreadingHTTPServer):
    # Open WebUI embeds a document's chunks concurrently (ENABLE_ASYNC_EMBEDDING): the default
    # backlog of 5 would reset connections.
    request_queue_size = 512


class ScriptedUpstream:
    """The server, in a thread, on a free loopback port; ``url`` is its ``.../v1`` base."""

    def __init__(self, api_key: str, agent_key: str, answer: str = ANSWER) -> None:
        assert api_key != agent_key, "each caller needs its own key"
        self.api_key = api_key
        self.agent_key = agent_key
        self.answer = answer
        callers = {f"Bearer {api_key}": OPEN_WEBUI, f"Bearer {agent_key}": RETRIEVAL_AGENT}
        self.recorder = Recorder()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True

            def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client may have given up
                    self.wfile.write(payload)

            def _record(self, body: dict[str, Any]) -> bool:
                authorization = self.headers.get("Authorization")
                caller = callers.get(authorization or "")
                upstream.recorder.add(Call(time.monotonic(), self.command, self.path, body, authorization, caller))
                if caller is None:
                    self._send(401, b'{"error": {"message": "bad key"}}')
                    return False
                return True

            def do_GET(self) -> None:
                if not self._record({}):
                    return
                if self.path.rstrip("/") == "/v1/models":
                    models = [
                        {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "scripted"},
                        {"id": EMBEDDING_MODEL, "object": "model", "created": 0, "owned_by": "scripted"},
                    ]
                    self._send(200, json.dumps({"object": "list", "data": models}).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                if not self._record(body):
                    return
                path = self.path.rstrip("/")
                if path == "/v1/embeddings":
                    inputs = body.get("input")
                    texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
                    data = [
                        {"object": "embedding", "index": i, "embedding": embedding(str(text))}
                        for i, text in enumerate(texts)
                    ]
                    payload = {"object": "list", "data": data, "model": EMBEDDING_MODEL, "usage": {"prompt_tokens": 1}}
                    self._send(200, json.dumps(payload).encode())
                elif path == "/v1/chat/completions":
                    if body.get("stream"):
                        self._send(200, _stream(upstream.answer), "text/event-stream")
                    else:
                        self._send(200, json.dumps(_completion(upstream.answer)).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-upstream", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> ScriptedUpstream:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

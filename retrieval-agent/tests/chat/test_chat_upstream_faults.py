"""/v1/chat/completions against misbehaving upstreams and models, over HTTP: a stalling upstream
(CHAT_TIMEOUT), rate-limit headers, secrets in upstream errors, tool arguments a parser chokes on,
an upstream that reports no usage, and control characters in the model name."""

from __future__ import annotations

import io
import itertools
import json
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from rag_runtime.http import REQUEST_FAILED
from rag_runtime.http.logs import log_handler
from rag_runtime.llm import import_litellm
from rag_runtime.store import ChunkStore

from ..conftest import AUTH  # noqa: TID252
from ..scripted_llm import Script, ScriptedLLM, Status, stream_chunks, text, tool_call, tool_results, turn  # noqa: TID252
from .chat_support import UPSTREAM_KEY, chat_body, chat_settings, chunks, sse_events, streamed_text  # noqa: TID252

ChatApi = Callable[..., tuple[TestClient, ScriptedLLM]]


@pytest.fixture
def chat_api(serve: Callable[[Any], str], app_factory: Callable[..., TestClient], seeded: ChunkStore) -> ChatApi:
    def build(script: Script, **overrides: Any) -> tuple[TestClient, ScriptedLLM]:
        llm = ScriptedLLM(script)
        return app_factory(chat_settings(f"{serve(llm.app())}/v1", **overrides), seeded), llm

    return build


@pytest.fixture
def app_on(app_factory: Callable[..., TestClient], seeded: ChunkStore) -> Callable[..., TestClient]:
    """The agent with its chat pointed at ``base_url`` (an upstream this module scripts itself)."""

    def build(base_url: str, **overrides: Any) -> TestClient:
        return app_factory(chat_settings(f"{base_url}/v1", **overrides), seeded)

    return build


def post(client: TestClient, body: dict[str, Any], **headers: str) -> Any:
    return client.post("/v1/chat/completions", json=body, headers={**AUTH, **headers})


def _sse(chunk: dict[str, Any]) -> str:
    return f"data: {json.dumps(chunk)}\n\n"


# -- CHAT_TIMEOUT bounds the whole upstream call -------------------------------------------------------


class Trickle:
    """A raw HTTP/1.1 upstream on loopback that never stops sending: after the request it sends its
    status line, then (``where="headers"``) one header byte or (``where="body"``) one body byte every
    ``every`` seconds, so that no single read ever times out, until ``release`` is set or ``limit``
    bytes went (an agent without a whole-call deadline then gets a 200)."""

    def __init__(self, where: str, *, every: float = 0.05, limit: int = 150) -> None:
        self.where = where
        self.every = every
        self.limit = limit
        self.release = threading.Event()
        self.requests = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def close(self) -> None:
        self.release.set()
        self._listener.close()
        self._thread.join(timeout=5)

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # closed by close()
                return
            with connection:
                self._answer(connection)

    def _answer(self, connection: socket.socket) -> None:
        request = _read_request(connection)
        self.requests += 1
        streamed = b'"stream": true' in request or b'"stream":true' in request
        if streamed:
            body = ("".join(_sse(chunk) for chunk in stream_chunks(text("late"))) + "data: [DONE]\n\n").encode()
            media = b"text/event-stream"
        else:
            body = json.dumps(text("late")).encode()
            media = b"application/json"
        try:
            connection.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: " + media + b"\r\n")
            if self.where == "headers":
                connection.sendall(b"X-Slow: ")
                self._drip(connection, b"a")
                connection.sendall(b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            else:
                # The JSON answer after leading whitespace the client reads byte by byte.
                connection.sendall(b"Content-Length: " + str(self.limit + len(body)).encode() + b"\r\n\r\n")
                sent = self._drip(connection, b" ")
                connection.sendall(b" " * (self.limit - sent) + body)
        except OSError:  # the agent gave up and closed the connection
            return

    def _drip(self, connection: socket.socket, byte: bytes) -> int:
        sent = 0
        while sent < self.limit and not self.release.wait(self.every):
            connection.sendall(byte)
            sent += 1
        return sent


def _read_request(connection: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += connection.recv(65536)
    return body


@pytest.fixture
def trickle() -> Iterator[Callable[[str], Trickle]]:
    servers: list[Trickle] = []

    def start(where: str) -> Trickle:
        servers.append(Trickle(where))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("where", ["headers", "body"])
def test_chat_timeout_bounds_a_whole_answer_that_keeps_trickling_in(
    app_on: Callable[..., TestClient], trickle: Callable[[str], Trickle], where: str
) -> None:
    # LiteLLM's timeout bounds each read: every byte restarted it, and the client waited for minutes.
    upstream = trickle(where)
    client = app_on(upstream.base_url, chat_timeout=0.5)
    response = post(client, chat_body("scripted@kb-a"))
    assert response.status_code == 504, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("api_error", "upstream_timeout")
    assert upstream.requests == 1
    metrics = client.get("/metrics", headers=AUTH).text
    assert 'chat_requests_total{outcome="upstream_error",stream="false"} 1.0' in metrics


def test_chat_timeout_bounds_a_stream_whose_headers_never_end(
    app_on: Callable[..., TestClient], trickle: Callable[[str], Trickle]
) -> None:
    # The request that opens a stream is within CHAT_TIMEOUT too: a 504 before any event, not a late stream.
    upstream = trickle("headers")
    client = app_on(upstream.base_url, chat_timeout=0.5)
    response = post(client, chat_body("scripted@kb-a", stream=True))
    assert response.status_code == 504, response.text
    assert response.json()["error"]["code"] == "upstream_timeout"


# -- CHAT_MAX_UPSTREAM_BYTES bounds what is read of an answer -------------------------------------------

MIB = 1024 * 1024


class Flood:
    """A raw HTTP/1.1 upstream on loopback answering 200 with an answer that goes on for ``total`` bytes:
    a whole completion whose text never ends, or (``stream``) text deltas, or one SSE line that never
    ends. ``sent`` counts the body bytes the client took before it closed the connection (``cut``)."""

    def __init__(self, shape: str, *, total: int = 64 * MIB, declare_length: bool = False) -> None:
        self.shape = shape
        self.total = total
        self.declare_length = declare_length
        self.sent = 0
        self.cut = False
        self.done = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def close(self) -> None:
        self._listener.close()
        self._thread.join(timeout=5)

    def _serve(self) -> None:
        try:
            connection, _ = self._listener.accept()
        except OSError:  # closed by close()
            return
        with connection:
            _read_request(connection)
            self._flood(connection)
        self.done.set()

    def _body(self) -> tuple[bytes, Iterator[bytes]]:
        """The media type, and the body in pieces (for ever: ``total`` ends it)."""
        if self.shape == "whole":
            head = json.dumps(text("")).partition('"content": "')[0] + '"content": "'
            return b"application/json", itertools.chain([head.encode()], itertools.repeat(b"a" * 65536))
        if self.shape == "deltas":
            role = _sse(stream_chunks(text(""))[0]).encode()
            # Each delta its own (LiteLLM ends a stream that repeats one chunk).
            deltas = (_sse(_delta(f"{n:08} " + "a" * 1000)).encode() for n in itertools.count())
            return b"text/event-stream", itertools.chain([role], deltas)
        line = b'data: {"choices": [{"index": 0, "delta": {"content": "'
        return b"text/event-stream", itertools.chain([line], itertools.repeat(b"a" * 65536))

    def _flood(self, connection: socket.socket) -> None:
        media, pieces = self._body()
        length = b"Content-Length: " + str(self.total).encode() + b"\r\n" if self.declare_length else b""
        try:
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: " + media + b"\r\n" + length + b"\r\n"
            )
            for piece in pieces:
                if self.sent >= self.total:
                    return
                connection.sendall(piece)
                self.sent += len(piece)
        except OSError:  # the agent stopped reading and closed the connection
            self.cut = True


def _delta(content: str) -> dict[str, Any]:
    head = stream_chunks(text(""))[0]
    return {**head, "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}


@pytest.fixture
def flood() -> Iterator[Callable[..., Flood]]:
    servers: list[Flood] = []

    def start(shape: str, **options: Any) -> Flood:
        servers.append(Flood(shape, **options))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _read_within_bound(upstream: Flood) -> None:
    """The agent closed the connection near the limit (1 MiB), far from the answer's 64 MiB: what the
    loopback's socket buffers hold besides is a few MiB."""
    assert upstream.done.wait(30)
    assert upstream.cut
    assert upstream.sent < 16 * MIB


@pytest.mark.parametrize("declare_length", [False, True])
def test_a_whole_answer_past_the_byte_limit_is_502_and_not_read_whole(
    app_on: Callable[..., TestClient], flood: Callable[..., Flood], declare_length: bool
) -> None:
    upstream = flood("whole", declare_length=declare_length)
    client = app_on(upstream.base_url, chat_max_upstream_bytes=MIB)
    response = post(client, chat_body("scripted@kb-a"))
    assert response.status_code == 502, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("api_error", "upstream_response_too_large")
    assert "CHAT_MAX_UPSTREAM_BYTES" in error["message"]
    _read_within_bound(upstream)
    metrics = client.get("/metrics", headers=AUTH).text
    assert 'chat_requests_total{outcome="upstream_error",stream="false"} 1.0' in metrics


@pytest.mark.parametrize("shape", ["deltas", "one_line"])
def test_a_stream_past_the_byte_limit_ends_with_an_error_event_and_is_not_read_whole(
    app_on: Callable[..., TestClient], flood: Callable[..., Flood], shape: str
) -> None:
    upstream = flood(shape)
    client = app_on(upstream.base_url, chat_max_upstream_bytes=MIB)
    events = sse_events(post(client, chat_body("scripted@kb-a", stream=True)).text)
    assert "[DONE]" not in events
    assert json.loads(events[-1])["error"]["code"] == "upstream_response_too_large"
    _read_within_bound(upstream)


# -- the upstream's rate-limit headers ------------------------------------------------------------------


def _refusing(status: int, headers: dict[str, str]) -> Starlette:
    async def chat(request: Request) -> Response:
        return Response(
            '{"error": {"message": "slow down"}}', status_code=status, headers=headers, media_type="application/json"
        )

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [429, 503])
def test_the_upstreams_retry_after_reaches_the_client(
    serve: Callable[[Any], str], app_on: Callable[..., TestClient], status: int, stream: bool
) -> None:
    headers = {
        "Retry-After": "7",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-reset-tokens": "6m0s",
        "x-ratelimit-limit-requests": "60",  # not about when to retry: not passed on
    }
    client = app_on(serve(_refusing(status, headers)))
    response = post(client, chat_body("scripted@kb-a", stream=stream))
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == "upstream_error"
    assert response.headers["retry-after"] == "7"
    assert response.headers["x-ratelimit-reset-requests"] == "1s"
    assert response.headers["x-ratelimit-reset-tokens"] == "6m0s"
    assert "x-ratelimit-limit-requests" not in response.headers
    assert response.headers["x-request-id"]


def test_an_upstream_error_without_retry_after_adds_none(chat_api: ChatApi) -> None:
    client, _ = chat_api(lambda body: Status(429, '{"error": {"message": "slow down"}}'))
    response = post(client, chat_body("scripted@kb-a"))
    assert response.status_code == 429
    assert "retry-after" not in response.headers


# -- secrets in the upstream's error text ----------------------------------------------------------------

_LEAKY = json.dumps(
    {
        "error": {
            "message": "Incorrect API key provided: sk-CHATKEY0123456789abcdef. You sent auth=Bearer "
            "sk-CHATKEY0123456789abcdef to https://admin:hunter22@proxy.internal/v1?api_key=topsecret42; "
            f"the key {UPSTREAM_KEY} is revoked"
        }
    }
)


@pytest.mark.parametrize("stream", [False, True])
def test_secrets_in_an_upstream_error_are_masked_in_the_answer_and_the_log(
    chat_api: ChatApi, caplog: pytest.LogCaptureFixture, stream: bool
) -> None:
    client, _ = chat_api(lambda body: Status(401, _LEAKY))
    caplog.clear()
    response = post(client, chat_body("scripted@kb-a", stream=stream))
    assert response.status_code == 401
    message = response.json()["error"]["message"]
    assert "Incorrect API key provided" in message  # still useful
    logged = "\n".join(f"{record.getMessage()} {record.__dict__}" for record in caplog.records)
    assert any(record.getMessage() == REQUEST_FAILED for record in caplog.records)
    for secret in ("CHATKEY", "hunter22", "topsecret42", UPSTREAM_KEY):
        assert secret not in message
        assert secret not in logged


def test_secrets_in_an_upstream_error_after_the_stream_started_are_masked(
    chat_api: ChatApi, caplog: pytest.LogCaptureFixture
) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any] | Status:
        if turn(body) == 0:
            return tool_call("search", {"query": "Aarhus"})
        return Status(500, _LEAKY)

    client, _ = chat_api(script)
    caplog.clear()
    events = sse_events(post(client, chat_body("scripted@kb-a", stream=True)).text)
    error = json.loads(events[-1])["error"]
    assert "Incorrect API key provided" in error["message"]
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for secret in ("CHATKEY", "hunter22", "topsecret42", UPSTREAM_KEY):
        assert secret not in error["message"]
        assert secret not in logged


# -- tool arguments the parser chokes on ---------------------------------------------------------------


def _raw_tool_call(name: str, arguments: str) -> dict[str, Any]:
    answer = tool_call(name, {})
    answer["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = arguments
    return answer


@pytest.mark.parametrize(
    ("arguments", "stream", "why"),
    [
        # A whole (unstreamed) answer with these LiteLLM itself cannot read: 502 upstream_error.
        ("[" * 20_000, True, "nested too deeply"),
        ("[" * 50_000, True, "longer than 32000 characters"),
        (json.dumps({"query": "Aarhus " * 20_000}), False, "longer than 32000 characters"),
        (json.dumps({"query": "Aarhus " * 20_000}), True, "longer than 32000 characters"),
    ],
    ids=["nested-too-deep-stream", "long-and-nested-stream", "too-long", "too-long-stream"],
)
def test_tool_arguments_the_parser_cannot_take_are_told_to_the_model(
    chat_api: ChatApi, arguments: str, stream: bool, why: str
) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        if turn(body) == 0:
            return _raw_tool_call("search", arguments)
        return text("Sorry, no search [1].")

    client, llm = chat_api(script)
    response = post(client, chat_body("scripted@kb-a", stream=stream))
    assert response.status_code == 200, response.text
    if stream:
        assert streamed_text(chunks(sse_events(response.text))) == "Sorry, no search [1]."
    else:
        assert response.json()["choices"][0]["message"]["content"] == "Sorry, no search [1]."
    (result,) = tool_results(llm.requests[1])
    assert result == f"Error: invalid arguments for search: {why}. Call it again with valid JSON."


# -- usage is the upstream's own --------------------------------------------------------------------------


def _streaming_without_usage() -> Starlette:
    async def chat(request: Request) -> Response:
        # Asked for usage (stream_options.include_usage), this upstream sends none.
        events = "".join(_sse(chunk) for chunk in stream_chunks(text("The tower was completed in 1889 [1].")))
        return StreamingResponse(iter([events, "data: [DONE]\n\n"]), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def test_usage_is_what_the_upstream_reported_never_counted_here(
    serve: Callable[[Any], str], app_on: Callable[..., TestClient]
) -> None:
    # LiteLLM counted the tokens of a stream that reported none with tiktoken, over the whole answer and
    # in the event loop (a 10 MB answer blocked every request for seconds): it is not counted here.
    client = app_on(serve(_streaming_without_usage()))
    body = chat_body("scripted@kb-a", stream=True, stream_options={"include_usage": True})
    parsed = chunks(sse_events(post(client, body).text))
    assert streamed_text(parsed) == "The tower was completed in 1889 [1]."
    assert parsed[-1]["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def test_litellm_counts_no_tokens_itself() -> None:
    litellm = import_litellm()
    assert litellm.disable_token_counter is True
    assert litellm.token_counter(model="gpt-4o-mini", text="The tower was completed in 1889.") == 0


# -- the model name and LiteLLM's log lines --------------------------------------------------------------


@pytest.mark.parametrize("model", ["scripted\nFORGED level=ERROR", "scripted\r", "scripted\x1b[31m", "a\u2028b"])
def test_a_model_name_with_control_characters_is_refused(chat_api: ChatApi, model: str) -> None:
    client, llm = chat_api(lambda body: text("never"))
    response = post(client, chat_body(model))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "model" in error["message"]
    assert llm.requests == []


def test_litellm_logs_through_the_services_handler_only(chat_api: ChatApi) -> None:
    chat_api(lambda body: text("never"))  # the app's start imports LiteLLM
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logger = logging.getLogger(name)
        assert logger.handlers == [], name
        assert logger.propagate, name
    stream = io.StringIO()
    handler = log_handler("json", stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        logging.getLogger("LiteLLM").warning("completion() model=%s", "m\nFORGED line")
    finally:
        root.removeHandler(handler)
    (line,) = stream.getvalue().splitlines()
    entry = json.loads(line)
    assert (entry["logger"], entry["message"]) == ("LiteLLM", "completion() model=m\nFORGED line")

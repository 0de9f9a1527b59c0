"""The other /v1 routes passed to the chat upstream, over HTTP: the app (TestClient) and a scripted upstream on
loopback that records what it was sent."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..conftest import AUTH, make_settings  # noqa: TID252
from .chat_support import UPSTREAM_KEY, chat_settings  # noqa: TID252

EMBEDDING = {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5]}]}
TEAPOT = b'{"error": {"message": "I am a teapot", "type": "teapot_error"}}'
EVENTS = [b'data: {"choices": [{"text": "Hel"}]}\n\n', b'data: {"choices": [{"text": "lo"}]}\n\n', b"data: [DONE]\n\n"]
MIN_UPSTREAM_BYTES = 64 * 1024


@dataclass
class Sent:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class RecordingUpstream:
    """Answers /v1/embeddings, /v1/teapot (418), /v1/completions (SSE) and /v1/huge (past the byte cap)."""

    sent: list[Sent] = field(default_factory=lambda: list[Sent]())

    async def _record(self, request: Request) -> None:
        self.sent.append(
            Sent(request.method, request.url.path, request.url.query, dict(request.headers), await request.body())
        )

    async def embeddings(self, request: Request) -> Response:
        await self._record(request)
        return JSONResponse(EMBEDDING, headers={"x-ratelimit-remaining-requests": "99", "x-internal": "no"})

    async def teapot(self, request: Request) -> Response:
        await self._record(request)
        return Response(TEAPOT, status_code=418, media_type="application/problem+json")

    async def completions(self, request: Request) -> Response:
        await self._record(request)
        return StreamingResponse(iter(EVENTS), media_type="text/event-stream")

    async def huge(self, request: Request) -> Response:
        await self._record(request)
        return Response(b"x" * (MIN_UPSTREAM_BYTES + 1), media_type="application/octet-stream")

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/embeddings", self.embeddings, methods=["POST"]),
                Route("/v1/teapot", self.teapot, methods=["GET", "DELETE"]),
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v1/huge", self.huge, methods=["GET"]),
            ]
        )


Proxy = Callable[..., tuple[TestClient, RecordingUpstream]]


@pytest.fixture
def proxy(serve: Callable[[Any], str], app_factory: Callable[..., TestClient]) -> Proxy:
    def build(**overrides: Any) -> tuple[TestClient, RecordingUpstream]:
        upstream = RecordingUpstream()
        return app_factory(chat_settings(f"{serve(upstream.app())}/v1", **overrides), None), upstream

    return build


def test_embeddings_come_back_as_the_upstream_answered_and_it_saw_the_upstream_key(proxy: Proxy) -> None:
    client, upstream = proxy()
    body = {"model": "embedder", "input": "hello"}
    response = client.post("/v1/embeddings?trace=1", json=body, headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.json() == EMBEDDING
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-ratelimit-remaining-requests"] == "99"
    assert "x-internal" not in response.headers
    (sent,) = upstream.sent
    assert (sent.method, sent.path, sent.query) == ("POST", "/v1/embeddings", "trace=1")
    assert json.loads(sent.body) == body
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert sent.headers["content-type"] == "application/json"
    metrics = client.get("/metrics", headers=AUTH).text
    assert 'proxy_requests_total{outcome="ok"} 1.0' in metrics


def test_an_unknown_upstream_error_status_comes_back_as_it_came(proxy: Proxy) -> None:
    client, _ = proxy()
    response = client.get("/v1/teapot", headers=AUTH)
    assert response.status_code == 418
    assert response.content == TEAPOT
    assert response.headers["content-type"] == "application/problem+json"
    assert client.delete("/v1/teapot", headers=AUTH).status_code == 418
    metrics = client.get("/metrics", headers=AUTH).text
    assert 'proxy_requests_total{outcome="upstream_status"} 2.0' in metrics


def test_an_event_stream_is_passed_on_as_sent(proxy: Proxy) -> None:
    client, _ = proxy()
    with client.stream("POST", "/v1/completions", json={"model": "m", "stream": True}, headers=AUTH) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        # Sent as it arrives (chunked), not read whole first.
        assert "content-length" not in response.headers
        assert b"".join(response.iter_bytes()) == b"".join(EVENTS)


def test_an_answer_past_chat_max_upstream_bytes_is_a_502(proxy: Proxy) -> None:
    client, _ = proxy(chat_max_upstream_bytes=MIN_UPSTREAM_BYTES)
    response = client.get("/v1/huge", headers=AUTH)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_response_too_large"


def test_an_unreachable_upstream_is_an_openai_shaped_502(app_factory: Callable[..., TestClient]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Nothing listens on the port once the socket is closed.
    client = app_factory(chat_settings(f"http://127.0.0.1:{port}/v1"), None)
    response = client.post("/v1/embeddings", json={"model": "m", "input": "x"}, headers=AUTH)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unavailable"
    metrics = client.get("/metrics", headers=AUTH).text
    assert 'proxy_requests_total{outcome="upstream_error"} 1.0' in metrics


def test_without_the_api_key_nothing_is_passed_on(proxy: Proxy) -> None:
    client, upstream = proxy()
    response = client.post("/v1/embeddings", json={"model": "m", "input": "x"}, headers={"Authorization": "Bearer no"})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"
    assert upstream.sent == []


def test_a_body_past_max_request_bytes_is_refused_before_it_is_passed_on(proxy: Proxy) -> None:
    client, upstream = proxy(max_request_bytes=1024)
    response = client.post("/v1/embeddings", json={"model": "m", "input": "x" * 2048}, headers=AUTH)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert upstream.sent == []


def test_another_method_on_a_chat_route_is_a_405_not_passed_on(proxy: Proxy) -> None:
    client, upstream = proxy()
    response = client.get("/v1/chat/completions", headers=AUTH)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert upstream.sent == []


def test_a_path_with_dot_segments_is_refused(proxy: Proxy) -> None:
    client, upstream = proxy()
    response = client.get("/v1/teapot/%2e%2e/%2e%2e/admin", headers=AUTH)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("The path is not one this proxy passes on")
    assert upstream.sent == []


def test_without_an_upstream_the_pass_through_is_disabled(app_factory: Callable[..., TestClient]) -> None:
    client = app_factory(make_settings(), None)
    response = client.post("/v1/embeddings", json={"model": "m", "input": "x"}, headers=AUTH)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "chat_disabled"

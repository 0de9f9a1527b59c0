"""The HTTP edge: auth before the body, body caps, one error shape, request ids, logs, process metrics, OpenAPI."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.types import Message, Scope

from rag_runtime.http import hint_for, log_handler
from rag_runtime.store import ChunkStore

from ..conftest import AUTH, BrokenStore, make_settings  # noqa: TID252

BODY = {"queries": ["Eiffel Tower"], "collection_names": ["kb-a"], "k": 2}


class RawCall:
    """One request straight through the app's ASGI interface, counting the body messages it reads."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)
        self.read = 0
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        if not self.chunks:
            return {"type": "http.disconnect"}
        self.read += 1
        body = self.chunks.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(self.chunks)}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def body(self) -> Any:
        return json.loads(b"".join(m.get("body", b"") for m in self.sent[1:]))


def raw_post(api: TestClient, path: str, chunks: list[bytes], headers: dict[str, str]) -> RawCall:
    call = RawCall(chunks)
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
    }
    assert api.portal is not None
    api.portal.call(api.app, scope, call.receive, call.send)
    return call


def test_no_body_byte_is_read_without_the_key(api: TestClient) -> None:
    # 300 chunks of 1 MiB: none may be read before the key is checked.
    call = raw_post(api, "/search", [b"x" * 2**20] * 300, {"content-type": "application/json"})
    assert call.status == 401
    assert call.read == 0
    assert (b"www-authenticate", b"Bearer") in call.sent[0]["headers"]
    assert call.body["code"] == "UNAUTHORIZED"


def test_malformed_json_without_a_key_is_401(api: TestClient) -> None:
    response = api.post("/search", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json() == {
        "status": False,
        "error": "Missing or wrong API key.",
        "code": "UNAUTHORIZED",
        "hint": hint_for("UNAUTHORIZED"),
        "request_id": response.headers["x-request-id"],
    }


def test_a_body_that_is_not_utf8_is_422_in_the_flat_shape(api: TestClient) -> None:
    # Found by the fuzz run: FastAPI answers an undecodable body with its own 400.
    response = api.post("/search", content=b"\xff\xfeJ", headers={**AUTH, "content-type": "application/json"})
    assert response.status_code == 422
    assert response.json() == {
        "status": False,
        "error": "Invalid request: the body could not be decoded.",
        "code": "INVALID_REQUEST",
        "hint": hint_for("INVALID_REQUEST"),
        "request_id": response.headers["x-request-id"],
    }


def test_malformed_json_with_the_key_is_422_in_the_flat_shape(api: TestClient) -> None:
    response = api.post("/search", content=b"{not json", headers={**AUTH, "content-type": "application/json"})
    assert response.status_code == 422
    assert response.json() == {
        "status": False,
        "error": "Invalid request: the body is not valid JSON.",
        "code": "INVALID_REQUEST",
        "hint": hint_for("INVALID_REQUEST"),
        "request_id": response.headers["x-request-id"],
    }


def test_a_declared_oversize_body_is_413_before_it_is_read(
    app_factory: Callable[..., TestClient], seeded: ChunkStore
) -> None:
    api = app_factory(make_settings(max_request_bytes=1000), seeded)
    headers = {**AUTH, "content-type": "application/json", "content-length": "5000"}
    call = raw_post(api, "/search", [b"x" * 5000], headers)
    assert call.status == 413
    assert call.read == 0
    assert call.body["code"] == "PAYLOAD_TOO_LARGE"
    assert "MAX_REQUEST_BYTES (1000 bytes)" in call.body["error"]


def test_a_streamed_oversize_body_is_413_once_over_the_cap(
    app_factory: Callable[..., TestClient], seeded: ChunkStore
) -> None:
    api = app_factory(make_settings(max_request_bytes=1000), seeded)
    # No Content-Length (chunked): the cap is counted as the body arrives; reading stops at the third chunk.
    call = raw_post(api, "/search", [b" " * 400] * 50, {**AUTH, "content-type": "application/json"})
    assert call.status == 413
    assert call.read == 3
    assert call.body["code"] == "PAYLOAD_TOO_LARGE"


def test_a_body_within_the_cap_is_served(app_factory: Callable[..., TestClient], seeded: ChunkStore) -> None:
    api = app_factory(make_settings(max_request_bytes=1000), seeded)
    assert api.post("/search", json=BODY, headers=AUTH).status_code == 200


def test_unknown_route_and_wrong_method_are_flat(api: TestClient) -> None:
    missing = api.get("/nope", headers=AUTH)
    assert missing.status_code == 404
    assert missing.json() == {
        "status": False,
        "error": "Not Found",
        "code": "NOT_FOUND",
        "hint": hint_for("NOT_FOUND"),
        "request_id": missing.headers["x-request-id"],
    }
    wrong = api.get("/search", headers=AUTH)
    assert wrong.status_code == 405
    assert wrong.headers["allow"] == "POST"
    assert wrong.json()["code"] == "METHOD_NOT_ALLOWED"


def test_unknown_routes_need_the_key_too(api: TestClient) -> None:
    assert api.get("/nope").status_code == 401


def test_probes_and_docs_stay_public(api: TestClient) -> None:
    assert api.get("/health").status_code == 200
    assert api.get("/health/ready").status_code == 200
    assert api.get("/openapi.json").status_code == 200
    assert api.get("/metrics").status_code == 401


@pytest.mark.parametrize(
    ("sent", "kept"), [("trace-42.a_b", True), ("x" * 65, False), ("bad id\nforged", False), ("", False)]
)
def test_request_id_is_taken_when_sane_else_generated(api: TestClient, sent: str, kept: bool) -> None:
    response = api.get("/health", headers={"X-Request-ID": sent})
    returned = response.headers["x-request-id"]
    if kept:
        assert returned == sent
    else:
        assert returned != sent
        assert len(returned) == 32


def test_every_log_line_of_a_request_carries_its_id(api: TestClient) -> None:
    stream = io.StringIO()
    handler = log_handler("json", stream)
    logger = logging.getLogger("retrieval_agent")
    logger.addHandler(handler)
    try:
        response = api.post("/search", json=BODY, headers={**AUTH, "X-Request-ID": "search-7"})
    finally:
        logger.removeHandler(handler)
    assert response.status_code == 200
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert any(line["message"].startswith("search:") for line in lines)
    assert {line["request_id"] for line in lines} == {"search-7"}


def test_metrics_include_process_series(api: TestClient) -> None:
    text = api.get("/metrics", headers=AUTH).text
    for series in ("process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds"):
        assert f"\n{series} " in text


def test_openapi_declares_bearer_and_the_error_model(api: TestClient) -> None:
    spec = api.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["BearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": spec["components"]["securitySchemes"]["BearerAuth"]["description"],
    }
    for path, method in (("/search", "post"), ("/metrics", "get")):
        operation = spec["paths"][path][method]
        assert operation["security"] == [{"BearerAuth": []}]
        for status in ("401", "413", "415", "422"):
            schema = operation["responses"][status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}
    assert set(spec["components"]["schemas"]["ErrorBody"]["required"]) == {"error", "code", "hint", "request_id"}
    assert "security" not in spec["paths"]["/health"]["get"]


def test_an_unexpected_error_is_500_with_the_request_id(
    app_factory: Callable[..., TestClient], seeded: ChunkStore
) -> None:
    api = app_factory(make_settings(), BrokenStore(seeded))
    response = api.post("/search", json=BODY, headers={**AUTH, "X-Request-ID": "bug-1"})
    assert response.status_code == 500
    assert response.headers["x-request-id"] == "bug-1"
    assert response.json() == {
        "status": False,
        "error": "Unexpected search failure.",
        "code": "SEARCH_FAILED",
        "hint": hint_for("SEARCH_FAILED"),
        "request_id": "bug-1",
    }

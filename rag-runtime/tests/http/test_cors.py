"""The shared CORS mechanism: the origin list and the middleware, outside the API-key edge."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr

from rag_runtime.http import BodyLimit, EdgeMiddleware, cors_origins, install_cors

KEY = "k" * 32
ORIGIN = "http://localhost:3000"
PREFLIGHT = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST"}


def _app(origins: list[str]) -> TestClient:
    app = FastAPI()

    @app.post("/echo")
    async def echo() -> dict[str, bool]:
        return {"ok": True}

    limit = BodyLimit(1024, "MAX_REQUEST_BYTES")
    app.add_middleware(EdgeMiddleware, api_key=SecretStr(KEY), public_paths=(), body_limit=lambda _path: limit)
    install_cors(app, origins)
    return TestClient(app)


def test_origins_are_split_trimmed_and_deduplicated() -> None:
    assert cors_origins(f" {ORIGIN} ,https://a.example.com:8443,{ORIGIN},") == [ORIGIN, "https://a.example.com:8443"]
    assert cors_origins("*") == ["*"]
    assert cors_origins("") == []


@pytest.mark.parametrize("origin", ["https://a.example.com/", "a.example.com", "https://a.example.com/app", "ftp://a"])
def test_an_origin_browsers_never_send_is_refused(origin: str) -> None:
    with pytest.raises(ValueError, match="scheme://host"):
        cors_origins(origin)


def test_a_preflight_is_answered_before_the_key_is_asked_for() -> None:
    response = _app([ORIGIN]).options("/echo", headers=PREFLIGHT)
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ORIGIN


def test_a_request_still_needs_the_key_and_its_refusal_carries_the_cors_headers() -> None:
    response = _app([ORIGIN]).post("/echo", headers={"Origin": ORIGIN})
    assert response.status_code == 401
    assert response.headers["access-control-allow-origin"] == ORIGIN


def test_without_origins_no_middleware_answers_the_preflight() -> None:
    response = _app([]).options("/echo", headers=PREFLIGHT)
    assert response.status_code == 401
    assert "access-control-allow-origin" not in response.headers

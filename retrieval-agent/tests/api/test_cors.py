"""CORS_ALLOW_ORIGINS over HTTP: a browser's preflight answered before the API key is asked for."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from retrieval_agent.settings import Settings
from shared_contract import ContractConfigError, load_settings

from ..conftest import API_KEY, AUTH, make_settings  # noqa: TID252

ALLOWED = "https://chat.example.com"
PREFLIGHT = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"}


def test_a_preflight_from_an_allowed_origin_is_answered_with_the_cors_headers(
    app_factory: Callable[..., TestClient],
) -> None:
    client = app_factory(make_settings(cors_allow_origins=f"{ALLOWED}, http://localhost:3000"), None)
    response = client.options("/v1/chat/completions", headers={"Origin": ALLOWED, **PREFLIGHT})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ALLOWED
    assert "POST" in response.headers["access-control-allow-methods"]
    assert response.headers["access-control-allow-headers"] == "authorization,content-type"


def test_a_request_from_an_allowed_origin_may_read_the_answer(app_factory: Callable[..., TestClient]) -> None:
    client = app_factory(make_settings(cors_allow_origins=ALLOWED), None)
    response = client.get("/health", headers={"Origin": ALLOWED, **AUTH})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ALLOWED
    assert "x-request-id" in response.headers["access-control-expose-headers"].lower()


def test_a_preflight_from_another_origin_gets_no_cors_headers(app_factory: Callable[..., TestClient]) -> None:
    client = app_factory(make_settings(cors_allow_origins=ALLOWED), None)
    response = client.options("/v1/chat/completions", headers={"Origin": "https://evil.example.com", **PREFLIGHT})
    assert "access-control-allow-origin" not in response.headers


def test_without_origins_a_preflight_needs_the_key_and_gets_no_cors_headers(
    app_factory: Callable[..., TestClient],
) -> None:
    client = app_factory(make_settings(), None)
    response = client.options("/v1/chat/completions", headers={"Origin": ALLOWED, **PREFLIGHT})
    assert response.status_code == 401
    assert "access-control-allow-origin" not in response.headers


def test_an_origin_with_a_path_is_refused_at_start_up() -> None:
    with pytest.raises(ContractConfigError, match=r"^CORS_ALLOW_ORIGINS: .*without a path"):
        load_settings(Settings, api_key=API_KEY, cors_allow_origins=f"{ALLOWED}/")

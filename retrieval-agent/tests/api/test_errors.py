"""Every error code has a hint in the body; every failed request writes exactly one request_failed line."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from rag_runtime.http import CONTRACT_HINTS, EDGE_HINTS, FALLBACK_HINT, REQUEST_FAILED, hint_for, registered_hints
from rag_runtime.store import ChunkStore
from retrieval_agent.api.errors import install_error_handlers
from retrieval_agent.error_table import CODE_HINTS, ERROR_TABLE, SEARCH_FAILED, classify

from ..conftest import AUTH, BrokenStore, make_settings  # noqa: TID252

BODY = {"queries": ["Eiffel Tower"], "collection_names": ["kb-a"], "k": 2}


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    install_error_handlers(FastAPI())  # registers the codes' hints, as create_app does


@pytest.mark.parametrize("code", sorted({code for _, _, code, _, _ in ERROR_TABLE} | {classify(RuntimeError())[1]}))
def test_every_code_the_service_emits_has_a_hint(code: str) -> None:
    assert code in registered_hints()
    assert hint_for(code).strip()
    assert hint_for(code) != FALLBACK_HINT


def test_row_hints_are_more_specific_than_their_code() -> None:
    for error_type, _, code, _, hint in ERROR_TABLE:
        assert hint is None or (hint.strip() and hint != hint_for(code)), error_type


def failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.getMessage() == REQUEST_FAILED]


def the_failure(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    found = failures(caplog)
    assert len(found) == 1, [vars(record) for record in found]
    return found[0]


def fields(record: logging.LogRecord, *names: str) -> dict[str, object]:
    return {name: getattr(record, name, None) for name in names}


def test_a_validation_error_is_one_warning(api: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    response = api.post("/search", json={"k": 2}, headers={**AUTH, "X-Request-ID": "v-1"})
    assert response.status_code == 422
    assert response.json()["hint"] == EDGE_HINTS["INVALID_REQUEST"]
    record = the_failure(caplog)
    assert record.levelno == logging.WARNING
    assert fields(record, "request_id", "method", "path", "status", "code") == {
        "request_id": "v-1",
        "method": "POST",
        "path": "/search",
        "status": 422,
        "code": "INVALID_REQUEST",
    }


def test_a_401_is_one_warning_and_the_body_has_the_hint(api: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    response = api.post("/search", json=BODY, headers={"X-Request-ID": "a-1"})
    assert response.status_code == 401
    assert response.json()["hint"] == EDGE_HINTS["UNAUTHORIZED"]
    record = the_failure(caplog)
    assert record.levelno == logging.WARNING
    assert fields(record, "request_id", "path", "status", "code") == {
        "request_id": "a-1",
        "path": "/search",
        "status": 401,
        "code": "UNAUTHORIZED",
    }


def test_a_domain_error_is_one_error_line_with_its_cause(
    app_factory: Callable[..., TestClient], store_factory: Callable[..., ChunkStore], caplog: pytest.LogCaptureFixture
) -> None:
    api = app_factory(make_settings(), store_factory())  # no collection yet
    caplog.clear()
    response = api.post("/search", json=BODY, headers={**AUTH, "X-Request-ID": "m-1"})
    assert response.status_code == 503
    assert response.json()["code"] == "COLLECTION_MISSING"
    assert response.json()["hint"] == CONTRACT_HINTS["COLLECTION_MISSING"]
    record = the_failure(caplog)
    assert record.levelno == logging.ERROR
    assert fields(record, "request_id", "method", "path", "status", "code") == {
        "request_id": "m-1",
        "method": "POST",
        "path": "/search",
        "status": 503,
        "code": "COLLECTION_MISSING",
    }
    assert "does not exist" in str(getattr(record, "error", ""))
    assert record.exc_info is None  # a typed dependency failure: its text, no traceback


def test_an_unexpected_error_is_one_error_line_with_the_traceback_and_request_id(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, caplog: pytest.LogCaptureFixture
) -> None:
    api = app_factory(make_settings(), BrokenStore(seeded))
    caplog.clear()
    response = api.post("/search", json=BODY, headers={**AUTH, "X-Request-ID": "bug-1"})
    assert response.status_code == 500
    assert response.json()["hint"] == CODE_HINTS[SEARCH_FAILED]
    assert "a bug" not in response.text
    record = the_failure(caplog)
    assert record.levelno == logging.ERROR
    assert fields(record, "request_id", "path", "status", "code", "cause") == {
        "request_id": "bug-1",
        "path": "/search",
        "status": 500,
        "code": "SEARCH_FAILED",
        "cause": "RuntimeError: a bug",
    }
    assert record.exc_info is not None

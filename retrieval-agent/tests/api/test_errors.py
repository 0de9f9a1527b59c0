"""Every error code has a hint in the body; every failed request writes exactly one request_failed line."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from rag_runtime.http import FALLBACK_HINT, REQUEST_FAILED, hint_for
from rag_runtime.store import ChunkStore
from retrieval_agent import errors as domain_errors
from retrieval_agent.error_table import CODES, ERROR_TABLE, SEARCH_FAILED
from shared_contract import SHARED_CODES, ContractConfigError, ContractError, registered_codes
from shared_contract.citations import CitationLinkError

from ..conftest import AUTH, BrokenStore, make_settings  # noqa: TID252

BODY = {"queries": ["Eiffel Tower"], "collection_names": ["kb-a"], "k": 2}


def subclasses(cls: type[Exception]) -> set[type[Exception]]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= subclasses(sub)
    return found


# Bases no code raises, and errors the pipeline handles before they could reach a caller (the reranker
# and query generation fail open; settings errors stop the start-up; a tool's KnowledgeBaseError
# wraps another error, which is what HTTP callers get; citation links are only signed here, the
# ingestion service verifies them).
NOT_ANSWERED = {
    domain_errors.RetrievalError,
    domain_errors.KnowledgeBaseError,
    domain_errors.MemoryFailure,
    domain_errors.RerankerError,
    domain_errors.QueryGenerationError,
    ContractError,
    ContractConfigError,
    CitationLinkError,
}


@pytest.mark.parametrize(
    "error_type",
    sorted((subclasses(domain_errors.RetrievalError) | subclasses(ContractError)) - NOT_ANSWERED, key=str),
)
def test_every_domain_error_a_caller_can_get_has_a_row(error_type: type[Exception]) -> None:
    assert ERROR_TABLE.row_for(error_type) is not None


@pytest.mark.parametrize("code", sorted({row.code for row in ERROR_TABLE.rows.values()} | {ERROR_TABLE.fallback.code}))
def test_every_code_the_service_emits_is_registered_with_a_hint(code: str) -> None:
    assert code in registered_codes()
    assert hint_for(code).strip()
    assert hint_for(code) != FALLBACK_HINT


def test_the_service_registers_only_codes_of_its_own() -> None:
    for spec in CODES:
        assert registered_codes()[spec.code] == spec
    assert not {spec.code for spec in CODES} & set(SHARED_CODES)  # shared codes keep their one spec


def test_row_hints_are_more_specific_than_their_code() -> None:
    for error_type, row in ERROR_TABLE.rows.items():
        assert row.hint is None or (row.hint.strip() and row.hint != hint_for(row.code)), error_type


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
    assert response.json()["hint"] == hint_for("INVALID_REQUEST")
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
    assert response.json()["hint"] == hint_for("UNAUTHORIZED")
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
    assert response.json()["hint"] == hint_for("COLLECTION_MISSING")
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
    assert response.json()["hint"] == hint_for(SEARCH_FAILED)
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

"""Every error code has a hint in the body; every failed request writes exactly one request_failed line."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ingestion_service import errors as domain_errors
from ingestion_service.adapters.chunk_index import ChunkIndex
from ingestion_service.error_table import CODES, ERROR_TABLE, UPLOAD_TOO_LARGE_HINT
from ingestion_service.errors import (
    ExtractionDependencyError,
    IngestionError,
    InvalidRequestError,
    PayloadTooLargeError,
    QdrantWriteError,
)
from ingestion_service.runtime import ServiceHooks
from rag_runtime.http import FALLBACK_HINT, REQUEST_FAILED, hint_for
from shared_contract import SHARED_CODES, QdrantUnavailableError, registered_codes

if TYPE_CHECKING:
    from ..conftest import AppFactory  # noqa: TID252


def all_subclasses(cls: type[IngestionError]) -> set[type[IngestionError]]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= all_subclasses(sub)
    return found


# Every class errors.py defines; subclasses elsewhere (an adapter's GotenbergError) answer from their parent's row.
DOMAIN_ERRORS = sorted(
    (cls for cls in all_subclasses(IngestionError) | {IngestionError} if cls.__module__ == domain_errors.__name__),
    key=lambda cls: cls.__name__,
)


@pytest.mark.parametrize("error_type", DOMAIN_ERRORS, ids=lambda cls: cls.__name__)
def test_every_domain_error_class_has_its_own_row(error_type: type[IngestionError]) -> None:
    row = ERROR_TABLE.rows.get(error_type)
    assert row is not None
    assert row.message  # what public_message answers
    assert error_type.code == row.code


@pytest.mark.parametrize("code", sorted({row.code for row in ERROR_TABLE.rows.values()} | {ERROR_TABLE.fallback.code}))
def test_every_code_the_service_emits_is_registered_with_a_hint(code: str) -> None:
    assert code in registered_codes()
    assert hint_for(code).strip()
    assert hint_for(code) != FALLBACK_HINT


def test_the_service_registers_only_codes_of_its_own() -> None:
    # The shared codes (INVALID_REQUEST, EMBEDDING_FAILED, ...) keep their one spec in shared_contract.
    own = {spec.code for spec in CODES}
    assert not own & set(SHARED_CODES)
    assert own == {row.code for row in ERROR_TABLE.rows.values()} - set(SHARED_CODES)


def test_row_hints_are_more_specific_than_their_code() -> None:
    for error_type, row in ERROR_TABLE.rows.items():
        assert row.hint is None or (row.hint.strip() and row.hint != hint_for(row.code)), error_type
    assert ERROR_TABLE.classify(PayloadTooLargeError(10)).hint == UPLOAD_TOO_LARGE_HINT
    gotenberg = ExtractionDependencyError("Gotenberg", "is down", setting="GOTENBERG_URL")
    assert ERROR_TABLE.classify(gotenberg).hint != hint_for("EXTRACTION_FAILED")
    assert ERROR_TABLE.classify(QdrantWriteError("boom")).hint == hint_for("QDRANT_WRITE_FAILED")


def test_the_errors_attributes_answer_from_the_table_and_are_read_only() -> None:
    refused = InvalidRequestError("collection_name: not allowed")
    assert (refused.code, refused.status_code, refused.detail()) == ("INVALID_REQUEST", 422, str(refused))
    assert domain_errors.PipelineFailedError.code == "PIPELINE_FAILED"
    assert domain_errors.PipelineFailedError.public_message == "Indexing pipeline failed."
    assert not domain_errors.IngestTimeoutError(5).server_fault
    with pytest.raises(AttributeError):
        refused.code = "OTHER"


def failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.getMessage() == REQUEST_FAILED]


def the_failure(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    found = failures(caplog)
    assert len(found) == 1, [vars(record) for record in found]
    return found[0]


def fields(record: logging.LogRecord, *names: str) -> dict[str, object]:
    return {name: getattr(record, name, None) for name in names}


def test_a_validation_error_is_one_warning_with_the_file_and_collection(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    response = client.delete("/api/v1/documents/f-1?collection_name=no%20spaces", headers={"X-Request-ID": "v-1"})
    assert response.status_code == 422
    assert response.json()["hint"] == hint_for("INVALID_REQUEST")
    record = the_failure(caplog)
    assert record.levelno == logging.WARNING
    assert fields(record, "request_id", "method", "path", "status", "code", "file_id", "collection_name") == {
        "request_id": "v-1",
        "method": "DELETE",
        "path": "/api/v1/documents/{file_id}",
        "status": 422,
        "code": "INVALID_REQUEST",
        "file_id": "f-1",
        "collection_name": "no spaces",
    }


def test_a_401_is_one_warning_and_the_body_has_the_hint(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    response = client.put("/api/v1/ingest", json={}, headers={"Authorization": "", "X-Request-ID": "a-1"})
    assert response.status_code == 401
    assert response.json()["hint"] == hint_for("UNAUTHORIZED")
    record = the_failure(caplog)
    assert record.levelno == logging.WARNING
    assert fields(record, "request_id", "path", "status", "code") == {
        "request_id": "a-1",
        "path": "/api/v1/ingest",
        "status": 401,
        "code": "UNAUTHORIZED",
    }


def test_a_4xx_domain_error_is_one_warning_with_its_class_hint(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    response = client.put("/api/v1/ingest", content=b"x", headers={"content-type": "text/plain"})
    assert response.status_code == 415
    assert response.json()["code"] == "INVALID_REQUEST"
    assert "multipart/form-data" in response.json()["hint"]
    record = the_failure(caplog)
    assert record.levelno == logging.WARNING
    assert fields(record, "path", "status", "code") == {
        "path": "/api/v1/ingest",
        "status": 415,
        "code": "INVALID_REQUEST",
    }
    assert record.exc_info is None


class BrokenIndex(ChunkIndex):
    async def delete_file(self, file_id: str, collection_name: str | None = None) -> int:
        raise QdrantUnavailableError("qdrant delete failed: ConnectError")


def test_a_5xx_domain_error_is_one_error_with_the_cause_and_traceback(
    app_client: AppFactory, caplog: pytest.LogCaptureFixture
) -> None:
    with app_client(hooks=ServiceHooks(index_factory=BrokenIndex)) as client:
        caplog.clear()
        response = client.delete("/api/v1/documents/f-9?collection_name=kb-9", headers={"X-Request-ID": "d-1"})
    assert response.status_code == 500
    assert response.json()["hint"] == hint_for("DELETE_FAILED")
    record = the_failure(caplog)
    assert record.levelno == logging.ERROR
    assert fields(record, "request_id", "method", "path", "status", "code", "file_id", "collection_name") == {
        "request_id": "d-1",
        "method": "DELETE",
        "path": "/api/v1/documents/{file_id}",
        "status": 500,
        "code": "DELETE_FAILED",
        "file_id": "f-9",
        "collection_name": "kb-9",
    }
    assert "ConnectError" in str(getattr(record, "cause", ""))  # the log has the cause; the body does not
    assert "ConnectError" not in response.text
    assert record.exc_info is not None


def test_an_unexpected_error_is_one_error_line_with_the_request_id(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    app = client.app
    assert isinstance(app, FastAPI)

    async def bug() -> None:
        raise RuntimeError("a bug")

    app.add_api_route("/api/v1/test-bug", bug, methods=["GET"])
    # Not entered: the running app's state is reused, and the 500 comes back instead of raising.
    raw = TestClient(app, raise_server_exceptions=False, headers=dict(client.headers))
    response = raw.get("/api/v1/test-bug", headers={"X-Request-ID": "b-1"})
    assert response.status_code == 500
    assert response.json() == {
        "status": False,
        "error": "Indexing pipeline failed.",
        "code": "PIPELINE_FAILED",
        "hint": hint_for("PIPELINE_FAILED"),
        "request_id": "b-1",
    }
    record = the_failure(caplog)
    assert record.levelno == logging.ERROR
    assert fields(record, "request_id", "path", "status", "code", "cause") == {
        "request_id": "b-1",
        "path": "/api/v1/test-bug",
        "status": 500,
        "code": "PIPELINE_FAILED",
        "cause": "RuntimeError: a bug",
    }
    assert record.exc_info is not None

"""Error bodies carry a hint per code; every failure writes exactly one request_failed line."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from pydantic import BaseModel, SecretStr
from starlette.types import Receive, Scope, Send

from rag_runtime.http import (
    FALLBACK_HINT,
    REQUEST_FAILED,
    BodyLimit,
    EdgeMiddleware,
    error_content,
    error_response,
    hint_for,
    install_framework_error_handlers,
    log_handler,
    note_request_fields,
    public_paths,
)
from rag_runtime.http import errors as errors_module
from shared_contract import CONTRACT_CODES, EDGE_CODES, registered_codes
from shared_contract.error_body import ErrorBody

API_KEY = "k" * 40
AUTH = {"Authorization": f"Bearer {API_KEY}"}


class Item(BaseModel):
    file_id: str
    size: int


def make_app() -> FastAPI:
    """A bare app with the shared edge: the middleware, the framework handlers, a few routes."""
    app = FastAPI()
    install_framework_error_handlers(app)

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        return error_response(request, 500, "TEST_FAILED", "Unexpected failure.", cause=exc, log_traceback=True)

    app.add_exception_handler(Exception, on_unexpected)
    app.add_middleware(
        EdgeMiddleware,
        api_key=SecretStr(API_KEY),
        public_paths=public_paths(app),
        body_limit=lambda _path: BodyLimit(1000, "MAX_REQUEST_BYTES"),
    )

    @app.put("/items/{file_id}")
    async def put_item(file_id: str, item: Item, collection_name: str | None = None) -> dict[str, str]:
        return {"file_id": file_id}

    @app.post("/noted")
    async def noted(request: Request) -> JSONResponse:
        # What a route does once it has read the ids from its own body.
        note_request_fields(request, file_id="from-body", collection_name="kb-body")
        return error_response(request, 409, "TEST_CONFLICT", "Conflict.", hint="Do something else.")

    @app.get("/bug")
    async def bug() -> None:
        raise RuntimeError("secret-free internals")

    return app


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(make_app(), raise_server_exceptions=False) as test_client:
        yield test_client


def failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.getMessage() == REQUEST_FAILED]


def the_failure(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    found = failures(caplog)
    assert len(found) == 1, [vars(record) for record in found]
    return found[0]


def fields(record: logging.LogRecord, *names: str) -> dict[str, object]:
    return {name: getattr(record, name, None) for name in names}


# --- hints -------------------------------------------------------------------------------------------


def edge_codes() -> set[str]:
    return set(errors_module._CODE_BY_STATUS.values()) | set(EDGE_CODES)


@pytest.mark.parametrize("code", sorted(edge_codes() | set(CONTRACT_CODES)))
def test_every_edge_and_contract_code_has_a_hint(code: str) -> None:
    assert code in registered_codes()
    assert hint_for(code).strip()
    assert hint_for(code) != FALLBACK_HINT


def test_the_unauthorized_hint_names_the_key_variables_of_both_sides() -> None:
    hint = hint_for("UNAUTHORIZED")
    for variable in ("API_KEY", "EXTERNAL_INGESTION_API_KEY", "RAG_EXTERNAL_RETRIEVAL_API_KEY"):
        assert variable in hint


def test_an_unknown_code_gets_the_fallback_hint() -> None:
    assert hint_for("HTTP_418") == FALLBACK_HINT
    assert error_content("Teapot.", "HTTP_418", "r-1")["hint"] == FALLBACK_HINT


def test_error_content_is_the_flat_body_with_the_codes_hint() -> None:
    assert error_content("Bad.", "INVALID_REQUEST", "r-1") == {
        "status": False,
        "error": "Bad.",
        "code": "INVALID_REQUEST",
        "hint": hint_for("INVALID_REQUEST"),
        "request_id": "r-1",
    }
    assert error_content("Bad.", "INVALID_REQUEST", "r-1", hint="Own hint.")["hint"] == "Own hint."


def test_the_openapi_error_model_requires_the_hint() -> None:
    schema = ErrorBody.model_json_schema()
    assert set(schema["required"]) == {"error", "code", "hint", "request_id"}
    assert schema["examples"][0]["hint"] == hint_for("QDRANT_UNAVAILABLE")


# --- one request_failed line per failure ---------------------------------------------------------------


def test_a_validation_error_logs_one_warning_with_the_route_template(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    response = client.put(
        "/items/f-1?collection_name=kb-1",
        json={"file_id": "f-1", "size": "not a number"},
        headers={**AUTH, "X-Request-ID": "val-1"},
    )
    assert response.status_code == 422
    assert response.json()["hint"] == hint_for("INVALID_REQUEST")
    record = the_failure(caplog)
    assert record.levelno == logging.WARNING
    assert fields(record, "request_id", "method", "path", "status", "code", "file_id", "collection_name") == {
        "request_id": "val-1",
        "method": "PUT",
        "path": "/items/{file_id}",
        "status": 422,
        "code": "INVALID_REQUEST",
        "file_id": "f-1",
        "collection_name": "kb-1",
    }
    assert record.error == response.json()["error"]  # type: ignore[attr-defined]
    # Never the submitted values: a validation error's own text would carry them.
    assert "not a number" not in json.dumps(vars(record), default=str)


def test_a_401_from_the_middleware_logs_one_warning_and_carries_the_hint(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    response = client.put(
        "/items/f-2", json={}, headers={"Authorization": "Bearer guessed-key-123", "X-Request-ID": "auth-1"}
    )
    assert response.status_code == 401
    assert response.json() == {
        "status": False,
        "error": "Missing or wrong API key.",
        "code": "UNAUTHORIZED",
        "hint": hint_for("UNAUTHORIZED"),
        "request_id": "auth-1",
    }
    record = the_failure(caplog)
    assert record.levelno == logging.WARNING
    assert fields(record, "request_id", "method", "path", "status", "code") == {
        "request_id": "auth-1",
        "method": "PUT",
        "path": "/items/f-2",  # refused before routing: the raw path
        "status": 401,
        "code": "UNAUTHORIZED",
    }
    assert "guessed-key" not in json.dumps(vars(record), default=str)  # never the key


def test_a_413_from_the_middleware_logs_one_line(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    response = client.put("/items/f-3", content=b"x" * 2000, headers={**AUTH, "content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["hint"] == hint_for("PAYLOAD_TOO_LARGE")
    record = the_failure(caplog)
    assert fields(record, "status", "code") == {"status": 413, "code": "PAYLOAD_TOO_LARGE"}


def test_unknown_routes_log_one_line(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    assert client.get("/nope", headers=AUTH).status_code == 404
    assert fields(the_failure(caplog), "path", "code") == {"path": "/nope", "code": "NOT_FOUND"}


def test_fields_a_route_noted_from_its_body_are_logged(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    response = client.post("/noted", headers=AUTH)
    assert response.json()["hint"] == "Do something else."
    record = the_failure(caplog)
    assert fields(record, "file_id", "collection_name", "code") == {
        "file_id": "from-body",
        "collection_name": "kb-body",
        "code": "TEST_CONFLICT",
    }


def test_an_unexpected_error_logs_one_error_line_with_its_traceback_and_request_id(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    response = client.get("/bug", headers={**AUTH, "X-Request-ID": "bug-1"})
    assert response.status_code == 500
    assert response.json()["request_id"] == "bug-1"
    assert response.json()["hint"] == FALLBACK_HINT
    assert "internals" not in response.text
    record = the_failure(caplog)
    assert record.levelno == logging.ERROR
    assert fields(record, "request_id", "path", "status", "code", "cause") == {
        "request_id": "bug-1",
        "path": "/bug",
        "status": 500,
        "code": "TEST_FAILED",
        "cause": "RuntimeError: secret-free internals",
    }
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)


def test_the_servers_own_traceback_line_carries_the_request_id(caplog: pytest.LogCaptureFixture) -> None:
    """uvicorn logs an escaped exception ("Exception in ASGI application") after the app returned,
    outside the request's context; the edge middleware left the id on the exception."""
    app = make_app()
    stream = io.StringIO()
    handler = log_handler("json", stream)
    server_logger = logging.getLogger("shared_contract.tests.server")
    server_logger.addHandler(handler)

    async def server(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await app(scope, receive, send)
        except RuntimeError as exc:
            server_logger.error("Exception in ASGI application\n", exc_info=exc)

    try:
        with TestClient(server) as test_client:
            assert test_client.get("/bug", headers={**AUTH, "X-Request-ID": "bug-2"}).status_code == 500
    finally:
        server_logger.removeHandler(handler)
    line = json.loads(stream.getvalue().splitlines()[0])
    assert line["message"].startswith("Exception in ASGI application")
    assert line["request_id"] == "bug-2"
    assert the_failure(caplog).request_id == "bug-2"  # type: ignore[attr-defined]


# --- the line in both formats ---------------------------------------------------------------------------


def _formatted(log_format: str, client: TestClient) -> str:
    stream = io.StringIO()
    handler = log_handler(log_format, stream)  # type: ignore[arg-type]
    logger = logging.getLogger("rag_runtime.http.failures")
    logger.addHandler(handler)
    try:
        client.put(
            "/items/f%0Aforged?collection_name=kb 1",
            json={"file_id": "f", "size": "x"},
            headers={**AUTH, "X-Request-ID": "fmt-1"},
        )
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def test_json_lines_have_the_fields_as_keys(client: TestClient) -> None:
    entry = json.loads(_formatted("json", client))
    assert entry["message"] == REQUEST_FAILED
    assert entry["level"] == "WARNING"
    assert {key: entry[key] for key in ("request_id", "method", "path", "status", "code", "collection_name")} == {
        "request_id": "fmt-1",
        "method": "PUT",
        "path": "/items/{file_id}",
        "status": 422,
        "code": "INVALID_REQUEST",
        "collection_name": "kb 1",
    }
    assert entry["file_id"] == "f\nforged"


def test_text_lines_show_the_fields_quoted_on_one_line(client: TestClient) -> None:
    text = _formatted("text", client)
    assert text.count("\n") == 1  # the newline in the file id cannot start a forged line
    assert "[fmt-1]: request_failed method=PUT path=/items/{file_id} status=422 code=INVALID_REQUEST" in text
    assert 'file_id="f\\nforged"' in text
    assert 'collection_name="kb 1"' in text

"""A classified error as the HTTP edge answers it: the flat body, its status and one log line."""

from __future__ import annotations

import logging

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from rag_runtime.http import REQUEST_FAILED, classified_response
from shared_contract.error_table import ErrorTable, error_row


class SizedError(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(f"internal: {size} bytes at host-1")
        self.size = size


def make_table() -> ErrorTable:
    """One row on a shared code, so the table registers nothing (the table type's own rules are
    tested in shared-contract)."""
    return ErrorTable(
        [
            error_row(
                SizedError,
                "INVALID_REQUEST",
                lambda exc: 413 if exc.size > 10 else 422,
                message="Too big.",
                detail=lambda exc: f"The body has {exc.size} bytes." if exc.size > 10 else None,
                hint="Send less.",
            )
        ],
        fallback_code="INVALID_REQUEST",
        fallback_message="Unexpected failure.",
    )


def test_a_classified_error_answers_the_flat_body_and_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    table = make_table()
    app = FastAPI()

    async def on_domain(request: Request, exc: Exception) -> JSONResponse:
        return classified_response(request, table.classify(exc), cause=exc)

    app.add_exception_handler(SizedError, on_domain)

    async def big() -> None:
        raise SizedError(99)

    app.add_api_route("/big", big, methods=["POST"])
    caplog.set_level(logging.WARNING)
    response = TestClient(app).post("/big")
    assert response.status_code == 413
    assert response.json() == {
        "status": False,
        "error": "The body has 99 bytes.",
        "code": "INVALID_REQUEST",
        "hint": "Send less.",
        "request_id": response.headers["X-Request-ID"],
    }
    [line] = [record for record in caplog.records if record.getMessage() == REQUEST_FAILED]
    assert line.exc_info is None
    assert "host-1" not in response.text  # the error's own text goes to the log only

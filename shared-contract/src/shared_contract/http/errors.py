"""The one error shape and status policy of both services' HTTP APIs.

Every failure is the flat body ``{"status": false, "error": <message>, "code": <CODE>,
"request_id": <id>}``. Framework errors (validation, unknown routes, wrong methods, bodies that are
not JSON) are mapped here; each service maps its own domain errors and emits them through
:func:`error_response`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from shared_contract.http.request_id import REQUEST_ID_HEADER, request_id_of

logger = logging.getLogger(__name__)

# The codes of the HTTP edge; domain codes (EXTRACTION_FAILED, QDRANT_UNAVAILABLE, ...) are the services'.
INVALID_REQUEST = "INVALID_REQUEST"
UNAUTHORIZED = "UNAUTHORIZED"
NOT_FOUND = "NOT_FOUND"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"

_CODE_BY_STATUS: Mapping[int, str] = {
    400: INVALID_REQUEST,
    401: UNAUTHORIZED,
    403: "FORBIDDEN",
    404: NOT_FOUND,
    405: METHOD_NOT_ALLOWED,
    413: PAYLOAD_TOO_LARGE,
    415: UNSUPPORTED_MEDIA_TYPE,
    422: INVALID_REQUEST,
}

INVALID_JSON_MESSAGE = "Invalid request: the body is not valid JSON."
INVALID_BODY_MESSAGE = "Invalid request: the body could not be decoded."
UNAUTHORIZED_MESSAGE = "Invalid API key"


class ErrorBody(BaseModel):
    """Every handled failure of both services (flat, never nested in ``detail``)."""

    status: bool = False
    error: str
    code: str
    request_id: str


def error_content(message: str, code: str, request_id: str) -> dict[str, object]:
    """The flat error body as a JSON-ready dict."""
    return ErrorBody(error=message, code=code, request_id=request_id).model_dump()


def error_response(
    request: Request, status: int, code: str, message: str, *, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The flat error response; carries the request's id in the body and the ``X-Request-ID`` header."""
    request_id = request_id_of(request)
    all_headers = {REQUEST_ID_HEADER: request_id, **(headers or {})}
    return JSONResponse(status_code=status, content=error_content(message, code, request_id), headers=all_headers)


def code_for_status(status: int) -> str:
    """The edge code of a framework HTTP error's status (``HTTP_<status>`` for the rare others)."""
    return _CODE_BY_STATUS.get(status, f"HTTP_{status}")


def validation_message(errors: Sequence[Any]) -> str:
    """Field locations and pydantic's messages; never the submitted values."""
    if any(error.get("type") == "json_invalid" for error in errors):
        return INVALID_JSON_MESSAGE
    parts = []
    for error in errors[:5]:
        location = ".".join(str(part) for part in error.get("loc", ()) if part not in ("body", "query", "path"))
        parts.append(f"{location or 'request'}: {error.get('msg', 'invalid')}")
    return "Invalid request: " + "; ".join(parts)


ErrorObserver = Callable[[Request, str], None]
_Handler = Callable[[Request, Exception], Awaitable[JSONResponse]]


def install_framework_error_handlers(app: FastAPI, *, observe: ErrorObserver | None = None) -> None:
    """Validation errors (422), framework HTTP errors (404, 405, 413, ...) and JSON decode errors (422),
    all in the flat shape. ``observe(request, code)`` is called for each (a service's metrics)."""

    def note(request: Request, code: str) -> None:
        if observe is not None:
            observe(request, code)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        note(request, INVALID_REQUEST)
        return error_response(request, 422, INVALID_REQUEST, validation_message(exc.errors()))

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400:
            # FastAPI's own 400 is a body it could not decode (not UTF-8, broken form): the
            # policy's 422, like any other unreadable request.
            note(request, INVALID_REQUEST)
            return error_response(request, 422, INVALID_REQUEST, INVALID_BODY_MESSAGE)
        code = code_for_status(exc.status_code)
        note(request, code)
        message = exc.detail if isinstance(exc.detail, str) and exc.detail else HTTPStatus(exc.status_code).phrase
        return error_response(request, exc.status_code, code, message, headers=exc.headers)

    async def on_json(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, json.JSONDecodeError)
        note(request, INVALID_REQUEST)
        return error_response(request, 422, INVALID_REQUEST, INVALID_JSON_MESSAGE)

    handlers: list[tuple[type[Exception], _Handler]] = [
        (RequestValidationError, on_validation),
        (StarletteHTTPException, on_http),
        (json.JSONDecodeError, on_json),
    ]
    for error_type, handler in handlers:
        app.add_exception_handler(error_type, handler)

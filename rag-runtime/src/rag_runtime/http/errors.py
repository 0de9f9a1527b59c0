"""The one error shape and status policy of both services' HTTP APIs.

Every failure is the flat body ``{"status": false, "error": <message>, "code": <CODE>, "hint":
<what to do>, "request_id": <id>}``. Framework errors (validation, unknown routes, wrong methods,
bodies that are not JSON) are mapped here; each service maps its own domain errors and emits them
through :func:`error_response`, which also writes the request's one ``request_failed`` log line.

Hints are looked up by code in the one registry, ``shared_contract.error_codes``: the edge and
contract-layer codes are registered there, each service registers its own codes through its error
table (``error_table.py``, a ``shared_contract.error_table.ErrorTable``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from rag_runtime.http.logs import log_request_failed
from rag_runtime.http.request_id import REQUEST_ID_HEADER, request_id_of
from shared_contract.error_body import ErrorBody
from shared_contract.error_codes import (
    INVALID_REQUEST,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    PAYLOAD_TOO_LARGE,
    UNAUTHORIZED,
    registered_codes,
)
from shared_contract.error_table import Classified

# A refused rule (403) and a body in the wrong Content-Type (415) are invalid requests too: the message
# names the rule or the header (docs/contract.md, Statuses).
_CODE_BY_STATUS: Mapping[int, str] = {
    400: INVALID_REQUEST,
    401: UNAUTHORIZED,
    403: INVALID_REQUEST,
    404: NOT_FOUND,
    405: METHOD_NOT_ALLOWED,
    413: PAYLOAD_TOO_LARGE,
    415: INVALID_REQUEST,
    422: INVALID_REQUEST,
}

INVALID_JSON_MESSAGE = "Invalid request: the body is not valid JSON."
INVALID_BODY_MESSAGE = "Invalid request: the body could not be decoded."
# Also sent when no key came at all: "invalid" alone sent operators looking for a typo.
UNAUTHORIZED_MESSAGE = "Missing or wrong API key."
SHUTTING_DOWN_MESSAGE = "The service was shutting down and stopped this request before it finished."

# For a code nobody registered (``HTTP_<status>``): still somewhere to look.
FALLBACK_HINT = "The service's request_failed log line with this request_id has the cause."


def hint_for(code: str) -> str:
    """What the caller or operator should do about ``code`` (the fallback when none is registered)."""
    spec = registered_codes().get(code)
    return FALLBACK_HINT if spec is None else spec.hint


def error_content(message: str, code: str, request_id: str, *, hint: str | None = None) -> dict[str, object]:
    """The flat error body as a JSON-ready dict; ``hint`` defaults to the code's registered one."""
    return ErrorBody(error=message, code=code, hint=hint or hint_for(code), request_id=request_id).model_dump()


def error_response(
    request: Request,
    status: int,
    code: str,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    hint: str | None = None,
    cause: BaseException | None = None,
    log_traceback: bool = False,
) -> JSONResponse:
    """The flat error response, with the request's id in the body and the ``X-Request-ID`` header.

    Writes the request's one ``request_failed`` log line (``cause``: the exception behind it, whose
    text goes to the log only; ``log_traceback``: with its traceback, for faults of the service).
    """
    request_id = request_id_of(request)
    log_request_failed(
        request.scope, status, code, message, request_id=request_id, cause=cause, log_traceback=log_traceback
    )
    all_headers = {REQUEST_ID_HEADER: request_id, **(headers or {})}
    content = error_content(message, code, request_id, hint=hint)
    return JSONResponse(status_code=status, content=content, headers=all_headers)


def classified_response(
    request: Request, classified: Classified, *, cause: Exception, message: str | None = None
) -> JSONResponse:
    """The flat error response of an error its service's table classified (``message`` replaces the
    table's, for additions such as a debug suffix)."""
    return error_response(
        request,
        classified.status,
        classified.code,
        message or classified.message,
        hint=classified.hint,
        cause=cause,
        log_traceback=classified.log_traceback,
    )


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


# What a 405's Allow may list, in this order.
_METHODS = ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT")


def _allowed_methods(request: Request) -> str:
    """Every method some route takes at this path: Starlette's 405 names only the first route that
    matched it (DELETE and PATCH of one document are two routes)."""
    routes = request.app.router.routes
    return ", ".join(
        method
        for method in _METHODS
        if any(route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes)
    )


def install_framework_error_handlers(app: FastAPI, *, observe: ErrorObserver | None = None) -> None:
    """Validation errors (422), framework HTTP errors (404, 405, 413, ...) and JSON decode errors (422),
    all in the flat shape. ``observe(request, code)`` is called for each (a service's metrics)."""

    def note(request: Request, code: str) -> None:
        if observe is not None:
            observe(request, code)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        note(request, INVALID_REQUEST)
        # No cause: a validation error's text holds the submitted values.
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
        headers = exc.headers
        allowed = _allowed_methods(request) if exc.status_code == HTTPStatus.METHOD_NOT_ALLOWED else ""
        if allowed:
            headers = {**(headers or {}), "Allow": allowed}
        return error_response(request, exc.status_code, code, message, headers=headers)

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

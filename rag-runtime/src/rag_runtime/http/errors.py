"""The one error shape and status policy of both services' HTTP APIs.

Every failure is the flat body ``{"status": false, "error": <message>, "code": <CODE>, "hint":
<what to do>, "request_id": <id>}``. Framework errors (validation, unknown routes, wrong methods,
bodies that are not JSON) are mapped here; each service maps its own domain errors and emits them
through :func:`error_response`, which also writes the request's one ``request_failed`` log line.

Hints are looked up by code in one registry: the edge and contract-layer codes are registered here,
each service registers its domain codes when it builds its app (:func:`register_hints`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from http import HTTPStatus
from types import MappingProxyType
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from rag_runtime.http.logs import log_request_failed
from rag_runtime.http.request_id import REQUEST_ID_HEADER, request_id_of

# The codes of the HTTP edge.
INVALID_REQUEST = "INVALID_REQUEST"
UNAUTHORIZED = "UNAUTHORIZED"
NOT_FOUND = "NOT_FOUND"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
# A request the server cancelled when its shutdown grace ran out (answered by the edge, 503).
SHUTTING_DOWN = "SHUTTING_DOWN"

# Failures of the contract layer (the store and the embedder), which both services report with the
# same code: their hints live here, once, so the two services cannot give one code two hints.
QDRANT_UNAVAILABLE = "QDRANT_UNAVAILABLE"
COLLECTION_MISSING = "COLLECTION_MISSING"
COLLECTION_MISMATCH = "COLLECTION_MISMATCH"
STORE_INCOMPATIBLE = "STORE_INCOMPATIBLE"
EMBEDDING_FAILED = "EMBEDDING_FAILED"
SPARSE_EMBEDDING_FAILED = "SPARSE_EMBEDDING_FAILED"

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

EDGE_HINTS: Mapping[str, str] = {
    INVALID_REQUEST: (
        "Fix the field the error names (location: rule) and send the request again; the service's "
        "GET /docs shows the request schema."
    ),
    UNAUTHORIZED: (
        "Send 'Authorization: Bearer <key>' with the called service's API_KEY. In Open WebUI: "
        "EXTERNAL_INGESTION_API_KEY or EXTERNAL_DOCUMENT_LOADER_API_KEY (ingestion), "
        "RAG_EXTERNAL_RETRIEVAL_API_KEY (retrieval)."
    ),
    NOT_FOUND: (
        "Check the URL against the service's GET /openapi.json (ingestion routes are under /api/v1, "
        "retrieval's is POST /search); a base URL variable with a wrong path is the usual cause."
    ),
    METHOD_NOT_ALLOWED: "Use one of the methods the Allow response header lists.",
    SHUTTING_DOWN: "The service was stopping: send the request again (another replica, or once it is back).",
    PAYLOAD_TOO_LARGE: (
        "Send a smaller body, or raise the variable the error names on the service "
        "(MAX_UPLOAD_BYTES for uploads, MAX_REQUEST_BYTES for other routes)."
    ),
}

CONTRACT_HINTS: Mapping[str, str] = {
    QDRANT_UNAVAILABLE: (
        "Check QDRANT_URI (or QDRANT_PATH for the embedded store) and that Qdrant is up; "
        "GET /health/ready shows the store's state."
    ),
    COLLECTION_MISSING: (
        "The collection QDRANT_INDEX does not exist yet: ingest a first document through the ingestion "
        "service (it creates it), or point QDRANT_INDEX at the collection the ingestion service writes."
    ),
    COLLECTION_MISMATCH: (
        "Give both services the same contract settings (EMBEDDING_MODEL, EMBEDDING_DIM, the prefixes, "
        "SPARSE_EMBEDDING_MODEL) or point QDRANT_INDEX at a matching collection; GET /health/ready names "
        "the setting that differs."
    ),
    STORE_INCOMPATIBLE: (
        "Upgrade the Qdrant server (1.20 or newer), or copy an old embedded store with `rag migrate`; "
        "the error says which."
    ),
    EMBEDDING_FAILED: (
        "Check the embedding settings (EMBEDDING_PROVIDER, EMBEDDING_API_BASE_URL, or the model built "
        "under LOCAL_MODELS_DIR by `make models`) and GET /health/ready; the request_failed log line "
        "with this request_id has the cause."
    ),
    SPARSE_EMBEDDING_FAILED: (
        "Check that SPARSE_EMBEDDING_MODEL is built under LOCAL_MODELS_DIR (`make models`) or reachable, "
        "and GET /health/ready; the request_failed log line with this request_id has the cause."
    ),
}

_HINTS: dict[str, str] = {**EDGE_HINTS, **CONTRACT_HINTS}
# A service's code type (a Literal of its codes, say): Mapping's key type is invariant.
_Code = TypeVar("_Code", bound=str)


def register_hints(hints: Mapping[_Code, str]) -> None:
    """Add a service's domain codes and their hints (called when it builds its app; idempotent).

    One code has one hint per process (``rag dev`` serves both services from one), so registering
    another hint for a known code is an error, found by the first test that builds the app.
    """
    for code, hint in hints.items():
        known = _HINTS.get(code)
        if not hint.strip():
            raise ValueError(f"the hint of {code} is empty")
        if known is not None and known != hint:
            raise ValueError(f"{code} already has another hint: {known!r}")
    for code, hint in hints.items():
        _HINTS[code] = hint


def registered_hints() -> Mapping[str, str]:
    """Every registered code and its hint (read-only)."""
    return MappingProxyType(_HINTS)


def hint_for(code: str) -> str:
    """What the caller or operator should do about ``code`` (the fallback when none is registered)."""
    return _HINTS.get(code, FALLBACK_HINT)


class ErrorBody(BaseModel):
    """Every handled failure of both services (flat, never nested in ``detail``)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "status": False,
                    "error": "Qdrant is unreachable or failed.",
                    "code": QDRANT_UNAVAILABLE,
                    "hint": CONTRACT_HINTS[QDRANT_UNAVAILABLE],
                    "request_id": "4bf92f3577b34da6a3ce929d0e0e4736",
                }
            ]
        }
    )

    status: bool = False
    error: str = Field(description="What happened, for people. Never submitted values or stack traces.")
    code: str = Field(description="Stable machine-readable code (docs/contract.md and the services' READMEs).")
    hint: str = Field(description="What the caller or operator should do next.")
    request_id: str = Field(description="Also the X-Request-ID header and on the service's request_failed log line.")


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

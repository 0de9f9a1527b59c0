"""The one place domain errors become wire errors: ``{"status": false, "error", "code"}``."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from retrieval_agent.errors import InvalidSearchError
from shared_contract import (
    CollectionMissingError,
    ContractMismatchError,
    EmbeddingError,
    ManifestMissingError,
    ModelUnavailableError,
    QdrantUnavailableError,
    SparseEmbeddingError,
    StoreIncompatibleError,
    StoreRequestError,
)

logger = logging.getLogger(__name__)


class UnauthorizedError(Exception):
    """Missing or wrong Bearer token."""


# (status, code, message shown to the caller); the log gets the exception text.
_MAPPING: list[tuple[type[Exception], int, str, str | None]] = [
    (QdrantUnavailableError, 503, "QDRANT_UNAVAILABLE", "Qdrant is unreachable or failed."),
    (CollectionMissingError, 503, "COLLECTION_MISSING", None),
    (ContractMismatchError, 503, "COLLECTION_MISMATCH", None),
    (ManifestMissingError, 503, "COLLECTION_MISMATCH", None),
    (ModelUnavailableError, 503, "EMBEDDING_FAILED", "The query embedding model is unavailable."),
    (SparseEmbeddingError, 503, "SPARSE_EMBEDDING_FAILED", "Sparse query embedding failed."),
    (EmbeddingError, 503, "EMBEDDING_FAILED", "Query embedding failed."),
    (StoreIncompatibleError, 503, "STORE_INCOMPATIBLE", None),
    (StoreRequestError, 500, "SEARCH_FAILED", "Qdrant rejected the search request."),
    (InvalidSearchError, 422, "INVALID_REQUEST", None),
]


def classify(exc: Exception) -> tuple[int, str, str]:
    """Status, code and caller-facing message for ``exc``."""
    for error_type, status, code, message in _MAPPING:
        if isinstance(exc, error_type):
            return status, code, message or str(exc)
    return 500, "SEARCH_FAILED", "Unexpected search failure."


def error_response(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    """The flat error body."""
    return JSONResponse(status_code=status, content={"status": False, "error": message, "code": code, **extra})


def _readable(errors: list[dict[str, Any]]) -> str:
    parts = []
    for error in errors[:5]:
        location = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
        parts.append(f"{location or 'body'}: {error.get('msg', 'invalid')}")
    return "; ".join(parts)


def _count(request: Request, code: str) -> None:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None and request.url.path.endswith("/search"):
        metrics.requests.labels(outcome="error", code=code).inc()


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``."""

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        _count(request, "INVALID_REQUEST")
        errors = [dict(error) for error in exc.errors()]
        for error in errors:
            error.pop("input", None)  # don't echo chat content back
            error.pop("ctx", None)
        return error_response(422, "INVALID_REQUEST", _readable(errors), detail=errors)

    async def on_unauthorized(_: Request, __: Exception) -> JSONResponse:
        response = error_response(401, "UNAUTHORIZED", "Invalid API key", detail="Invalid API key")
        response.headers["WWW-Authenticate"] = "Bearer"
        return response

    async def on_domain(request: Request, exc: Exception) -> JSONResponse:
        status, code, message = classify(exc)
        logger.error("%s %s failed with %s: %s", request.method, request.url.path, code, exc)
        _count(request, code)
        return error_response(status, code, message)

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(UnauthorizedError, on_unauthorized)
    for error_type, *_ in _MAPPING:
        app.add_exception_handler(error_type, on_domain)
    app.add_exception_handler(Exception, on_domain)

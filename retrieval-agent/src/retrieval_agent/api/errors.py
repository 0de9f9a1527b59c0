"""The one place domain errors become wire errors, in the shared flat shape (``shared_contract.http``)."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

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
from shared_contract.http import error_response, install_framework_error_handlers

logger = logging.getLogger(__name__)


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
]


def classify(exc: Exception) -> tuple[int, str, str]:
    """Status, code and caller-facing message for ``exc``."""
    for error_type, status, code, message in _MAPPING:
        if isinstance(exc, error_type):
            return status, code, message or str(exc)
    return 500, "SEARCH_FAILED", "Unexpected search failure."


def _count(request: Request, code: str) -> None:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None and request.url.path.endswith("/search"):
        metrics.requests.labels(outcome="error", code=code).inc()


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``: the shared framework handlers plus the domain errors."""
    install_framework_error_handlers(app, observe=_count)

    async def on_domain(request: Request, exc: Exception) -> JSONResponse:
        status, code, message = classify(exc)
        logger.error("%s %s failed with %s: %s", request.method, request.url.path, code, exc)
        _count(request, code)
        return error_response(request, status, code, message)

    for error_type, *_ in _MAPPING:
        app.add_exception_handler(error_type, on_domain)
    app.add_exception_handler(Exception, on_domain)

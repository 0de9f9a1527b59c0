"""The one place domain errors become wire errors, in the shared flat shape (``shared_contract.http``).

The contract-layer codes (QDRANT_UNAVAILABLE, EMBEDDING_FAILED, ...) have their hints in
``shared_contract.http``; SEARCH_FAILED, this service's own, is registered here.
"""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from retrieval_agent.api.openai_errors import as_openai, is_openai_path
from retrieval_agent.errors import (
    FactNotFoundError,
    InvalidFilterError,
    InvalidMemoryRequestError,
    MemoryDisabledError,
    MemoryStorageError,
)
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
from shared_contract.http import (
    COLLECTION_MISMATCH,
    COLLECTION_MISSING,
    EMBEDDING_FAILED,
    INVALID_REQUEST,
    QDRANT_UNAVAILABLE,
    SPARSE_EMBEDDING_FAILED,
    STORE_INCOMPATIBLE,
    error_response,
    install_framework_error_handlers,
    register_hints,
)

SEARCH_FAILED = "SEARCH_FAILED"
MEMORY_DISABLED = "MEMORY_DISABLED"
FACT_NOT_FOUND = "FACT_NOT_FOUND"
MEMORY_FAILED = "MEMORY_FAILED"

CODE_HINTS: Mapping[str, str] = {
    SEARCH_FAILED: (
        "A fault inside the retrieval agent: the request_failed log line with this request_id has the "
        "cause and traceback. Retry once; report it if it repeats."
    ),
    MEMORY_DISABLED: "Long-term memory is off: set ENABLE_MEMORY=true (and MEMORY_PATH) on the retrieval agent.",
    FACT_NOT_FOUND: "GET /api/v1/memory/{user}/facts lists the user's facts; deleted ones are in the folder's deleted/.",
    MEMORY_FAILED: (
        "The memory folder or its Git repository failed (disk full, permissions, a git lock left behind): "
        "the request_failed log line has git's message. Nothing was half-written."
    ),
}

STORE_REJECTED_HINT = (
    "The collection lacks a vector, field or index this version searches (written by an older ingestion "
    "service?): the request_failed log line has Qdrant's answer; re-ingest into a new collection if it persists."
)

# (status, code, message shown to the caller, hint when the code's own is too broad); the log gets
# the exception text.
_MAPPING: list[tuple[type[Exception], int, str, str | None, str | None]] = [
    (InvalidFilterError, 422, INVALID_REQUEST, None, None),
    (InvalidMemoryRequestError, 422, INVALID_REQUEST, None, None),
    (MemoryDisabledError, 503, MEMORY_DISABLED, "Long-term memory is disabled (ENABLE_MEMORY=false).", None),
    (FactNotFoundError, 404, FACT_NOT_FOUND, None, None),
    (MemoryStorageError, 500, MEMORY_FAILED, "The memory folder could not be changed or read.", None),
    (QdrantUnavailableError, 503, QDRANT_UNAVAILABLE, "Qdrant is unreachable or failed.", None),
    (CollectionMissingError, 503, COLLECTION_MISSING, None, None),
    (ContractMismatchError, 503, COLLECTION_MISMATCH, None, None),
    (ManifestMissingError, 503, COLLECTION_MISMATCH, None, None),
    (ModelUnavailableError, 503, EMBEDDING_FAILED, "The query embedding model is unavailable.", None),
    (SparseEmbeddingError, 503, SPARSE_EMBEDDING_FAILED, "Sparse query embedding failed.", None),
    (EmbeddingError, 503, EMBEDDING_FAILED, "Query embedding failed.", None),
    (StoreIncompatibleError, 503, STORE_INCOMPATIBLE, None, None),
    (StoreRequestError, 500, SEARCH_FAILED, "Qdrant rejected the search request.", STORE_REJECTED_HINT),
]


def classify(exc: Exception) -> tuple[int, str, str]:
    """Status, code and caller-facing message for ``exc``."""
    status, code, message, _ = _classify(exc)
    return status, code, message


def _classify(exc: Exception) -> tuple[int, str, str, str | None]:
    for error_type, status, code, message, hint in _MAPPING:
        if isinstance(exc, error_type):
            return status, code, message or str(exc), hint
    return 500, SEARCH_FAILED, "Unexpected search failure.", None


def _expected(exc: Exception) -> bool:
    return any(isinstance(exc, error_type) for error_type, *_ in _MAPPING)


def _count(request: Request, code: str) -> None:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None and request.url.path.endswith("/search"):
        metrics.requests.labels(outcome="error", code=code).inc()


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``: the shared framework handlers plus the domain errors."""
    register_hints(CODE_HINTS)
    install_framework_error_handlers(app, observe=_count)

    async def on_domain(request: Request, exc: Exception) -> JSONResponse:
        status, code, message, hint = _classify(exc)
        _count(request, code)
        # A typed dependency failure needs its text, not a traceback; a bug needs the traceback.
        return error_response(request, status, code, message, hint=hint, cause=exc, log_traceback=not _expected(exc))

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        response = await on_domain(request, exc)
        # Starlette runs this handler in ServerErrorMiddleware, outside the /v1 reshaping middleware.
        return as_openai(response) if is_openai_path(str(request.scope["path"])) else response

    for error_type, *_ in _MAPPING:
        app.add_exception_handler(error_type, on_domain)
    app.add_exception_handler(Exception, on_unexpected)

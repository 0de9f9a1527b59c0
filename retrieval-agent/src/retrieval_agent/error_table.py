"""The retrieval agent's one error table: each domain error's status, wire code, message and hint.

The HTTP handlers (``api/errors.py``), the MCP tools and readiness all answer from it. The
contract-layer codes (QDRANT_UNAVAILABLE, EMBEDDING_FAILED, ...) have their hints in
``rag_runtime.http``; this service's own codes register theirs here.
"""

from __future__ import annotations

from collections.abc import Mapping

from rag_runtime.http import (
    COLLECTION_MISMATCH,
    COLLECTION_MISSING,
    EMBEDDING_FAILED,
    INVALID_REQUEST,
    QDRANT_UNAVAILABLE,
    SPARSE_EMBEDDING_FAILED,
    STORE_INCOMPATIBLE,
)
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
ERROR_TABLE: list[tuple[type[Exception], int, str, str | None, str | None]] = [
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
    status, code, message, _ = classify_with_hint(exc)
    return status, code, message


def classify_with_hint(exc: Exception) -> tuple[int, str, str, str | None]:
    for error_type, status, code, message, hint in ERROR_TABLE:
        if isinstance(exc, error_type):
            return status, code, message or str(exc), hint
    return 500, SEARCH_FAILED, "Unexpected search failure.", None


def is_expected(exc: Exception) -> bool:
    return any(isinstance(exc, error_type) for error_type, *_ in ERROR_TABLE)

"""The retrieval agent's one error table: each domain error's status, wire code, message and hint.

The HTTP handlers (``api/errors.py``), the MCP tools and readiness all answer from it. The shared
codes (QDRANT_UNAVAILABLE, EMBEDDING_FAILED, ...) have their status and hint in
``shared_contract.error_codes``; this service's own codes are registered here.
"""

from __future__ import annotations

from retrieval_agent.errors import (
    AgenticDisabledError,
    CollectionNotFoundError,
    DocumentNotFoundError,
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
    ErrorCodeSpec,
    ManifestMissingError,
    ModelUnavailableError,
    QdrantUnavailableError,
    SparseEmbeddingError,
    StoreIncompatibleError,
    StoreRequestError,
)
from shared_contract.error_codes import (
    COLLECTION_MISMATCH,
    COLLECTION_MISSING,
    DOCUMENT_NOT_FOUND,
    EMBEDDING_FAILED,
    INVALID_REQUEST,
    QDRANT_UNAVAILABLE,
    SPARSE_EMBEDDING_FAILED,
    STORE_INCOMPATIBLE,
)
from shared_contract.error_table import ErrorTable, error_row

SEARCH_FAILED = "SEARCH_FAILED"
COLLECTION_NOT_FOUND = "COLLECTION_NOT_FOUND"
MEMORY_DISABLED = "MEMORY_DISABLED"
FACT_NOT_FOUND = "FACT_NOT_FOUND"
MEMORY_FAILED = "MEMORY_FAILED"

CODES = (
    ErrorCodeSpec(
        code=SEARCH_FAILED,
        status=500,
        hint=(
            "A fault inside the retrieval agent: the request_failed log line with this request_id has the "
            "cause and traceback. Retry once; report it if it repeats."
        ),
    ),
    ErrorCodeSpec(
        code=COLLECTION_NOT_FOUND,
        status=404,
        hint="The collection holds no documents: list_collections (POST /tools/list_collections) names those that do.",
    ),
    ErrorCodeSpec(
        code=MEMORY_DISABLED,
        status=503,
        hint="Long-term memory is off: set ENABLE_MEMORY=true (and MEMORY_PATH) on the retrieval agent.",
    ),
    ErrorCodeSpec(
        code=FACT_NOT_FOUND,
        status=404,
        hint="GET /api/v1/memory/{user}/facts lists the user's facts; deleted ones are in the folder's deleted/.",
    ),
    ErrorCodeSpec(
        code=MEMORY_FAILED,
        status=500,
        hint=(
            "The memory folder or its Git repository failed (disk full, permissions, a git lock left behind, "
            "a symbolic link in the folder): the request_failed log line has the cause. Nothing of the change "
            "was stored: retry once it is fixed."
        ),
    ),
)

STORE_REJECTED_HINT = (
    "The collection lacks a vector, field or index this version searches (written by an older ingestion "
    "service?): the request_failed log line has Qdrant's answer; re-ingest into a new collection if it persists."
)

# A row without a message shows the error's own text (written to be shown); the log gets it either
# way. Every row is a typed failure, whose text is the whole story: only an error no row covers (a
# bug, SEARCH_FAILED) is logged with its traceback.
ERROR_TABLE = ErrorTable(
    [
        error_row(InvalidFilterError, INVALID_REQUEST),
        error_row(AgenticDisabledError, INVALID_REQUEST),
        error_row(InvalidMemoryRequestError, INVALID_REQUEST),
        error_row(
            MemoryDisabledError,
            MEMORY_DISABLED,
            message="Long-term memory is disabled (ENABLE_MEMORY=false).",
            cause_only=True,
        ),
        error_row(FactNotFoundError, FACT_NOT_FOUND),
        error_row(CollectionNotFoundError, COLLECTION_NOT_FOUND),
        error_row(DocumentNotFoundError, DOCUMENT_NOT_FOUND),
        error_row(
            MemoryStorageError,
            MEMORY_FAILED,
            message="The memory folder could not be changed or read.",
            cause_only=True,
        ),
        error_row(
            QdrantUnavailableError, QDRANT_UNAVAILABLE, message="Qdrant is unreachable or failed.", cause_only=True
        ),
        error_row(CollectionMissingError, COLLECTION_MISSING, cause_only=True),
        error_row(ContractMismatchError, COLLECTION_MISMATCH, cause_only=True),
        error_row(ManifestMissingError, COLLECTION_MISMATCH, cause_only=True),
        error_row(
            ModelUnavailableError,
            EMBEDDING_FAILED,
            message="The query embedding model is unavailable.",
            cause_only=True,
        ),
        error_row(
            SparseEmbeddingError, SPARSE_EMBEDDING_FAILED, message="Sparse query embedding failed.", cause_only=True
        ),
        error_row(EmbeddingError, EMBEDDING_FAILED, message="Query embedding failed.", cause_only=True),
        error_row(StoreIncompatibleError, STORE_INCOMPATIBLE, cause_only=True),
        error_row(
            StoreRequestError,
            SEARCH_FAILED,
            message="Qdrant rejected the search request.",
            hint=STORE_REJECTED_HINT,
            cause_only=True,
        ),
    ],
    codes=CODES,
    fallback_code=SEARCH_FAILED,
    fallback_message="Unexpected search failure.",
)


def classify(exc: Exception) -> tuple[int, str, str]:
    """Status, code and caller-facing message for ``exc`` (what MCP and readiness report)."""
    classified = ERROR_TABLE.classify(exc)
    return classified.status, classified.code, classified.message

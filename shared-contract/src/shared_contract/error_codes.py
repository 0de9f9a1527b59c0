"""The registry of wire error codes: each code's default HTTP status and its hint.

The codes both services emit (the HTTP edge's and the contract layer's) are registered here, once,
so the two services cannot give one code two hints. Each service registers its own codes the same
way, through its error table (``rag_runtime.http.ErrorTable``). One code has one status and hint per
process: ``rag dev`` serves both services from one, so a second, different spec is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict, Field, field_validator

# The codes of the HTTP edge.
INVALID_REQUEST = "INVALID_REQUEST"
UNAUTHORIZED = "UNAUTHORIZED"
NOT_FOUND = "NOT_FOUND"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
# A request the server cancelled when its shutdown grace ran out.
SHUTTING_DOWN = "SHUTTING_DOWN"

# Failures of the contract layer (the store and the embedder), which both services report.
QDRANT_UNAVAILABLE = "QDRANT_UNAVAILABLE"
COLLECTION_MISSING = "COLLECTION_MISSING"
COLLECTION_MISMATCH = "COLLECTION_MISMATCH"
STORE_INCOMPATIBLE = "STORE_INCOMPATIBLE"
EMBEDDING_FAILED = "EMBEDDING_FAILED"
SPARSE_EMBEDDING_FAILED = "SPARSE_EMBEDDING_FAILED"
# A file that a tenant does not hold, asked for by file_id (ingestion's documents routes, the
# retrieval agent's document tools).
DOCUMENT_NOT_FOUND = "DOCUMENT_NOT_FOUND"


class ErrorCodeSpec(BaseModel):
    """One wire error code: the status it answers unless its error says otherwise, and what to do."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str = Field(pattern=r"^[A-Z][A-Z0-9_]*$")
    # 499: nginx's "client closed the request", which ingestion reports for an aborted upload.
    status: int = Field(ge=400, le=599)
    hint: str = Field(description="What the caller or operator should do next: one actionable sentence.")

    @field_validator("hint")
    @classmethod
    def _hint_is_not_blank(cls, hint: str) -> str:
        if not hint.strip():
            raise ValueError("the hint is empty")
        return hint


def codes_by_name(*specs: ErrorCodeSpec) -> Mapping[str, ErrorCodeSpec]:
    """``specs`` keyed by code (read-only); a code listed twice is an error."""
    by_name: dict[str, ErrorCodeSpec] = {}
    for spec in specs:
        if spec.code in by_name:
            raise ValueError(f"{spec.code} is listed twice")
        by_name[spec.code] = spec
    return MappingProxyType(by_name)


EDGE_CODES = codes_by_name(
    ErrorCodeSpec(
        code=INVALID_REQUEST,
        status=422,
        hint=(
            "Fix the field the error names (location: rule) and send the request again; the service's "
            "GET /docs shows the request schema."
        ),
    ),
    ErrorCodeSpec(
        code=UNAUTHORIZED,
        status=401,
        hint=(
            "Send 'Authorization: Bearer <key>' with the called service's API_KEY. In Open WebUI: "
            "EXTERNAL_INGESTION_API_KEY or EXTERNAL_DOCUMENT_LOADER_API_KEY (ingestion), "
            "RAG_EXTERNAL_RETRIEVAL_API_KEY (retrieval)."
        ),
    ),
    ErrorCodeSpec(
        code=NOT_FOUND,
        status=404,
        hint=(
            "Check the URL against the service's GET /openapi.json (ingestion routes are under /api/v1, "
            "retrieval's is POST /search); a base URL variable with a wrong path is the usual cause."
        ),
    ),
    ErrorCodeSpec(code=METHOD_NOT_ALLOWED, status=405, hint="Use one of the methods the Allow response header lists."),
    ErrorCodeSpec(
        code=SHUTTING_DOWN,
        status=503,
        hint="The service was stopping: send the request again (another replica, or once it is back).",
    ),
    ErrorCodeSpec(
        code=PAYLOAD_TOO_LARGE,
        status=413,
        hint=(
            "Send a smaller body, or raise the variable the error names on the service "
            "(MAX_UPLOAD_BYTES for uploads, MAX_REQUEST_BYTES for other routes)."
        ),
    ),
)

CONTRACT_CODES = codes_by_name(
    ErrorCodeSpec(
        code=QDRANT_UNAVAILABLE,
        status=503,
        hint=(
            "Check QDRANT_URI (or QDRANT_PATH for the embedded store) and that Qdrant is up; "
            "GET /health/ready shows the store's state."
        ),
    ),
    ErrorCodeSpec(
        code=COLLECTION_MISSING,
        status=503,
        hint=(
            "The collection QDRANT_INDEX does not exist yet: ingest a first document through the ingestion "
            "service (it creates it), or point QDRANT_INDEX at the collection the ingestion service writes."
        ),
    ),
    ErrorCodeSpec(
        code=COLLECTION_MISMATCH,
        status=503,
        hint=(
            "Give both services the same contract settings (EMBEDDING_MODEL, EMBEDDING_DIM, the prefixes, "
            "SPARSE_EMBEDDING_MODEL) or point QDRANT_INDEX at a matching collection; GET /health/ready names "
            "the setting that differs."
        ),
    ),
    ErrorCodeSpec(
        code=STORE_INCOMPATIBLE,
        status=503,
        hint=(
            "Upgrade the Qdrant server (1.20 or newer), or copy an old embedded store with `rag migrate`; "
            "the error says which."
        ),
    ),
    ErrorCodeSpec(
        code=EMBEDDING_FAILED,
        status=503,
        hint=(
            "Check the embedding settings (EMBEDDING_PROVIDER, EMBEDDING_API_BASE_URL, or the model built "
            "under LOCAL_MODELS_DIR by `make models`) and GET /health/ready; the request_failed log line "
            "with this request_id has the cause."
        ),
    ),
    ErrorCodeSpec(
        code=DOCUMENT_NOT_FOUND,
        status=404,
        hint=(
            "Check file_id and collection_name (a file is found only in the collection it was ingested into); "
            "GET /api/v1/documents?collection_name=<name> (ingestion) or the list_documents tool (retrieval) "
            "lists what the collection holds."
        ),
    ),
    ErrorCodeSpec(
        code=SPARSE_EMBEDDING_FAILED,
        status=503,
        hint=(
            "Check that SPARSE_EMBEDDING_MODEL is built under LOCAL_MODELS_DIR (`make models`) or reachable, "
            "and GET /health/ready; the request_failed log line with this request_id has the cause."
        ),
    ),
)

SHARED_CODES: Mapping[str, ErrorCodeSpec] = MappingProxyType({**EDGE_CODES, **CONTRACT_CODES})

_REGISTERED: dict[str, ErrorCodeSpec] = dict(SHARED_CODES)


def register_codes(specs: Iterable[ErrorCodeSpec]) -> None:
    """Add a service's own codes (idempotent: the same spec again is a no-op).

    A different spec for a known code is refused before anything is added, so the first test that
    builds a table finds the clash.
    """
    staged: dict[str, ErrorCodeSpec] = {}
    for spec in specs:
        known = staged.get(spec.code) or _REGISTERED.get(spec.code)
        if known is not None and known != spec:
            raise ValueError(f"{spec.code} is already registered with another status or hint: {known!r}")
        staged[spec.code] = spec
    _REGISTERED.update(staged)


def registered_codes() -> Mapping[str, ErrorCodeSpec]:
    """Every registered code and its spec (read-only)."""
    return MappingProxyType(_REGISTERED)

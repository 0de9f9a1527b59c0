"""The one place typed errors become wire bodies, in the shared flat shape (``rag_runtime.http``),
with a hint per code (or per error class, where one code covers causes with different remedies)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from ingestion_service.errors import (
    BucketNotAllowedError,
    EngineUnavailableError,
    ErrorCode,
    ExtractionDependencyError,
    ForbiddenRequestError,
    IngestionError,
    JsonBodyTooLargeError,
    MetadataUpdateFailedError,
    NoExtractableTextError,
    NotReadyError,
    PayloadTooLargeError,
    PipelineFailedError,
    ReservedCollectionError,
    S3FetchError,
    UnsupportedMediaTypeError,
)
from rag_runtime.http import error_response, install_framework_error_handlers, register_hints
from shared_contract import ContractError

CLEANUP_NOTE = " Removing this run's partial chunks failed too; the next ingest of this file removes them."

# The codes only this service emits. INVALID_REQUEST, EMBEDDING_FAILED, SPARSE_EMBEDDING_FAILED,
# PAYLOAD_TOO_LARGE and SHUTTING_DOWN have their hints in rag_runtime.http (both services report them).
CODE_HINTS: Mapping[ErrorCode, str] = {
    "EXTRACTION_FAILED": (
        "Check that the file opens in its own application (not encrypted, not damaged); compare engines "
        "with POST /api/v1/extract (form field engines=kreuzberg,tika,pypdf); the service's request_failed "
        "log line with this request_id has the cause."
    ),
    "QDRANT_WRITE_FAILED": (
        "Check QDRANT_URI (or QDRANT_PATH) and that Qdrant is up with disk to spare (GET /health/ready), "
        "then ingest the file again; the previous version is kept."
    ),
    "S3_FETCH_FAILED": (
        "Check that s3_bucket/s3_key name an existing object and the service's S3_ENDPOINT_URL, "
        "S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY; the request_failed log line has the S3 error."
    ),
    "PIPELINE_FAILED": (
        "A fault inside the service: the request_failed log line with this request_id has the cause and "
        "traceback. Retry once; report it if it repeats."
    ),
    "DELETE_FAILED": "Check that Qdrant is up (GET /health/ready) and send the delete again; it is idempotent.",
    "DOCUMENT_TOO_LARGE": (
        "Split the document, or raise the limit the error names (MAX_UNPACKED_BYTES, MAX_EXTRACTED_CHARS, "
        "MAX_CHUNKS_PER_DOCUMENT) on the ingestion service."
    ),
    "UNSUPPORTED_CONTENT": (
        "Send a document (PDF, Office, OpenDocument, HTML, text, image): the bytes were read as something "
        "else, whatever the file name says."
    ),
    "INGEST_TIMEOUT": (
        "Raise INGEST_TIMEOUT_SECONDS on the ingestion service (and Open WebUI's EXTERNAL_INGESTION_TIMEOUT "
        "above it), or split the document; OCR of a long scan is slow."
    ),
    "CLIENT_DISCONNECTED": (
        "The client closed the connection before the answer: raise its timeout (Open WebUI: "
        "EXTERNAL_INGESTION_TIMEOUT) and send the file again."
    ),
    "JOB_NOT_FOUND": (
        "Poll the job on the replica that accepted it, within INGEST_JOB_TTL_SECONDS of its end; "
        "after a restart, submit the ingest again."
    ),
    "JOB_QUEUE_FULL": "Retry later, or raise INGEST_JOBS_MAX on the ingestion service.",
    "STAGING_FULL": (
        "Retry later: documents waiting for a pipeline slot fill the staging area. Or raise SCRATCH_MAX_BYTES "
        "on the ingestion service (with the disk or emptyDir under SCRATCH_DIR to match)."
    ),
    "JOB_CANCELLED": (
        "The job was cancelled (DELETE on the job): submit the ingest again if the file is still wanted."
    ),
    "DOCUMENT_NOT_FOUND": (
        "Check file_id and collection_name (a file is found only in the collection it was ingested into); "
        "GET /api/v1/documents?collection_name=<name> lists what the collection holds."
    ),
    "TOO_MANY_DOCUMENTS": (
        "Narrow the list with tag=, format= or category=, or split the knowledge base into several "
        "collections: the documents list and the collection stats read at most the number the error names."
    ),
    "REINDEX_JOB_NOT_FOUND": (
        "Poll the job on the replica that accepted it (jobs are kept in that replica's INGEST_STATE_DIR); "
        "POST /api/v1/collections/<name>/reindex starts a new one."
    ),
    "REINDEX_RUNNING": (
        "Poll the running job the error names, or cancel it with DELETE /api/v1/reindex/jobs/<job_id> and start again."
    ),
    "SOURCE_INDEX_NOT_FOUND": (
        "Give the QDRANT_INDEX the collection lived in before (the Qdrant collection name, not the "
        "knowledge base), or leave source_index out to rebuild from this service's own index."
    ),
}

# Where one code covers causes with different remedies; the most specific class wins.
CLASS_HINTS: Mapping[type[IngestionError], str] = {
    ForbiddenRequestError: "Use the collection_name the error names ('file-<file_id>' or 'user-memory-<user_id>').",
    ReservedCollectionError: (
        "memory-* collections hold the retrieval agent's long-term memory: change facts through its "
        "/api/v1/memory, and put documents in another collection_name."
    ),
    BucketNotAllowedError: "Use a bucket S3_ALLOWED_BUCKETS lists, or add this one to it on the ingestion service.",
    PayloadTooLargeError: "Send a smaller file, or raise MAX_UPLOAD_BYTES on the ingestion service.",
    JsonBodyTooLargeError: (
        "Send the document as a multipart upload or through S3 (s3_bucket, s3_key); a JSON body carries "
        "only the fields."
    ),
    UnsupportedMediaTypeError: (
        "Send Content-Type application/json (a document in S3) or multipart/form-data (an upload)."
    ),
    EngineUnavailableError: (
        "Pick another engine (EXTRACTION_ENGINE, or the request's engine field), or install the extra the error names."
    ),
    NotReadyError: (
        "Wait until GET /health/ready answers 200; while it answers 503 its body says what is missing "
        "(models loading, Qdrant unreachable, collection mismatch)."
    ),
    ExtractionDependencyError: (
        "Check the setting the error names and that the service it points at is up, then retry."
    ),
    MetadataUpdateFailedError: (
        "Check that Qdrant is up (GET /health/ready) and send the PATCH again; it is one operation, so the "
        "document kept either all of its old metadata or got all of the new."
    ),
    NoExtractableTextError: (
        "The document has no text layer: keep ENABLE_OCR=true (the default) on the ingestion service, "
        "or send a version with text."
    ),
}


# Typed dependency failures whose message is the whole story: logged with their cause, no traceback
# (docs/contract.md, "One log line per failure").
CAUSE_ONLY: tuple[type[IngestionError], ...] = (S3FetchError,)


def error_message(exc: IngestionError, *, debug: bool) -> str:
    """The body's ``error``. Only DEBUG=true appends the exception's own text."""
    message = exc.detail()
    if exc.cleanup_failed:
        message += CLEANUP_NOTE
    if debug and str(exc) and str(exc) != message:
        message = f"{message} ({type(exc).__name__}: {exc})"
    return message


def error_status(exc: IngestionError) -> int:
    """The contract's status policy: a request that fails validation is 422 in both services.

    ``InvalidRequestError`` still defaults to 400 in ``errors.py``; this is the one place that maps it.
    """
    return 422 if exc.status_code == 400 else exc.status_code


def hint_of(exc: IngestionError) -> str | None:
    """The class's own hint, else None (the body then gets the code's registered hint)."""
    for cls in type(exc).__mro__:
        if issubclass(cls, IngestionError) and cls in CLASS_HINTS:
            return CLASS_HINTS[cls]
    return None


@contextmanager
def store_failures(as_error: Callable[[str], IngestionError]) -> Iterator[None]:
    """The store's typed failures inside the block become ``as_error``: the route names the code."""
    try:
        yield
    except ContractError as exc:
        raise as_error(str(exc)) from exc


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``: the shared framework handlers plus the domain errors."""
    register_hints(CODE_HINTS)
    install_framework_error_handlers(app)

    def debug_of(request: Request) -> bool:
        return bool(request.app.state.settings.debug)

    async def on_ingestion_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, IngestionError)
        status = error_status(exc)
        return error_response(
            request,
            status,
            exc.code,
            error_message(exc, debug=debug_of(request)),
            hint=hint_of(exc),
            cause=exc,
            # Expected 5xx outcomes (timeout, shutdown) need no traceback; the route says what happened.
            log_traceback=status >= 500 and exc.server_fault and not isinstance(exc, CAUSE_ONLY),
        )

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        error = PipelineFailedError(f"{type(exc).__name__}: {exc}")
        message = error_message(error, debug=debug_of(request))
        return error_response(request, 500, error.code, message, cause=exc, log_traceback=True)

    app.add_exception_handler(IngestionError, on_ingestion_error)
    app.add_exception_handler(Exception, on_unexpected)

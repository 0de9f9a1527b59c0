"""The service's typed failures. ``api/errors.py`` maps each to its wire code and HTTP status."""

from __future__ import annotations

from typing import ClassVar, Literal

ErrorCode = Literal[
    "EXTRACTION_FAILED",
    "EMBEDDING_FAILED",
    "SPARSE_EMBEDDING_FAILED",
    "QDRANT_WRITE_FAILED",
    "S3_FETCH_FAILED",
    "INVALID_REQUEST",
    "PIPELINE_FAILED",
    "DELETE_FAILED",
    "DOCUMENT_TOO_LARGE",
    "PAYLOAD_TOO_LARGE",
    "UNSUPPORTED_CONTENT",
    "INGEST_TIMEOUT",
    "CLIENT_DISCONNECTED",
    "SHUTTING_DOWN",
    "JOB_NOT_FOUND",
    "JOB_QUEUE_FULL",
    "STAGING_FULL",
    "JOB_CANCELLED",
    "DOCUMENT_NOT_FOUND",
    "TOO_MANY_DOCUMENTS",
    "REINDEX_JOB_NOT_FOUND",
    "REINDEX_RUNNING",
    "SOURCE_INDEX_NOT_FOUND",
]


class IngestionError(Exception):
    """Base class. ``public_message`` is safe to show callers; ``str(exc)`` may hold internals."""

    code: ClassVar[ErrorCode] = "PIPELINE_FAILED"
    public_message: ClassVar[str] = "Indexing pipeline failed."
    status_code: int = 500
    # Expected outcomes with a 5xx status (timeout, shutdown) are logged by the route at WARNING,
    # not by the error handler at ERROR with a traceback.
    server_fault: ClassVar[bool] = True
    # Set when removing the failed run's own points failed as well (reported with the error).
    cleanup_failed: bool = False

    def detail(self) -> str:
        """What the wire body's ``error`` says (fixed per class unless a subclass knows better)."""
        return self.public_message


class InvalidRequestError(IngestionError):
    """The request is malformed or not allowed. Its message is written by us and safe to return."""

    code: ClassVar[ErrorCode] = "INVALID_REQUEST"
    public_message = "Invalid request."

    def __init__(self, message: str, *, status_code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code

    def detail(self) -> str:
        return self.message


class ForbiddenRequestError(InvalidRequestError):
    """A collection name not bound to the caller's ids (403); the subclasses refuse other things."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status_code=403)


class ReservedCollectionError(ForbiddenRequestError):
    """A ``memory-*`` collection: the retrieval agent's long-term memory, which only it writes (403)."""


class BucketNotAllowedError(ForbiddenRequestError):
    """An S3 bucket S3_ALLOWED_BUCKETS does not list (403)."""


class JsonBodyTooLargeError(InvalidRequestError):
    """A JSON request body above the fixed JSON cap (413, the edge's code for a body over its cap);
    documents travel through S3 or multipart."""

    code = "PAYLOAD_TOO_LARGE"

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"The JSON request body is larger than {limit} bytes, the fixed limit for JSON requests "
            "(send the document itself through S3 or as a multipart upload).",
            status_code=413,
        )


class UnsupportedMediaTypeError(InvalidRequestError):
    """Content-Type neither JSON nor multipart (415)."""

    def __init__(self, content_type: str) -> None:
        del content_type  # not echoed: messages never repeat what was sent (docs/contract.md, Errors)
        super().__init__(
            "Content-Type must be application/json or multipart/form-data.",
            status_code=415,
        )


class EngineUnavailableError(InvalidRequestError):
    """An optional extraction engine is selected but its extra is not installed (400)."""


class DocumentTooLargeError(IngestionError):
    """The document expands beyond a limit (413): archive members, extracted text or chunk count.

    The message names the limit and its variable; nothing is written and the previous version stays.
    """

    code = "DOCUMENT_TOO_LARGE"
    public_message = "The document is too large to index."
    status_code = 413

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def detail(self) -> str:
        return self.message


class PayloadTooLargeError(DocumentTooLargeError):
    """Upload or S3 object above MAX_UPLOAD_BYTES (413 DOCUMENT_TOO_LARGE, like the other size limits)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"The document is larger than MAX_UPLOAD_BYTES ({limit} bytes).")


class UnsupportedContentError(IngestionError):
    """The bytes are not a document we index, whatever the file name says (415)."""

    code = "UNSUPPORTED_CONTENT"
    public_message = "The file's content is not a supported document type."
    status_code = 415

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def detail(self) -> str:
        return self.message


class IngestTimeoutError(IngestionError):
    """The run took longer than INGEST_TIMEOUT_SECONDS and was stopped (504); nothing was stored."""

    code = "INGEST_TIMEOUT"
    public_message = "Ingesting the document took too long."
    status_code = 504
    server_fault = False

    def __init__(self, limit_seconds: float) -> None:
        super().__init__(f"ingest exceeded {limit_seconds:g} s")
        self.limit_seconds = limit_seconds

    def detail(self) -> str:
        return (
            f"Ingesting the document took longer than INGEST_TIMEOUT_SECONDS ({self.limit_seconds:g} s); "
            "nothing was stored and the previous version is unchanged."
        )


class IngestAbortedError(IngestionError):
    """The run was stopped from outside before its commit; its pending points are removed."""

    server_fault = False


class ClientDisconnectedError(IngestAbortedError):
    """The client went away (mid-upload or mid-pipeline). 499 (nginx's convention): nobody reads it."""

    code = "CLIENT_DISCONNECTED"
    public_message = "The client disconnected; the ingest was aborted."
    status_code = 499


class ShuttingDownError(IngestAbortedError):
    """The process is stopping and the shutdown grace period ran out (503: retry elsewhere)."""

    code = "SHUTTING_DOWN"
    public_message = "The service is shutting down; the ingest was aborted. Retry it."
    status_code = 503


class JobCancelledError(IngestAbortedError):
    """An async ingest job was cancelled with DELETE on its resource; never an HTTP answer, only a job's error."""

    code = "JOB_CANCELLED"
    public_message = "The ingest job was cancelled; nothing was stored and the previous version is kept."
    status_code = 499


class JobNotFoundError(IngestionError):
    """No async ingest job with this id in this process: never created, expired, or lost in a restart (404)."""

    code = "JOB_NOT_FOUND"
    public_message = (
        "No ingest job with this id: unknown, finished longer than INGEST_JOB_TTL_SECONDS ago, "
        "or created by another process or before a restart (jobs live in memory)."
    )
    status_code = 404
    server_fault = False


class DocumentNotFoundError(IngestionError):
    """The collection holds no committed chunk of this file (404): never ingested there, deleted, or still pending."""

    code = "DOCUMENT_NOT_FOUND"
    public_message = "No document with this file_id in this collection."
    status_code = 404
    server_fault = False


class TooManyDocumentsError(IngestionError):
    """A documents list or stats would read more documents than the in-memory limit (422)."""

    code = "TOO_MANY_DOCUMENTS"
    public_message = "The collection holds too many documents to list or summarise at once."
    status_code = 422
    server_fault = False

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} documents")
        self.limit = limit

    def detail(self) -> str:
        return (
            f"The selection holds more than {self.limit} documents, the most the documents list and "
            "collection stats read at once."
        )


class ReindexJobNotFoundError(IngestionError):
    """No reindex job with this id in this process's state directory (404)."""

    code = "REINDEX_JOB_NOT_FOUND"
    public_message = "No reindex job with this id on this replica."
    status_code = 404
    server_fault = False


class ReindexRunningError(IngestionError):
    """A reindex of the collection is already queued or running (409): one per collection at a time."""

    code = "REINDEX_RUNNING"
    public_message = "A reindex of this collection is already queued or running."
    status_code = 409
    server_fault = False

    def __init__(self, job_id: str) -> None:
        super().__init__(f"reindex job {job_id} is unfinished")
        self.job_id = job_id

    def detail(self) -> str:
        return (
            f"A reindex of this collection is already queued or running: job {self.job_id} "
            f"(GET /api/v1/reindex/jobs/{self.job_id})."
        )


class SourceIndexNotFoundError(IngestionError):
    """A reindex's ``source_index`` names no Qdrant collection (404)."""

    code = "SOURCE_INDEX_NOT_FOUND"
    public_message = "The source_index names no existing Qdrant collection."
    status_code = 404
    server_fault = False


class JobQueueFullError(IngestionError):
    """INGEST_JOBS_MAX jobs are queued or running, none finished to drop (503: retry later or elsewhere)."""

    code = "JOB_QUEUE_FULL"
    public_message = "Too many ingest jobs are queued or running; retry later."
    status_code = 503
    # Load, not a fault: the registry logs it at WARNING.
    server_fault = False

    def __init__(self, limit: int) -> None:
        super().__init__(f"{limit} unfinished ingest jobs")
        self.limit = limit

    def detail(self) -> str:
        return f"{self.limit} ingest jobs (INGEST_JOBS_MAX) are queued or running; retry later."


class StagingFullError(IngestionError):
    """Documents staged for ingest already hold SCRATCH_MAX_BYTES (503: retry later or elsewhere).

    Checked before a body or S3 object is read, so the staging area (a pod's ``emptyDir``, a
    disk) never fills however many ingests wait for a slot.
    """

    code = "STAGING_FULL"
    public_message = "Too many documents are staged for ingest; retry later."
    status_code = 503
    # Load, not a fault.
    server_fault = False

    def __init__(self, *, wanted: int, reserved: int, limit: int) -> None:
        super().__init__(
            f"staging {wanted} bytes would exceed SCRATCH_MAX_BYTES ({limit}); {reserved} bytes are staged"
        )
        self.wanted = wanted
        self.reserved = reserved
        self.limit = limit

    def detail(self) -> str:
        return (
            f"Documents waiting to be ingested hold {self.reserved} bytes of the staging area and this one needs "
            f"{self.wanted} more, over SCRATCH_MAX_BYTES ({self.limit}); retry later."
        )


class S3FetchError(IngestionError):
    """Reading the object from S3/MinIO failed (upstream error: 502)."""

    code = "S3_FETCH_FAILED"
    public_message = "S3 object fetch failed."
    status_code = 502


class ExtractionError(IngestionError):
    """The converter failed.

    ``document_problem`` marks failures caused by the document itself (no text layer, encrypted,
    unsupported or corrupt format): 422, and the message says which. Engine or sidecar faults are
    500 with the generic message.
    """

    code = "EXTRACTION_FAILED"
    public_message = "Document extraction failed."

    def __init__(self, message: str, *, document_problem: bool = False, reason: str | None = None) -> None:
        super().__init__(message)
        self.document_problem = document_problem
        self.reason = reason
        self.status_code = 422 if document_problem else 500

    def detail(self) -> str:
        if self.document_problem and self.reason:
            return self.reason
        return self.public_message


class ExtractionDependencyError(ExtractionError):
    """A service an engine needs (the vision endpoint, Gotenberg) failed or is not configured (500).

    Not the document's fault, and readiness does not depend on it: the message names the
    dependency and the setting to check, so an operator can act on the error body alone.
    """

    def __init__(self, dependency: str, problem: str, *, setting: str, internal: str | None = None) -> None:
        # ``internal`` (logs only) may name hosts; the body names the dependency and the setting.
        super().__init__(internal or f"{dependency} {problem}")
        self.dependency = dependency
        self.problem = problem
        self.setting = setting

    def detail(self) -> str:
        return f"Document extraction failed: {self.dependency} {self.problem} (check {self.setting})."


NO_TEXT_REASON = "The document contains no extractable text (a scan without a text layer needs OCR)."
ENCRYPTED_REASON = "The document is encrypted and cannot be read without its password."
UNSUPPORTED_REASON = "The document format is not supported by the extraction engine."
CORRUPT_REASON = "The document could not be parsed (damaged or not the format its name suggests)."


class NoExtractableTextError(ExtractionError):
    """Extraction produced no text: nothing is written and the previous version stays (422)."""

    def __init__(self, message: str = "no extractable text") -> None:
        super().__init__(message, document_problem=True, reason=NO_TEXT_REASON)


class EmbeddingFailedError(IngestionError):
    """Dense embedding failed, or a chunk ended up without a dense vector."""

    code = "EMBEDDING_FAILED"
    public_message = "Embedding step failed."


class SparseEmbeddingFailedError(IngestionError):
    """Sparse embedding failed, or a chunk ended up without a sparse vector while sparse is on."""

    code = "SPARSE_EMBEDDING_FAILED"
    public_message = "Sparse embedding step failed."


class QdrantWriteError(IngestionError):
    """Writing points, or committing/cleaning a version, failed in Qdrant."""

    code = "QDRANT_WRITE_FAILED"
    public_message = "Writing to Qdrant failed."


class MetadataUpdateFailedError(QdrantWriteError):
    """Qdrant failed while setting a document's metadata (PATCH); one operation, so nothing or everything changed."""

    public_message = "Updating the document's metadata failed."


class PipelineFailedError(IngestionError):
    """Any other pipeline failure."""

    code = "PIPELINE_FAILED"
    public_message = "Indexing pipeline failed."


class NotReadyError(IngestionError):
    """The service is not ready (models warming up, Qdrant unreachable or the collection mismatched)."""

    code = "PIPELINE_FAILED"
    public_message = "The service is not ready yet."
    status_code = 503


class DeleteFailedError(IngestionError):
    """Qdrant failed while deleting or reading a file's chunks."""

    code = "DELETE_FAILED"
    public_message = "Deleting the document's chunks failed."

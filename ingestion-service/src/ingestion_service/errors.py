"""The service's typed failures, and the values their messages are built from.

What each answers (wire code, HTTP status, message for callers, hint, log treatment) is its row in
the service's one error table, ``error_table.py``; ``code``, ``status_code``, ``public_message``,
``server_fault`` and ``detail()`` read it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Generic, NoReturn, TypeVar

if TYPE_CHECKING:
    from shared_contract.error_table import ErrorRow, ErrorTable

_T = TypeVar("_T")


class _FromRow(Generic[_T]):
    """A read-only attribute of an error class (and its instances), answered by its table row."""

    def __init__(self, read: Callable[[ErrorRow], _T]) -> None:
        self._read = read

    def __get__(self, exc: IngestionError | None, owner: type[IngestionError]) -> _T:
        return self._read(owner.table.row_of(owner))

    def __set__(self, exc: IngestionError, value: object) -> NoReturn:
        raise AttributeError("answered by the error table (ingestion_service/error_table.py)")


def _fixed_message(row: ErrorRow) -> str:
    if row.message is None:
        raise LookupError(f"the row of {row.error_type.__name__} has no fixed message")
    return row.message


class IngestionError(Exception):
    """Base class. ``detail()`` is safe to show callers; ``str(exc)`` may hold internals."""

    # Bound by error_table.py when it builds the table (the package's __init__ imports it first).
    table: ClassVar[ErrorTable]

    code = _FromRow(lambda row: row.code)
    # The class's fixed message; ``detail()`` is this error's, which may name its values.
    public_message = _FromRow(_fixed_message)
    # False: an expected outcome (timeout, shutdown, load), logged at WARNING without a traceback.
    server_fault = _FromRow(lambda row: row.server_fault)
    # Set when removing the failed run's own points failed as well (reported with the error).
    cleanup_failed: bool = False

    @property
    def status_code(self) -> int:
        return self.table.classify(self).status

    def detail(self) -> str:
        """What the wire body's ``error`` says."""
        return self.table.classify(self).message


class InvalidRequestError(IngestionError):
    """The request is malformed or not allowed (422). Its message is written by us and safe to return."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ForbiddenRequestError(InvalidRequestError):
    """A collection name not bound to the caller's ids (403); the subclasses refuse other things."""


class ReservedCollectionError(ForbiddenRequestError):
    """A ``memory-*`` collection: the retrieval agent's long-term memory, which only it writes (403)."""


class BucketNotAllowedError(ForbiddenRequestError):
    """An S3 bucket S3_ALLOWED_BUCKETS does not list (403)."""


DOCUMENT_BODY_ADVICE = "send the document itself through S3 or as a multipart upload"


class JsonBodyTooLargeError(InvalidRequestError):
    """A JSON request body above the fixed JSON cap (413, the edge's code for a body over its cap);
    documents travel through S3 or multipart."""

    def __init__(self, limit: int, *, advice: str = DOCUMENT_BODY_ADVICE) -> None:
        super().__init__(
            f"The JSON request body is larger than {limit} bytes, the fixed limit for JSON requests ({advice})."
        )


class UnsupportedMediaTypeError(InvalidRequestError):
    """Content-Type neither JSON nor multipart (415)."""

    def __init__(self, content_type: str) -> None:
        del content_type  # not echoed: messages never repeat what was sent (docs/contract.md, Errors)
        super().__init__("Content-Type must be application/json or multipart/form-data.")


class EngineUnavailableError(InvalidRequestError):
    """An optional extraction engine is selected but its extra is not installed (422)."""


class DocumentTooLargeError(IngestionError):
    """The document expands beyond a limit (413): archive members, extracted text or chunk count.

    The message names the limit and its variable; nothing is written and the previous version stays.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PayloadTooLargeError(DocumentTooLargeError):
    """Upload or S3 object above MAX_UPLOAD_BYTES (413 DOCUMENT_TOO_LARGE, like the other size limits)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"The document is larger than MAX_UPLOAD_BYTES ({limit} bytes).")


class UnsupportedContentError(IngestionError):
    """The bytes are not a document we index, whatever the file name says (415)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class IngestTimeoutError(IngestionError):
    """The run took longer than INGEST_TIMEOUT_SECONDS and was stopped (504); nothing was stored."""

    def __init__(self, limit_seconds: float) -> None:
        super().__init__(f"ingest exceeded {limit_seconds:g} s")
        self.limit_seconds = limit_seconds


class IngestAbortedError(IngestionError):
    """The run was stopped from outside before its commit; its pending points are removed."""


class ClientDisconnectedError(IngestAbortedError):
    """The client went away (mid-upload or mid-pipeline). 499 (nginx's convention): nobody reads it."""


class ShuttingDownError(IngestAbortedError):
    """The process is stopping and the shutdown grace period ran out (503: retry elsewhere)."""


class JobCancelledError(IngestAbortedError):
    """An async ingest job was cancelled with DELETE on its resource; never an HTTP answer, only a job's error."""


class JobNotFoundError(IngestionError):
    """No async ingest job with this id in this process: never created, expired, or lost in a restart (404)."""


class DocumentNotFoundError(IngestionError):
    """The collection holds no committed chunk of this file (404): never ingested there, deleted, or still pending."""


class TooManyDocumentsError(IngestionError):
    """A documents list or stats would read more documents than the in-memory limit (422)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} documents")
        self.limit = limit


class ReindexJobNotFoundError(IngestionError):
    """No reindex job with this id in this process's state directory (404)."""


class ReindexRunningError(IngestionError):
    """A reindex of the collection is already queued or running (409): one per collection at a time."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"reindex job {job_id} is unfinished")
        self.job_id = job_id


class SourceIndexNotFoundError(IngestionError):
    """A reindex's ``source_index`` names no Qdrant collection (404)."""


class JobQueueFullError(IngestionError):
    """INGEST_JOBS_MAX jobs are queued or running, none finished to drop (503: retry later or elsewhere)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"{limit} unfinished ingest jobs")
        self.limit = limit


class StagingFullError(IngestionError):
    """Documents staged for ingest already hold SCRATCH_MAX_BYTES (503: retry later or elsewhere).

    Checked before a body or S3 object is read, so the staging area (a pod's ``emptyDir``, a
    disk) never fills however many ingests wait for a slot.
    """

    def __init__(self, *, wanted: int, reserved: int, limit: int) -> None:
        super().__init__(
            f"staging {wanted} bytes would exceed SCRATCH_MAX_BYTES ({limit}); {reserved} bytes are staged"
        )
        self.wanted = wanted
        self.reserved = reserved
        self.limit = limit


class S3FetchError(IngestionError):
    """Reading the object from S3/MinIO failed (upstream error: 502)."""


class OriginalStoreError(IngestionError):
    """Keeping, reading or removing an original in ORIGINALS_DIR / ORIGINALS_BUCKET failed (502)."""


class CitationLinkRefusedError(IngestionError):
    """A citation link that is malformed, tampered with, signed under another key, or expired (403)."""

    def __init__(self, message: str, *, expired: bool) -> None:
        super().__init__(message)
        self.expired = expired


class CitationGoneError(IngestionError):
    """A valid citation link whose passage, original or page is no longer stored (404): the document
    was replaced, reindexed into new chunks, or deleted since the link was made."""


class CitationsDisabledError(IngestionError):
    """A citation route on a service without CITATION_SIGNING_KEY (404)."""


class UrlNotAllowedError(InvalidRequestError):
    """A URL the fetcher refuses to reach (422): not http(s), credentials in it, or a host that is
    (or redirects to) a private, loopback, link-local or otherwise non-public address.

    ``message`` (the body) names the rule, never the URL; ``internal`` (logs only) may name the host.
    """

    def __init__(self, message: str, *, internal: str | None = None) -> None:
        super().__init__(message)
        self.args = (internal or message,)


class UrlFetchFailedError(IngestionError):
    """The remote did not deliver the document (502): no such host, no connection, TLS, an HTTP
    error status, a broken or endless redirect chain."""

    def __init__(self, message: str, *, internal: str | None = None) -> None:
        super().__init__(internal or message)
        self.message = message


class UrlFetchTimeoutError(IngestionError):
    """The fetch took longer than URL_FETCH_TIMEOUT_SECONDS (504)."""

    def __init__(self, limit_seconds: float) -> None:
        super().__init__(f"fetch exceeded {limit_seconds:g} s")
        self.limit_seconds = limit_seconds


class UrlTooLargeError(DocumentTooLargeError):
    """The fetched document is over URL_FETCH_MAX_BYTES (413 DOCUMENT_TOO_LARGE, like the other size limits)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"The document at the URL is larger than URL_FETCH_MAX_BYTES ({limit} bytes).")


class UrlContentTypeError(UnsupportedContentError):
    """The remote's Content-Type is none the extraction reads (415 UNSUPPORTED_CONTENT)."""


class ExtractionError(IngestionError):
    """The converter failed.

    ``document_problem`` marks failures caused by the document itself (no text layer, encrypted,
    unsupported or corrupt format): 422, and the message is ``reason``. Engine or sidecar faults are
    500 with the generic message.
    """

    def __init__(self, message: str, *, document_problem: bool = False, reason: str | None = None) -> None:
        super().__init__(message)
        self.document_problem = document_problem
        self.reason = reason


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


class SparseEmbeddingFailedError(IngestionError):
    """Sparse embedding failed, or a chunk ended up without a sparse vector while sparse is on."""


class QdrantWriteError(IngestionError):
    """Writing points, or committing/cleaning a version, failed in Qdrant."""


class MetadataUpdateFailedError(QdrantWriteError):
    """Qdrant failed while setting a document's metadata (PATCH); one operation, so nothing or everything changed."""


class PipelineFailedError(IngestionError):
    """Any other pipeline failure."""


class NotReadyError(IngestionError):
    """The service is not ready (models warming up, Qdrant unreachable or the collection mismatched)."""


class DeleteFailedError(IngestionError):
    """Qdrant failed while deleting or reading a file's chunks."""


class SourceNotAllowedError(InvalidRequestError):
    """A source the server may not keep (422): a folder outside SOURCE_FOLDER_ROOTS, a bucket outside
    S3_ALLOWED_BUCKETS, a URL the fetcher refuses, an unknown scheme."""


class SourceNotFoundError(IngestionError):
    """No registered source with this id (404)."""


class SourceExistsError(IngestionError):
    """The same URI is already a source of this collection (409)."""

    def __init__(self, source_id: str) -> None:
        super().__init__(f"source {source_id} keeps this URI")
        self.source_id = source_id


class SourceSyncRunningError(IngestionError):
    """A sync of the source is already pending or running (409)."""


class SourceUnreadableError(IngestionError):
    """The source could not be listed (a folder gone, an S3 listing refused, a site without pages): its
    documents are left as they are (502)."""

    def __init__(self, message: str, *, internal: str | None = None) -> None:
        super().__init__(internal or message)
        self.message = message

"""The ingestion service's one error table: each typed error's wire code, status, message and hint.

The HTTP handlers (``api/errors.py``), the async jobs and the reindex runner all answer from it
(the errors' ``code``, ``status_code``, ``detail()`` read their row). INVALID_REQUEST,
EMBEDDING_FAILED, SPARSE_EMBEDDING_FAILED, PAYLOAD_TOO_LARGE and SHUTTING_DOWN are shared codes,
with their status and hint in ``shared_contract.error_codes``; this service's own codes are
registered here.
"""

from __future__ import annotations

from ingestion_service.errors import (
    BucketNotAllowedError,
    CitationGoneError,
    CitationLinkRefusedError,
    CitationsDisabledError,
    ClientDisconnectedError,
    DeleteFailedError,
    DocumentNotFoundError,
    DocumentTooLargeError,
    EmbeddingFailedError,
    EngineUnavailableError,
    ExtractionDependencyError,
    ExtractionError,
    ForbiddenRequestError,
    IngestAbortedError,
    IngestionError,
    IngestTimeoutError,
    InvalidRequestError,
    JobCancelledError,
    JobNotFoundError,
    JobQueueFullError,
    JsonBodyTooLargeError,
    MetadataUpdateFailedError,
    NoExtractableTextError,
    NotReadyError,
    OriginalStoreError,
    PayloadTooLargeError,
    PipelineFailedError,
    QdrantWriteError,
    ReindexJobNotFoundError,
    ReindexRunningError,
    ReservedCollectionError,
    S3FetchError,
    ShuttingDownError,
    SourceExistsError,
    SourceIndexNotFoundError,
    SourceNotAllowedError,
    SourceNotFoundError,
    SourceSyncRunningError,
    SourceUnreadableError,
    SparseEmbeddingFailedError,
    StagingFullError,
    TooManyDocumentsError,
    UnsupportedContentError,
    UnsupportedMediaTypeError,
    UrlContentTypeError,
    UrlFetchFailedError,
    UrlFetchTimeoutError,
    UrlNotAllowedError,
    UrlTooLargeError,
)
from shared_contract import ErrorCodeSpec
from shared_contract.error_codes import (
    EMBEDDING_FAILED,
    INVALID_REQUEST,
    PAYLOAD_TOO_LARGE,
    SHUTTING_DOWN,
    SPARSE_EMBEDDING_FAILED,
)
from shared_contract.error_table import ErrorTable, error_row

# This service's own codes: (status, hint).
_OWN_CODES: dict[str, tuple[int, str]] = {
    "EXTRACTION_FAILED": (
        500,
        "Check that the file opens in its own application (not encrypted, not damaged); compare engines "
        "with POST /api/v1/extract (form field engines=kreuzberg,tika,pypdf); the service's request_failed "
        "log line with this request_id has the cause.",
    ),
    "QDRANT_WRITE_FAILED": (
        500,
        "Check QDRANT_URI (or QDRANT_PATH) and that Qdrant is up with disk to spare (GET /health/ready), "
        "then ingest the file again; the previous version is kept.",
    ),
    "S3_FETCH_FAILED": (
        502,
        "Check that s3_bucket/s3_key name an existing object and the service's S3_ENDPOINT_URL, "
        "S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY; the request_failed log line has the S3 error.",
    ),
    "URL_NOT_ALLOWED": (
        422,
        "Send an http(s) URL of a public host, without credentials in it; for a host on your own network, "
        "add its network to URL_FETCH_ALLOW_NETWORKS on the ingestion service.",
    ),
    "URL_FETCH_FAILED": (
        502,
        "Check that the URL opens from the ingestion service's network (it answered an error, redirected "
        "too often, or could not be reached); the request_failed log line has the cause.",
    ),
    "URL_FETCH_TIMEOUT": (
        504,
        "The site answered too slowly: retry later, or raise URL_FETCH_TIMEOUT_SECONDS on the ingestion service.",
    ),
    "PIPELINE_FAILED": (
        500,
        "A fault inside the service: the request_failed log line with this request_id has the cause and "
        "traceback. Retry once; report it if it repeats.",
    ),
    "ORIGINAL_STORE_FAILED": (
        502,
        "Check ORIGINALS_DIR (disk space, permissions) or ORIGINALS_BUCKET and the S3 credentials, then send "
        "the request again; an ingest that failed this way kept the file's previous version.",
    ),
    "CITATION_LINK_INVALID": (
        403,
        "Open the citation from a fresh answer or search: links expire after CITATION_LINK_TTL_SECONDS and "
        "only open exactly as they were issued.",
    ),
    "CITATION_GONE": (
        404,
        "The document changed or was removed since the link was made: search again for a link to what is stored now.",
    ),
    "CITATIONS_DISABLED": (
        404,
        "Set CITATION_SIGNING_KEY (the same on the ingestion service and the retrieval agent) to open citation links.",
    ),
    "DELETE_FAILED": (500, "Check that Qdrant is up (GET /health/ready) and send the delete again; it is idempotent."),
    "DOCUMENT_TOO_LARGE": (
        413,
        "Split the document, or raise the limit the error names (MAX_UNPACKED_BYTES, MAX_EXTRACTED_CHARS, "
        "MAX_CHUNKS_PER_DOCUMENT) on the ingestion service.",
    ),
    "UNSUPPORTED_CONTENT": (
        415,
        "Send a document (PDF, Office, OpenDocument, HTML, text, image): the bytes were read as something "
        "else, whatever the file name says.",
    ),
    "INGEST_TIMEOUT": (
        504,
        "Raise INGEST_TIMEOUT_SECONDS on the ingestion service (and Open WebUI's EXTERNAL_INGESTION_TIMEOUT "
        "above it), or split the document; OCR of a long scan is slow.",
    ),
    "CLIENT_DISCONNECTED": (
        499,
        "The client closed the connection before the answer: raise its timeout (Open WebUI: "
        "EXTERNAL_INGESTION_TIMEOUT) and send the file again.",
    ),
    "JOB_NOT_FOUND": (
        404,
        "Poll the job on the replica that accepted it, within INGEST_JOB_TTL_SECONDS of its end; "
        "after a restart, submit the ingest again.",
    ),
    "JOB_QUEUE_FULL": (503, "Retry later, or raise INGEST_JOBS_MAX on the ingestion service."),
    "STAGING_FULL": (
        503,
        "Retry later: documents waiting for a pipeline slot fill the staging area. Or raise SCRATCH_MAX_BYTES "
        "on the ingestion service (with the disk or emptyDir under SCRATCH_DIR to match).",
    ),
    "JOB_CANCELLED": (
        499,
        "The job was cancelled (DELETE on the job): submit the ingest again if the file is still wanted.",
    ),
    "TOO_MANY_DOCUMENTS": (
        422,
        "Narrow the list with tag=, format= or category=, or split the knowledge base into several "
        "collections: the documents list and the collection stats read at most the number the error names.",
    ),
    "REINDEX_JOB_NOT_FOUND": (
        404,
        "Poll the job on the replica that accepted it (jobs are kept in that replica's INGEST_STATE_DIR); "
        "POST /api/v1/collections/<name>/reindex starts a new one.",
    ),
    "REINDEX_RUNNING": (
        409,
        "Poll the running job the error names, or cancel it with DELETE /api/v1/reindex/jobs/<job_id> and start again.",
    ),
    "SOURCE_INDEX_NOT_FOUND": (
        404,
        "Give the QDRANT_INDEX the collection lived in before (the Qdrant collection name, not the "
        "knowledge base), or leave source_index out to rebuild from this service's own index.",
    ),
    "SOURCE_NOT_ALLOWED": (
        422,
        "Register a folder or file:// under SOURCE_FOLDER_ROOTS, an s3:// prefix of a bucket S3_ALLOWED_BUCKETS "
        "lists, or an http(s) URL the fetcher may reach (URL_FETCH_ALLOW_NETWORKS for your own network).",
    ),
    "SOURCE_NOT_FOUND": (404, "List the registered sources with GET /api/v1/sources; a removed source is gone."),
    "SOURCE_EXISTS": (409, "Sync the source the error names (POST /api/v1/sources/<source_id>/sync) instead."),
    "SOURCE_SYNC_RUNNING": (409, "Poll GET /api/v1/sources/<source_id> until the running sync ends, then ask again."),
    "SOURCE_UNREADABLE": (
        502,
        "Check that the folder, S3 prefix or site is there and readable by the ingestion service; "
        "its documents were left as they were.",
    ),
}
CODES = tuple(ErrorCodeSpec(code=code, status=status, hint=hint) for code, (status, hint) in _OWN_CODES.items())

# Hints of the rows where one code covers causes with different remedies.
FORBIDDEN_HINT = "Use the collection_name the error names ('file-<file_id>' or 'user-memory-<user_id>')."
RESERVED_HINT = (
    "memory-* collections hold the retrieval agent's long-term memory: change facts through its "
    "/api/v1/memory, and put documents in another collection_name."
)
BUCKET_HINT = "Use a bucket S3_ALLOWED_BUCKETS lists, or add this one to it on the ingestion service."
UPLOAD_TOO_LARGE_HINT = "Send a smaller file, or raise MAX_UPLOAD_BYTES on the ingestion service."
JSON_TOO_LARGE_HINT = (
    "Send the document as a multipart upload or through S3 (s3_bucket, s3_key); a JSON body carries only the fields."
)
MEDIA_TYPE_HINT = "Send Content-Type application/json (a document in S3) or multipart/form-data (an upload)."
ENGINE_HINT = (
    "Pick another engine (EXTRACTION_ENGINE, or the request's engine field), or install the extra the error names."
)
NOT_READY_HINT = (
    "Wait until GET /health/ready answers 200; while it answers 503 its body says what is missing "
    "(models loading, Qdrant unreachable, collection mismatch)."
)
DEPENDENCY_HINT = "Check the setting the error names and that the service it points at is up, then retry."
METADATA_HINT = (
    "Check that Qdrant is up (GET /health/ready) and send the PATCH again; it is one operation, so the "
    "document kept either all of its old metadata or got all of the new."
)
URL_TOO_LARGE_HINT = "Fetch a smaller document, or raise URL_FETCH_MAX_BYTES on the ingestion service."
URL_CONTENT_TYPE_HINT = (
    "Fetch a page or document the extraction reads (HTML, text, Markdown, PDF, Office, OpenDocument, EPUB, "
    "RTF, e-mail, images): the site's Content-Type names none of them."
)
NO_TEXT_HINT = (
    "The document has no text layer: keep ENABLE_OCR=true (the default) on the ingestion service, "
    "or send a version with text."
)

# The fixed messages several rows share.
PIPELINE_FAILED_MESSAGE = "Indexing pipeline failed."
INVALID_MESSAGE = "Invalid request."
TOO_LARGE_MESSAGE = "The document is too large to index."
EXTRACTION_FAILED_MESSAGE = "Document extraction failed."


# The messages built from an error's values.
def _source_exists_detail(exc: SourceExistsError) -> str:
    return f"This URI is already a source of the collection: GET /api/v1/sources/{exc.source_id}."


def _source_unreadable_detail(exc: SourceUnreadableError) -> str:
    return exc.message


def _timeout_detail(exc: IngestTimeoutError) -> str:
    return (
        f"Ingesting the document took longer than INGEST_TIMEOUT_SECONDS ({exc.limit_seconds:g} s); "
        "nothing was stored and the previous version is unchanged."
    )


def _too_many_detail(exc: TooManyDocumentsError) -> str:
    return (
        f"The selection holds more than {exc.limit} documents, the most the documents list and "
        "collection stats read at once."
    )


def _reindex_running_detail(exc: ReindexRunningError) -> str:
    return (
        f"A reindex of this collection is already queued or running: job {exc.job_id} "
        f"(GET /api/v1/reindex/jobs/{exc.job_id})."
    )


def _queue_full_detail(exc: JobQueueFullError) -> str:
    return f"{exc.limit} ingest jobs (INGEST_JOBS_MAX) are queued or running; retry later."


def _staging_full_detail(exc: StagingFullError) -> str:
    return (
        f"Documents waiting to be ingested hold {exc.reserved} bytes of the staging area and this one needs "
        f"{exc.wanted} more, over SCRATCH_MAX_BYTES ({exc.limit}); retry later."
    )


def _url_refusal_detail(exc: UrlNotAllowedError | UrlFetchFailedError) -> str:
    return exc.message


def _url_timeout_detail(exc: UrlFetchTimeoutError) -> str:
    return f"Fetching the URL took longer than URL_FETCH_TIMEOUT_SECONDS ({exc.limit_seconds:g} s)."


def _extraction_status(exc: ExtractionError) -> int:
    return 422 if exc.document_problem else 500


def _extraction_detail(exc: ExtractionError) -> str | None:
    """The document's own problem when it has one; else None (the generic message)."""
    return exc.reason if exc.document_problem else None


def _dependency_detail(exc: ExtractionDependencyError) -> str:
    return f"Document extraction failed: {exc.dependency} {exc.problem} (check {exc.setting})."


# Errors whose text is written to be shown (InvalidRequestError and the size and content refusals)
# carry it as ``detail=str``; the fixed message is the class's generic one. A row without
# ``server_fault=False`` is a failure; a 5xx one is logged with its traceback unless ``cause_only``.
ERROR_TABLE = ErrorTable(
    [
        error_row(IngestionError, "PIPELINE_FAILED", message=PIPELINE_FAILED_MESSAGE),
        error_row(InvalidRequestError, INVALID_REQUEST, message=INVALID_MESSAGE, detail=str),
        error_row(
            ForbiddenRequestError, INVALID_REQUEST, 403, message=INVALID_MESSAGE, detail=str, hint=FORBIDDEN_HINT
        ),
        error_row(
            ReservedCollectionError, INVALID_REQUEST, 403, message=INVALID_MESSAGE, detail=str, hint=RESERVED_HINT
        ),
        error_row(BucketNotAllowedError, INVALID_REQUEST, 403, message=INVALID_MESSAGE, detail=str, hint=BUCKET_HINT),
        error_row(
            JsonBodyTooLargeError, PAYLOAD_TOO_LARGE, message=INVALID_MESSAGE, detail=str, hint=JSON_TOO_LARGE_HINT
        ),
        error_row(
            UnsupportedMediaTypeError, INVALID_REQUEST, 415, message=INVALID_MESSAGE, detail=str, hint=MEDIA_TYPE_HINT
        ),
        error_row(EngineUnavailableError, INVALID_REQUEST, message=INVALID_MESSAGE, detail=str, hint=ENGINE_HINT),
        error_row(DocumentTooLargeError, "DOCUMENT_TOO_LARGE", message=TOO_LARGE_MESSAGE, detail=str),
        error_row(
            PayloadTooLargeError,
            "DOCUMENT_TOO_LARGE",
            message=TOO_LARGE_MESSAGE,
            detail=str,
            hint=UPLOAD_TOO_LARGE_HINT,
        ),
        error_row(
            UnsupportedContentError,
            "UNSUPPORTED_CONTENT",
            message="The file's content is not a supported document type.",
            detail=str,
        ),
        error_row(
            IngestTimeoutError,
            "INGEST_TIMEOUT",
            message="Ingesting the document took too long.",
            detail=_timeout_detail,
            server_fault=False,
        ),
        # The aborted runs: stopped from outside, not failed.
        error_row(IngestAbortedError, "PIPELINE_FAILED", message=PIPELINE_FAILED_MESSAGE, server_fault=False),
        error_row(
            ClientDisconnectedError,
            "CLIENT_DISCONNECTED",
            message="The client disconnected; the ingest was aborted.",
            server_fault=False,
        ),
        error_row(
            ShuttingDownError,
            SHUTTING_DOWN,
            message="The service is shutting down; the ingest was aborted. Retry it.",
            server_fault=False,
        ),
        error_row(
            JobCancelledError,
            "JOB_CANCELLED",
            message="The ingest job was cancelled; nothing was stored and the previous version is kept.",
            server_fault=False,
        ),
        error_row(
            JobNotFoundError,
            "JOB_NOT_FOUND",
            message=(
                "No ingest job with this id: unknown, finished longer than INGEST_JOB_TTL_SECONDS ago, "
                "or created by another process or before a restart (jobs live in memory)."
            ),
            server_fault=False,
        ),
        error_row(
            DocumentNotFoundError,
            "DOCUMENT_NOT_FOUND",
            message="No document with this file_id in this collection.",
            server_fault=False,
        ),
        error_row(
            TooManyDocumentsError,
            "TOO_MANY_DOCUMENTS",
            message="The collection holds too many documents to list or summarise at once.",
            detail=_too_many_detail,
            server_fault=False,
        ),
        error_row(
            ReindexJobNotFoundError,
            "REINDEX_JOB_NOT_FOUND",
            message="No reindex job with this id on this replica.",
            server_fault=False,
        ),
        error_row(
            ReindexRunningError,
            "REINDEX_RUNNING",
            message="A reindex of this collection is already queued or running.",
            detail=_reindex_running_detail,
            server_fault=False,
        ),
        error_row(
            SourceIndexNotFoundError,
            "SOURCE_INDEX_NOT_FOUND",
            message="The source_index names no existing Qdrant collection.",
            server_fault=False,
        ),
        # The sources the server keeps in step (ingestion_service.sources).
        error_row(SourceNotAllowedError, "SOURCE_NOT_ALLOWED", message="The source may not be kept.", detail=str),
        error_row(SourceNotFoundError, "SOURCE_NOT_FOUND", message="No source with this id.", server_fault=False),
        error_row(
            SourceExistsError,
            "SOURCE_EXISTS",
            message="This URI is already a source of the collection.",
            detail=_source_exists_detail,
            server_fault=False,
        ),
        error_row(
            SourceSyncRunningError,
            "SOURCE_SYNC_RUNNING",
            message="A sync of this source is already pending or running.",
            server_fault=False,
        ),
        error_row(
            SourceUnreadableError,
            "SOURCE_UNREADABLE",
            message="The source could not be listed.",
            detail=_source_unreadable_detail,
            cause_only=True,
        ),
        # Load, not a fault: logged at WARNING.
        error_row(
            JobQueueFullError,
            "JOB_QUEUE_FULL",
            message="Too many ingest jobs are queued or running; retry later.",
            detail=_queue_full_detail,
            server_fault=False,
        ),
        error_row(
            StagingFullError,
            "STAGING_FULL",
            message="Too many documents are staged for ingest; retry later.",
            detail=_staging_full_detail,
            server_fault=False,
        ),
        # A typed dependency failure whose message is the whole story (docs/contract.md, "One log line per failure").
        error_row(S3FetchError, "S3_FETCH_FAILED", message="S3 object fetch failed.", cause_only=True),
        # The URL fetcher's refusals and failures (adapters/url_fetcher.py); bodies never name the URL.
        error_row(
            UrlNotAllowedError,
            "URL_NOT_ALLOWED",
            message="The URL may not be fetched.",
            detail=_url_refusal_detail,
            server_fault=False,
        ),
        error_row(
            UrlFetchFailedError,
            "URL_FETCH_FAILED",
            message="Fetching the URL failed.",
            detail=_url_refusal_detail,
            cause_only=True,
        ),
        error_row(
            UrlFetchTimeoutError,
            "URL_FETCH_TIMEOUT",
            message="Fetching the URL took too long.",
            detail=_url_timeout_detail,
            server_fault=False,
        ),
        error_row(
            UrlTooLargeError, "DOCUMENT_TOO_LARGE", message=TOO_LARGE_MESSAGE, detail=str, hint=URL_TOO_LARGE_HINT
        ),
        error_row(
            UrlContentTypeError,
            "UNSUPPORTED_CONTENT",
            message="The URL's content is not a supported document type.",
            detail=str,
            hint=URL_CONTENT_TYPE_HINT,
        ),
        error_row(
            ExtractionError,
            "EXTRACTION_FAILED",
            _extraction_status,
            message=EXTRACTION_FAILED_MESSAGE,
            detail=_extraction_detail,
        ),
        error_row(
            ExtractionDependencyError,
            "EXTRACTION_FAILED",
            message=EXTRACTION_FAILED_MESSAGE,
            detail=_dependency_detail,
            hint=DEPENDENCY_HINT,
        ),
        error_row(
            NoExtractableTextError,
            "EXTRACTION_FAILED",
            422,
            message=EXTRACTION_FAILED_MESSAGE,
            detail=_extraction_detail,
            hint=NO_TEXT_HINT,
        ),
        error_row(EmbeddingFailedError, EMBEDDING_FAILED, 500, message="Embedding step failed."),
        error_row(SparseEmbeddingFailedError, SPARSE_EMBEDDING_FAILED, 500, message="Sparse embedding step failed."),
        error_row(QdrantWriteError, "QDRANT_WRITE_FAILED", message="Writing to Qdrant failed."),
        error_row(
            MetadataUpdateFailedError,
            "QDRANT_WRITE_FAILED",
            message="Updating the document's metadata failed.",
            hint=METADATA_HINT,
        ),
        error_row(PipelineFailedError, "PIPELINE_FAILED", message=PIPELINE_FAILED_MESSAGE),
        error_row(NotReadyError, "PIPELINE_FAILED", 503, message="The service is not ready yet.", hint=NOT_READY_HINT),
        error_row(DeleteFailedError, "DELETE_FAILED", message="Deleting the document's chunks failed."),
        error_row(
            OriginalStoreError, "ORIGINAL_STORE_FAILED", message="The store of originals failed.", cause_only=True
        ),
        error_row(
            CitationLinkRefusedError,
            "CITATION_LINK_INVALID",
            message="The citation link is refused.",
            detail=str,
            server_fault=False,
        ),
        error_row(
            CitationGoneError,
            "CITATION_GONE",
            message="The cited passage is no longer stored.",
            detail=str,
            server_fault=False,
        ),
        error_row(
            CitationsDisabledError,
            "CITATIONS_DISABLED",
            message="Citation links are off on this service.",
            server_fault=False,
        ),
    ],
    codes=CODES,
    fallback_code="PIPELINE_FAILED",
    fallback_message=PIPELINE_FAILED_MESSAGE,
)
# What the errors' code, status_code and detail() read.
IngestionError.table = ERROR_TABLE

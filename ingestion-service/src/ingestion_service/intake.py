"""Request gates and the hand-off to the pipeline, shared by the ingest and extract routes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from starlette.types import Receive

from ingestion_service.adapters.s3 import ObjectHead
from ingestion_service.documents import SourceFile
from ingestion_service.documents.base import plain_suffix
from ingestion_service.documents.sniffing import digest_source, inspect_source, source_format
from ingestion_service.errors import (
    BucketNotAllowedError,
    ClientDisconnectedError,
    ForbiddenRequestError,
    IngestionError,
    InvalidRequestError,
    NotReadyError,
    PayloadTooLargeError,
    ReservedCollectionError,
)
from ingestion_service.pipeline.indexing import (
    DocumentLabels,
    IndexingRunner,
    IngestJob,
    IngestOutcome,
    SourceIdentity,
)
from ingestion_service.run_control import RunControl
from ingestion_service.runtime import ServiceRuntime
from ingestion_service.settings import Settings
from rag_runtime.http import ErrorBody
from shared_contract import file_collection_name, user_memory_collection_name
from shared_contract.attributes import AttributeType, check_attributes
from shared_contract.schema import FILE_COLLECTION_PREFIX, MEMORY_COLLECTION_PREFIX, USER_MEMORY_COLLECTION_PREFIX

# The OpenAPI declaration of the rules below, for the routes that apply them.
FORBIDDEN_RESPONSE: dict[int | str, dict[str, Any]] = {
    403: {
        "model": ErrorBody,
        "description": (
            "INVALID_REQUEST: a rule refused it (a bucket not in S3_ALLOWED_BUCKETS, a `file-*` or "
            "`user-memory-*` collection not bound to the request's ids, a `memory-*` collection)."
        ),
    }
}


def check_not_memory(collection_name: str | None) -> None:
    """``memory-*`` tenants are the retrieval agent's long-term memory, which only its memory service writes:
    ingest and the documents API refuse them (403)."""
    if collection_name is not None and collection_name.startswith(MEMORY_COLLECTION_PREFIX):
        raise ReservedCollectionError(
            "collection_name 'memory-…' is reserved for long-term memory (the retrieval agent's /api/v1/memory)."
        )


def check_collection_binding(collection_name: str, *, file_id: str, user_id: str) -> None:
    """``file-*`` must be this file's collection, ``user-memory-*`` this user's, and ``memory-*`` belongs to
    the retrieval agent's long-term memory (403 otherwise)."""
    check_not_memory(collection_name)
    if collection_name.startswith(USER_MEMORY_COLLECTION_PREFIX):
        if collection_name != user_memory_collection_name(user_id):
            raise ForbiddenRequestError("collection_name 'user-memory-…' must equal 'user-memory-<user_id>'.")
    elif collection_name.startswith(FILE_COLLECTION_PREFIX) and collection_name != file_collection_name(file_id):
        raise ForbiddenRequestError("collection_name 'file-…' must equal 'file-<file_id>'.")


def check_bucket(settings: Settings, bucket: str) -> None:
    """S3_ALLOWED_BUCKETS, when set, lists the only buckets the service reads (403 otherwise)."""
    allowed = settings.allowed_buckets
    if allowed and bucket not in allowed:
        raise BucketNotAllowedError("s3_bucket is not in S3_ALLOWED_BUCKETS.")


def upload_path(workdir: Path, filename: str) -> Path:
    """Where the source goes: a fixed stem, the caller's suffix only if it is plain (engines sniff by it)."""
    return workdir / f"source{plain_suffix(filename)}"


async def make_workdir(runtime: ServiceRuntime) -> Path:
    """A private staging directory for one request (under the app's scratch space)."""
    return await runtime.scratch.new_workdir()


def reserve_upload(runtime: ServiceRuntime, workdir: Path, content_length: str | None) -> None:
    """Reserve an upload's staging room before its body is read: the declared length, at most
    MAX_UPLOAD_BYTES (a larger body is refused while it is read), else MAX_UPLOAD_BYTES;
    STAGING_FULL when SCRATCH_MAX_BYTES cannot take it."""
    limit = runtime.settings.max_upload_bytes
    declared = int(content_length) if content_length is not None and content_length.isdigit() else limit
    runtime.scratch.reserve(workdir, min(declared, limit))


async def remove_workdir(runtime: ServiceRuntime, workdir: Path) -> None:
    """Always called: the request's files never outlive it (a crash's leftovers go at the next start)."""
    await runtime.scratch.remove_workdir(workdir)


async def prepare_source(runtime: ServiceRuntime, path: Path, filename: str) -> SourceFile:
    """Content checks before any engine runs (see ``documents/sniffing.py``), in a worker thread."""
    return await anyio.to_thread.run_sync(inspect_source, path, filename, runtime.settings)


async def fetch_from_s3(runtime: ServiceRuntime, bucket: str, key: str, destination: Path) -> ObjectHead:
    """head_object size check and the staging reservation (``destination`` is in the request's
    directory), then a capped, streamed download, both in worker threads."""
    limit = runtime.settings.max_upload_bytes
    head = await anyio.to_thread.run_sync(runtime.s3.head, bucket, key)
    if head.size > limit:
        raise PayloadTooLargeError(limit)
    runtime.scratch.reserve(destination.parent, head.size)
    size = await anyio.to_thread.run_sync(lambda: runtime.s3.download(bucket, key, destination, max_bytes=limit))
    return replace(head, size=size)


async def identify_source(
    source: SourceFile, *, s3_bucket: str | None = None, s3_key: str | None = None, s3_etag: str | None = None
) -> SourceIdentity:
    """sha256, size and format of the staged source (hashed in a worker thread)."""
    digest = await anyio.to_thread.run_sync(digest_source, source.path)
    return SourceIdentity(
        sha256=digest.sha256,
        size=digest.size,
        format=source_format(source),
        s3_bucket=s3_bucket,
        s3_key=s3_key,
        s3_etag=s3_etag,
    )


def labels_from(
    fields: DocumentLabels, declared: Mapping[str, AttributeType], s3_metadata: Mapping[str, str] | None = None
) -> DocumentLabels:
    """The request's labels, attributes checked against INDEXED_ATTRIBUTES; S3 object metadata
    (``x-amz-meta-tags``: comma-separated, ``x-amz-meta-category``) fills what the request leaves out."""
    tags, category = fields.tags, fields.category
    if s3_metadata:
        if tags is None and s3_metadata.get("tags", "").strip():
            tags = list(dict.fromkeys(tag.strip() for tag in s3_metadata["tags"].split(",") if tag.strip()))
        if category is None and s3_metadata.get("category", "").strip():
            category = s3_metadata["category"].strip()
    attributes = fields.attributes
    if attributes is not None:
        try:
            attributes = check_attributes(attributes, declared)
        except ValueError as exc:
            raise InvalidRequestError(f"Invalid request: attributes: {exc}.") from exc
    return DocumentLabels(tags=tags, category=category, attributes=attributes)


async def ready_runner(runtime: ServiceRuntime) -> IndexingRunner:
    """The pipeline runner once models are warm and the collection is bootstrapped (503 before)."""
    if not runtime.readiness.collection_ready and not await runtime.ensure_collection():
        raise NotReadyError(runtime.readiness.collection_error or "collection not ready")
    if runtime.runner is None and not await runtime.ensure_pipeline():
        raise NotReadyError(runtime.readiness.pipeline_error or "pipeline warming up")
    assert runtime.runner is not None  # ensure_pipeline() is true only once the runner is built
    return runtime.runner


async def require_qdrant(runtime: ServiceRuntime) -> None:
    """Delete and inspection need only the collection (503 before it is bootstrapped)."""
    if not runtime.readiness.collection_ready and not await runtime.ensure_collection():
        raise NotReadyError(runtime.readiness.collection_error or "collection not ready")


async def _abort_on_disconnect(receive: Receive, control: RunControl) -> None:
    # The body is fully read, so the next ASGI message is the disconnect (or never comes).
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            control.abort(ClientDisconnectedError("client disconnected during the ingest"))
            return


async def run_job(runtime: ServiceRuntime, runner: IndexingRunner, job: IngestJob, receive: Receive) -> IngestOutcome:
    """The pipeline in a worker thread, at most INGEST_CONCURRENCY at once per process.

    A client that disconnects aborts the run: it stops at its next checkpoint, its pending
    points are removed and the previous version stays.
    """
    control = runner.new_control()
    outcome: IngestOutcome | None = None
    error: IngestionError | None = None
    async with anyio.create_task_group() as watchers:
        watchers.start_soon(_abort_on_disconnect, receive, control)
        try:
            outcome = await runner.ingest(job, limiter=runtime.limiter, control=control)
        except IngestionError as exc:
            error = exc  # raised outside the task group, so it is not wrapped in an ExceptionGroup
        finally:
            watchers.cancel_scope.cancel()
    if error is not None:
        raise error
    assert outcome is not None
    return outcome

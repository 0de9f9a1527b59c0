"""A request's source on local disk: its private directory under the scratch space, an upload's room
reserved before its body is read, an S3 object fetched within MAX_UPLOAD_BYTES, a URL's document
fetched within URL_FETCH_MAX_BYTES, the content checks, and the identity (sha256, size, format) of
what was staged."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import anyio
import anyio.to_thread

from ingestion_service.adapters.s3 import ObjectHead
from ingestion_service.adapters.url_fetcher import FetchedDocument
from ingestion_service.documents import SourceFile
from ingestion_service.documents.base import plain_suffix
from ingestion_service.documents.sniffing import digest_source, inspect_source, source_format
from ingestion_service.errors import PayloadTooLargeError
from ingestion_service.indexing.job import SourceIdentity
from ingestion_service.runtime import ServiceRuntime


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


async def fetch_url(runtime: ServiceRuntime, url: str, workdir: Path) -> FetchedDocument:
    """The document at ``url`` staged in ``workdir`` under the name engines should see it by; room for
    URL_FETCH_MAX_BYTES is reserved first (STAGING_FULL when SCRATCH_MAX_BYTES cannot take it)."""
    runtime.scratch.reserve(workdir, runtime.settings.url_fetch_max_bytes)
    fetched = await runtime.urls.fetch(url, workdir / "download.part")
    path = upload_path(workdir, fetched.filename)
    await anyio.to_thread.run_sync(fetched.path.rename, path)
    return replace(fetched, path=path)


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

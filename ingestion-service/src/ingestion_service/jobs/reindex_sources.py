"""Where a reindex job's documents come from: the tenant's committed documents listed from their heads,
and each one's ingest rebuilt from what the index holds.

* stored with ``s3_bucket``/``s3_key``: the object is read from S3 again (changed bytes are taken as
  they are now; a deleted object fails that document only);
* otherwise its kept original (``indexing.originals``), extracted again like a new upload, so the
  rebuilt document keeps its pages and regions;
* without one (KEEP_ORIGINALS=false, or stored before originals were kept): the extracted pages,
  rebuilt from the committed chunks with their stored page and extractor metadata, are re-chunked
  and re-embedded under the stored source identity.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from haystack import Document
from qdrant_client import models

from ingestion_service.adapters.document_catalog import DocumentCatalog, PageText
from ingestion_service.adapters.originals import OriginalKey
from ingestion_service.documents import SourceFile
from ingestion_service.documents.base import plain_suffix
from ingestion_service.errors import PipelineFailedError, SourceIndexNotFoundError
from ingestion_service.indexing.job import DocumentLabels, IngestJob, SourceIdentity
from ingestion_service.indexing.versioning import RunVersion
from ingestion_service.intake.gates import check_bucket
from ingestion_service.intake.staging import fetch_from_s3, identify_source, prepare_source, upload_path
from ingestion_service.jobs.reindex_state import ReindexRecord
from ingestion_service.pipeline.components.file_converter import check_extracted_size, require_text
from ingestion_service.runtime import ServiceRuntime
from ingestion_service.settings import Settings
from rag_runtime.store import (
    ChunkStore,
    PointRecord,
    close_store,
    match,
    open_store,
    pending_condition,
    scroll_pages,
    tenant_condition,
)
from shared_contract import PAYLOAD_META, ContractError, MetaKey, meta_path

_PAGE = 1024
# What a rebuilt page keeps of its first chunk's metadata: the keys the extractor gave (the page, title,
# authors, languages, extractor, and the unnamed ones: mime_type, OCR details, ...). Every other
# contract key is the run's to stamp again (request, chunk and version keys).
_EXTRACTED_KEYS = frozenset({MetaKey.PAGE, MetaKey.TITLE, MetaKey.AUTHORS, MetaKey.LANGUAGES, MetaKey.EXTRACTOR})
_RESTAMPED_KEYS = frozenset(value for name, value in vars(MetaKey).items() if name.isupper()) - _EXTRACTED_KEYS


def open_source_index(settings: Settings, source_index: str) -> ChunkStore:
    """The store of QDRANT_INDEX ``source_index``, where a tenant lived before (an embedding-model change).
    Only payloads are read from there, so its manifest (another embedding model) is not checked."""
    return open_store(settings.model_copy(update={"qdrant_index": source_index}))


async def check_source_index(settings: Settings, source_index: str) -> None:
    """404 SOURCE_INDEX_NOT_FOUND when ``source_index`` has no collection."""
    store = open_source_index(settings, source_index)
    try:
        exists = await store.collection_exists()
    except ContractError as exc:
        raise PipelineFailedError(f"checking source_index {source_index!r} failed: {exc}") from exc
    finally:
        await close_store(store)
    if not exists:
        raise SourceIndexNotFoundError(f"no collection {source_index!r}")


@asynccontextmanager
async def source_store(runtime: ServiceRuntime, source_index: str | None) -> AsyncIterator[ChunkStore]:
    """Where a job reads documents and text: the service's own store, or ``source_index``'s (closed after)."""
    if source_index is None:
        yield runtime.store
        return
    store = open_source_index(runtime.settings, source_index)
    try:
        if not await store.collection_exists():
            raise SourceIndexNotFoundError(f"no collection {source_index!r}")
        yield store
    finally:
        with anyio.CancelScope(shield=True):
            await close_store(store)


def _meta(record: PointRecord) -> dict[str, Any]:
    meta = record.payload.get(PAYLOAD_META)
    return meta if isinstance(meta, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def document_ids(store: ChunkStore, collection_name: str) -> list[str]:
    """The file_ids of the tenant's committed documents, in the order a job takes them."""
    selector = models.Filter(
        must=[tenant_condition([collection_name]), match(MetaKey.SPLIT_ID, 0)], must_not=[pending_condition()]
    )
    found: set[str] = set()
    async for page in scroll_pages(store, selector, page_size=_PAGE, with_payload=[meta_path(MetaKey.FILE_ID)]):
        for record in page:
            file_id = _meta(record).get(MetaKey.FILE_ID)
            if isinstance(file_id, str):
                found.add(file_id)
    return sorted(found)


def stored_identity(head: dict[str, Any]) -> SourceIdentity | None:
    """The stored source's identity; None for data from before contract 2.1 (re-embedded by every reindex)."""
    sha256 = _text(head.get(MetaKey.SOURCE_HASH))
    if sha256 is None:
        return None
    return SourceIdentity(
        sha256=sha256,
        size=_int(head.get(MetaKey.SOURCE_BYTES)) or 0,
        format=_text(head.get(MetaKey.FORMAT)) or "unknown",
    )


def s3_origin(head: dict[str, Any]) -> tuple[str, str] | None:
    bucket, key = _text(head.get(MetaKey.S3_BUCKET)), _text(head.get(MetaKey.S3_KEY))
    return (bucket, key) if bucket is not None and key is not None else None


def document_name(head: dict[str, Any], file_id: str) -> str:
    """The name a job shows for a document: its name, else its source, else its id."""
    return _text(head.get(MetaKey.NAME)) or _text(head.get(MetaKey.SOURCE)) or file_id


async def already_built(
    runtime: ServiceRuntime, record: ReindexRecord, head: dict[str, Any], file_id: str, fingerprint: str
) -> bool:
    """A text-sourced document this index already holds under these settings (the runner would say unchanged).

    Answered from the heads, so an unchanged document costs no chunk reads; an S3 document is
    read again whatever its fingerprint, since its object may have changed.
    """
    if record.force or s3_origin(head) is not None:
        return False
    source_hash = _text(head.get(MetaKey.SOURCE_HASH))
    if source_hash is None:
        return False
    target = head if record.source_index is None else await runtime.index.head(file_id, record.collection_name)
    return (
        target is not None
        and target.get(MetaKey.SOURCE_HASH) == source_hash
        and target.get(MetaKey.INGEST_FINGERPRINT) == fingerprint
    )


def rebuilt_pages(pages: Sequence[PageText]) -> list[Document]:
    """An upload's extracted documents as its chunks hold them: one per page, with the extractor's metadata."""
    return [
        Document(content=page.text, meta={key: value for key, value in page.meta.items() if key not in _RESTAMPED_KEYS})
        for page in pages
    ]


def stage_pages(pages: Sequence[PageText], path: Path, max_chars: int | None) -> tuple[Document, ...]:
    """The rebuilt pages, checked as an extraction is, their text written to ``path`` (the job's source file).

    Blocking (up to MAX_EXTRACTED_CHARS of text): a worker thread.
    """
    documents = rebuilt_pages(pages)
    check_extracted_size(documents, max_chars)
    require_text(documents)
    path.write_text("\n\n".join(document.content or "" for document in documents), encoding="utf-8")
    return tuple(documents)


async def kept_original(
    runtime: ServiceRuntime, record: ReindexRecord, head: dict[str, Any], file_id: str, name: str, workdir: Path
) -> tuple[SourceFile, SourceIdentity] | None:
    """The document's kept original staged in ``workdir`` with its stored identity; None when none is kept."""
    identity = stored_identity(head)
    if runtime.originals is None or identity is None:
        return None
    # Engines choose their parser by suffix: a name without one (a fetched URL) is staged under the
    # stored format's; the name itself is kept for listings and citations (``IngestJob.name``).
    staged_name = name if plain_suffix(name) else f"original.{identity.format}"
    path = upload_path(workdir, staged_name)
    runtime.scratch.reserve(workdir, identity.size)
    key = OriginalKey(record.collection_name, file_id, identity.sha256)
    if not await runtime.originals.fetch(key, path):
        return None
    return await prepare_source(runtime, path, staged_name), identity


async def ingest_job_for(
    runtime: ServiceRuntime,
    record: ReindexRecord,
    source: ChunkStore,
    head: dict[str, Any],
    file_id: str,
    name: str,
    workdir: Path,
    fingerprint: str,
) -> IngestJob:
    """The ingest of one document: its S3 object fetched again, or its stored text (module docstring)."""
    origin = s3_origin(head)
    identity: SourceIdentity | None
    extracted: tuple[Document, ...] | None = None
    if origin is not None:
        bucket, key = origin
        check_bucket(runtime.settings, bucket)
        path = upload_path(workdir, name)
        object_head = await fetch_from_s3(runtime, bucket, key, path)
        staged = await prepare_source(runtime, path, name)
        identity = await identify_source(staged, s3_bucket=bucket, s3_key=key, s3_etag=object_head.etag)
    elif (original := await kept_original(runtime, record, head, file_id, name, workdir)) is not None:
        staged, identity = original
    else:
        # No bytes of the upload: its extracted pages are rebuilt from the committed chunks and the
        # pipeline starts after extraction. The identity stays the stored one, so a later upload or
        # sync of the same original file still counts as unchanged.
        pages = await DocumentCatalog(source).read_pages(file_id, record.collection_name)
        path = workdir / "source.md"
        extracted = await anyio.to_thread.run_sync(stage_pages, pages, path, runtime.settings.max_extracted_chars)
        staged = SourceFile(path=path, filename=name, media_type="text/markdown")
        identity = stored_identity(head)
    return IngestJob(
        source=staged,
        # The stored name, whatever name the source was staged under.
        name=name,
        file_id=file_id,
        collection_name=record.collection_name,
        collection_type=_text(head.get(MetaKey.COLLECTION_TYPE)) or "file",
        user_id=_text(head.get(MetaKey.USER_ID)) or "",
        overwrite=True,
        # Taken as the document starts: an upload of the same file after that wins, as for any ingest.
        run=RunVersion.new(),
        identity=identity,
        labels=DocumentLabels().filled_from(head),
        fingerprint=fingerprint,
        force=record.force,
        path=_text(head.get(MetaKey.PATH)),
        # A source's document keeps where it came from and when (the next sync refreshes them).
        source_uri=_text(head.get(MetaKey.SOURCE_URI)),
        fetched_at=_text(head.get(MetaKey.FETCHED_AT)),
        extracted=extracted,
        source_is_original=extracted is None,
    )

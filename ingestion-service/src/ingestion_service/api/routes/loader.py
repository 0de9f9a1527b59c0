"""PUT /process: stock Open WebUI's external document loader (EXTERNAL_DOCUMENT_LOADER_URL).

Open WebUI sends the raw file as the body, ``Content-Type: <mime>``, ``X-Filename: <url-quoted
name>`` and ``Authorization: Bearer <key>``, and reads ``{page_content, metadata}`` or a list of
them (one per page here, so its citations get pages). Extraction is the ingest path's: the same
content sniffing, engine (EXTRACTION_ENGINE, ``auto`` included), OCR and limits. Each failure is
logged with its code and request id and counted in ``loader_requests_total``.

With LOADER_INDEX_UPLOADS the same extracted documents are also indexed, before the answer, as an
ingest of tenant ``file-<id>`` would index them (versioning, unchanged fast path, limits): Open
WebUI 0.12.4 names the file by its storage name, ``quote(basename(path))`` = ``<id>_<name>``
(``<id>.<ext>`` or ``<id>`` when the name was too long for its file system), ``<id>`` being the
file's UUID. A name without that id is answered but not indexed (counted ``skipped``). A failed
indexing is the answer, so Open WebUI marks the file failed rather than use a file search lacks.
"""

from __future__ import annotations

import logging
import mimetypes
import re
from dataclasses import dataclass, replace
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any
from urllib.parse import unquote

from fastapi import APIRouter, Request
from haystack import Document
from pydantic import BaseModel

from ingestion_service.api.deps import RuntimeDep
from ingestion_service.api.models import check_filename
from ingestion_service.api.openapi import LOADER_BODY
from ingestion_service.api.uploads import save_raw_body
from ingestion_service.documents import SourceFile
from ingestion_service.errors import IngestionError, InvalidRequestError
from ingestion_service.indexing.fingerprint import ingest_fingerprint
from ingestion_service.indexing.job import IngestJob, IngestOutcome
from ingestion_service.indexing.runner import IndexingRunner
from ingestion_service.indexing.versioning import RunVersion
from ingestion_service.intake.extract_file import extract_file, page_metadata
from ingestion_service.intake.handoff import ready_runner, run_job
from ingestion_service.intake.staging import (
    identify_source,
    make_workdir,
    remove_workdir,
    reserve_upload,
    upload_path,
)
from ingestion_service.runtime import ServiceRuntime
from rag_runtime.http import note_request_fields
from shared_contract import file_collection_name

logger = logging.getLogger(__name__)

router = APIRouter(tags=["open-webui loader"])

LOADER_PATHS = ("/process", "/api/v1/process")
DEFAULT_STEM = "upload"
_UNKNOWN_MIME = "application/octet-stream"
# Open WebUI's file ids are uuid4 strings; its storage name is "<id>_<name>", or "<id>.<ext>" / "<id>"
# when that name is too long for the file system (routers/files.py, upload_file_handler).
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_STORAGE_NAME = re.compile(rf"(?P<file_id>{_UUID})(?:_(?P<name>.+)|\.[^.]+)?")
# Open WebUI sends the uploader's id unless FORWARD_USER_INFO_HEADER_JWT_SECRET replaces it with a JWT.
USER_ID_HEADER = "x-openwebui-user-id"
NO_FILE_ID = "NO_FILE_ID"


class LoadedPage(BaseModel):
    """One element of the answer, as LangChain's Document reads it."""

    page_content: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class UploadKey:
    """Where an Open WebUI upload is indexed: its file id and the name people know it by."""

    file_id: str
    name: str

    @property
    def collection_name(self) -> str:
        """The tenant Open WebUI uses for this one file."""
        return file_collection_name(self.file_id)


def upload_key(filename: str) -> UploadKey | None:
    """The file id and display name in Open WebUI's storage name, None when it holds no file id.

    ``<id>_<name>`` gives ``<name>``; the shortened ``<id>.<ext>`` / ``<id>`` keep the storage name.
    """
    match = _STORAGE_NAME.fullmatch(filename)
    if match is None:
        return None
    name = match["name"]
    return UploadKey(file_id=match["file_id"], name=name if name else filename)


def loader_filename(header: str | None, content_type: str | None) -> str:
    """The file's name from ``X-Filename`` (URL-quoted, maybe a path), else one from the MIME type."""
    name = unquote(header or "").strip()
    # Open WebUI sends a basename, but a path from another client must not become one here.
    name = PureWindowsPath(PurePosixPath(name).name).name
    if not name:
        mime = (content_type or "").split(";")[0].strip().lower()
        # "application/octet-stream" names no format (its guess, ".bin", no engine reads): without
        # an extension the bytes decide, as for any file named without one.
        guessed = mimetypes.guess_extension(mime) if mime != _UNKNOWN_MIME else None
        name = DEFAULT_STEM + (guessed or "")
    try:
        check_filename(name)
    except ValueError as exc:
        raise InvalidRequestError(f"Invalid request: the X-Filename header {exc}.") from exc
    return name


@dataclass(frozen=True)
class _Indexing:
    """An upload to index once extracted: its key, the runner, the run's version (taken at request start)."""

    key: UploadKey
    runner: IndexingRunner
    run: RunVersion


async def _indexing_for(request: Request, runtime: ServiceRuntime, filename: str) -> _Indexing | None:
    """What LOADER_INDEX_UPLOADS asks for this upload (the runner checked ready before the body is read)."""
    if not runtime.settings.loader_index_uploads:
        return None
    run = RunVersion.new()
    key = upload_key(filename)
    if key is None:
        runtime.metrics.loader_indexing.labels(outcome="skipped", code=NO_FILE_ID).inc()
        logger.warning(
            "upload not indexed: X-Filename %r is not Open WebUI's storage name <file-id>_<name>; "
            "the extraction is answered as usual",
            filename,
        )
        return None
    note_request_fields(request, file_id=key.file_id, collection_name=key.collection_name)
    return _Indexing(key=key, runner=await ready_runner(runtime), run=run)


async def _index(
    request: Request,
    runtime: ServiceRuntime,
    indexing: _Indexing,
    source: SourceFile,
    documents: list[Document],
) -> IngestOutcome:
    """The extracted ``documents`` through the rest of the ingest pipeline, as tenant ``file-<id>``."""
    settings = runtime.settings
    key = indexing.key
    job = IngestJob(
        source=replace(source, filename=key.name),
        file_id=key.file_id,
        collection_name=key.collection_name,
        collection_type="file",
        user_id=request.headers.get(USER_ID_HEADER, ""),
        overwrite=True,
        run=indexing.run,
        identity=await identify_source(source),
        fingerprint=ingest_fingerprint(settings, settings.extraction_engine),
        extracted=tuple(documents),
    )
    metrics = runtime.metrics.loader_indexing
    try:
        outcome = await run_job(runtime, indexing.runner, job, request.receive)
    except IngestionError as exc:
        metrics.labels(outcome="error", code=exc.code).inc()
        raise
    label = "unchanged" if outcome.unchanged else "superseded" if outcome.superseded else "indexed"
    metrics.labels(outcome=label, code="OK").inc()
    logger.info(
        "upload %s: %d chunks",
        label,
        outcome.chunks_count,
        extra={"file_id": key.file_id, "collection_name": key.collection_name, "ingest_version": job.run.version},
    )
    return outcome


async def _load(request: Request, runtime: RuntimeDep) -> list[LoadedPage]:
    settings = runtime.settings
    filename = loader_filename(request.headers.get("x-filename"), request.headers.get("content-type"))
    indexing = await _indexing_for(request, runtime, filename)
    workdir = await make_workdir(runtime)
    try:
        path = upload_path(workdir, filename)
        reserve_upload(runtime, workdir, request.headers.get("content-length"))
        size = await save_raw_body(request, path, max_bytes=settings.max_upload_bytes)
        if size == 0:
            raise InvalidRequestError("Invalid request: the body is empty; send the file's bytes as the body.")
        extracted = await extract_file(runtime, path, filename)
        if indexing is not None:
            await _index(request, runtime, indexing, extracted.source, extracted.documents)
    finally:
        await remove_workdir(runtime, workdir)
    return [
        LoadedPage(
            page_content=document.content or "",
            metadata={"source": filename, **page_metadata(document, extracted.engine)},
        )
        for document in extracted.documents
    ]


@router.put(LOADER_PATHS[0], response_model=list[LoadedPage], openapi_extra=LOADER_BODY)
@router.put(LOADER_PATHS[1], response_model=list[LoadedPage], openapi_extra=LOADER_BODY, include_in_schema=False)
async def process(request: Request, runtime: RuntimeDep) -> list[LoadedPage]:
    """The raw file in, its text out: one ``{page_content, metadata}`` per page (or per document)."""
    try:
        pages = await _load(request, runtime)
    except IngestionError as exc:
        # Open WebUI marks the file failed with our body; the count shows failures on /metrics, and
        # the error handler writes the request_failed line with the cause.
        runtime.metrics.loader_requests.labels(outcome="error", code=exc.code).inc()
        raise
    runtime.metrics.loader_requests.labels(outcome="success", code="").inc()
    return pages

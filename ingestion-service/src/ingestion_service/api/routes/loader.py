"""PUT /process: stock Open WebUI's external document loader (EXTERNAL_DOCUMENT_LOADER_URL).

Open WebUI sends the raw file as the body, ``Content-Type: <mime>``, ``X-Filename: <url-quoted
name>`` and ``Authorization: Bearer <key>``, and reads ``{page_content, metadata}`` or a list of
them (one per page here, so its citations get pages). Extraction is the ingest path's: the same
content sniffing, engine (EXTRACTION_ENGINE, ``auto`` included), OCR and limits; nothing is stored.
Open WebUI silently falls back to its own loader on any failure, so each failure is logged with its
code and request id and counted in ``loader_requests_total``.
"""

from __future__ import annotations

import functools
import mimetypes
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any
from urllib.parse import unquote

from fastapi import APIRouter, Request
from pydantic import BaseModel

from ingestion_service.api.deps import RuntimeDep
from ingestion_service.api.models import check_filename
from ingestion_service.api.openapi import LOADER_BODY
from ingestion_service.api.uploads import save_raw_body
from ingestion_service.errors import IngestionError, InvalidRequestError
from ingestion_service.intake.staging import make_workdir, prepare_source, remove_workdir, reserve_upload, upload_path
from ingestion_service.pipeline.components.file_converter import EXTRACTOR_KEY, convert_checked
from ingestion_service.run_control import run_bounded

router = APIRouter(tags=["open-webui loader"])

LOADER_PATHS = ("/process", "/api/v1/process")
DEFAULT_STEM = "upload"
_UNKNOWN_MIME = "application/octet-stream"
# What a citation needs; the rest of the extractor's metadata stays internal.
_METADATA_KEYS = (
    "page",
    "title",
    "authors",
    "languages",
    "mime_type",
    EXTRACTOR_KEY,
    "extraction_route",
    "vision_profile",
    "ocr",
)


class LoadedPage(BaseModel):
    """One element of the answer, as LangChain's Document reads it."""

    page_content: str
    metadata: dict[str, Any]


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


async def _load(request: Request, runtime: RuntimeDep) -> list[LoadedPage]:
    settings = runtime.settings
    filename = loader_filename(request.headers.get("x-filename"), request.headers.get("content-type"))
    workdir = await make_workdir(runtime)
    try:
        path = upload_path(workdir, filename)
        reserve_upload(runtime, workdir, request.headers.get("content-length"))
        size = await save_raw_body(request, path, max_bytes=settings.max_upload_bytes)
        if size == 0:
            raise InvalidRequestError("Invalid request: the body is empty; send the file's bytes as the body.")
        source = await prepare_source(runtime, path, filename)
        converter = runtime.registry.get(settings.extraction_engine)
        documents = await run_bounded(
            functools.partial(convert_checked, converter, source, max_chars=settings.max_extracted_chars),
            timeout_seconds=settings.ingest_timeout_seconds,
            limiter=runtime.limiter,
        )
    finally:
        await remove_workdir(runtime, workdir)
    pages: list[LoadedPage] = []
    for document in documents:
        metadata = {key: document.meta[key] for key in _METADATA_KEYS if key in document.meta}
        metadata.setdefault(EXTRACTOR_KEY, converter.name)
        pages.append(LoadedPage(page_content=document.content or "", metadata={"source": filename, **metadata}))
    return pages


@router.put(LOADER_PATHS[0], response_model=list[LoadedPage], openapi_extra=LOADER_BODY)
@router.put(LOADER_PATHS[1], response_model=list[LoadedPage], openapi_extra=LOADER_BODY, include_in_schema=False)
async def process(request: Request, runtime: RuntimeDep) -> list[LoadedPage]:
    """The raw file in, its text out: one ``{page_content, metadata}`` per page (or per document)."""
    try:
        pages = await _load(request, runtime)
    except IngestionError as exc:
        # Open WebUI only logs the status and falls back to its own loader: the count makes the
        # fallback visible; the error handler writes the request_failed line with the cause.
        runtime.metrics.loader_requests.labels(outcome="error", code=exc.code).inc()
        raise
    runtime.metrics.loader_requests.labels(outcome="success", code="").inc()
    return pages

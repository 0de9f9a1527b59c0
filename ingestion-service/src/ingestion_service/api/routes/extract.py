"""POST /api/v1/extract: run only the converter on an upload (developer probe)."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Request

from ingestion_service.adapters.extractors import ROUTING_MODES
from ingestion_service.api.deps import RuntimeDep
from ingestion_service.api.models import ExtractedDocument, ExtractResponse, check_filename
from ingestion_service.api.openapi import EXTRACT_BODY
from ingestion_service.api.uploads import parse_multipart
from ingestion_service.errors import ExtractionError, IngestionError, InvalidRequestError, UnsupportedMediaTypeError
from ingestion_service.intake import make_workdir, prepare_source, remove_workdir, upload_path
from ingestion_service.pipeline.components.file_converter import check_extracted_size, require_text

router = APIRouter(prefix="/api/v1", tags=["extract"])

_FIELDS = frozenset({"engine", "profile"})


@router.post("/extract", response_model=ExtractResponse, openapi_extra=EXTRACT_BODY)
async def extract(request: Request, runtime: RuntimeDep) -> ExtractResponse:
    """Multipart ``file`` plus optional ``engine`` (a concrete engine) and ``profile`` (vision engines)."""
    content_type = request.headers.get("content-type", "").lower()
    if not content_type.startswith("multipart/form-data"):
        raise UnsupportedMediaTypeError(content_type)
    workdir = await make_workdir(runtime)
    try:
        form = await parse_multipart(request, workdir / "upload.part", max_file_bytes=runtime.settings.max_upload_bytes)
        if form.file_path is None:
            raise InvalidRequestError("Invalid request: the 'file' part is required.")
        unknown = sorted(set(form.fields) - _FIELDS)
        if unknown:
            raise InvalidRequestError(f"Invalid request: unknown form field(s) {', '.join(unknown)}.")
        engine = (form.fields.get("engine") or "").strip() or runtime.settings.extraction_engine
        profile = (form.fields.get("profile") or "").strip() or None
        if engine in ROUTING_MODES:
            raise InvalidRequestError(f"Invalid request: {engine!r} is a routing mode; name a concrete engine.")
        converter = runtime.registry.get(engine)
        if profile is not None and profile not in converter.profiles:
            if not converter.profiles:
                raise InvalidRequestError(f"Invalid request: engine {engine!r} takes no profile.")
            raise InvalidRequestError(
                f"Invalid request: unknown profile {profile!r} for {engine!r}; known: {', '.join(sorted(converter.profiles))}."
            )
        filename = form.upload_filename or "upload"
        try:
            check_filename(filename)
        except ValueError as exc:
            raise InvalidRequestError(f"Invalid request: the file part's filename {exc}.") from exc
        source_path = upload_path(workdir, filename)
        form.file_path.rename(source_path)
        source = await prepare_source(runtime, source_path, filename)
        try:
            documents = await anyio.to_thread.run_sync(
                lambda: converter.convert(source, profile=profile), limiter=runtime.limiter
            )
        except IngestionError:
            raise
        except Exception as exc:  # an engine bug is still an extraction failure, typed as one
            raise ExtractionError(f"{engine}: {type(exc).__name__}: {exc}") from exc
        check_extracted_size(documents, runtime.settings.max_extracted_chars)
        require_text(documents)
    finally:
        await remove_workdir(runtime, workdir)
    return ExtractResponse(
        engine=converter.name,
        profile=profile,
        documents=[ExtractedDocument(content=doc.content or "", meta=dict(doc.meta)) for doc in documents],
    )

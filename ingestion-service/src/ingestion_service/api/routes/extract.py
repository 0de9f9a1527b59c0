"""POST /api/v1/extract: run only the converter on an upload (developer probe, engine comparison)."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Request
from haystack import Document

from ingestion_service.api.deps import RuntimeDep
from ingestion_service.api.errors import error_message
from ingestion_service.api.models import EngineError, EngineResult, ExtractedDocument, ExtractResponse, check_filename
from ingestion_service.api.openapi import EXTRACT_BODY
from ingestion_service.api.uploads import parse_multipart
from ingestion_service.documents import Converter, SourceFile
from ingestion_service.documents.ocr_words import OCR_WORDS_KEY
from ingestion_service.errors import IngestionError, InvalidRequestError, UnsupportedMediaTypeError
from ingestion_service.intake.staging import make_workdir, prepare_source, remove_workdir, reserve_upload, upload_path
from ingestion_service.pipeline.components.file_converter import EXTRACTOR_KEY, convert_checked
from ingestion_service.run_control import run_bounded
from ingestion_service.runtime import ServiceRuntime
from shared_contract.attributes import shown_key

router = APIRouter(prefix="/api/v1", tags=["extract"])

_FIELDS = frozenset({"engine", "engines", "profile"})
# A comparison runs every engine on the same upload one after another; keep it a probe.
MAX_COMPARED_ENGINES = 8
ROUTE_KEY = "extraction_route"


def _choices(query: Sequence[tuple[str, str]], form: Mapping[str, str]) -> dict[str, str]:
    """``engine``, ``engines`` and ``profile`` from the form or the query string (``?engines=a,b`` is
    what people type), each given once."""
    unknown = sorted(set(form) - _FIELDS)
    if unknown:
        raise InvalidRequestError(f"Invalid request: unknown form field(s) {', '.join(map(shown_key, unknown))}.")
    names = [name for name, _ in query]
    unknown = sorted(set(names) - _FIELDS)
    if unknown:
        raise InvalidRequestError(
            f"Invalid request: unknown query parameter(s) {', '.join(map(shown_key, unknown[:10]))}."
        )
    repeated = sorted(name for name in set(names) if names.count(name) > 1 or name in form)
    if repeated:
        raise InvalidRequestError(f"Invalid request: {', '.join(map(shown_key, repeated))} given more than once.")
    return {**form, **dict(query)}


def _engine_names(engine: str, engines: str, default: str) -> list[str]:
    if engine and engines:
        raise InvalidRequestError("Invalid request: send either 'engine' or 'engines', not both.")
    if engines:
        names = [name.strip().lower() for name in engines.split(",") if name.strip()]
        if not names:
            raise InvalidRequestError("Invalid request: 'engines' names no engine.")
        if len(set(names)) != len(names):
            raise InvalidRequestError("Invalid request: 'engines' names an engine twice.")
        if len(names) > MAX_COMPARED_ENGINES:
            raise InvalidRequestError(f"Invalid request: at most {MAX_COMPARED_ENGINES} engines per comparison.")
        return names
    return [(engine or default).strip().lower()]


def _check_profile(profile: str | None, converters: list[Converter]) -> None:
    if profile is None or any(profile in converter.profiles for converter in converters):
        return
    aware = [converter for converter in converters if converter.profiles]
    if not aware:
        names = ", ".join(repr(converter.name) for converter in converters)
        raise InvalidRequestError(f"Invalid request: engine {names} takes no profile.")
    known = sorted({name for converter in aware for name in converter.profiles})
    raise InvalidRequestError(f"Invalid request: profile must be one of {', '.join(known)}.")


def _result(converter: Converter, documents: list[Document], seconds: float, profile: str | None) -> EngineResult:
    first = documents[0].meta if documents else {}
    used_profile = first.get("vision_profile") or (profile if profile in converter.profiles else None)
    return EngineResult(
        engine=str(first.get(EXTRACTOR_KEY) or converter.name),
        profile=used_profile,
        route=first.get(ROUTE_KEY),
        seconds=round(seconds, 3),
        characters=sum(len(document.content or "") for document in documents),
        pages=len({document.meta["page"] for document in documents if "page" in document.meta}),
        documents=[ExtractedDocument(content=doc.content or "", meta=_shown_meta(doc.meta)) for doc in documents],
    )


def _shown_meta(meta: dict[str, Any]) -> dict[str, Any]:
    # The OCR word boxes are the pipeline's input for chunk regions, thousands per page: not shown.
    return {key: value for key, value in meta.items() if key != OCR_WORDS_KEY}


async def _compare(
    runtime: ServiceRuntime, converters: list[Converter], source: SourceFile, profile: str | None, *, debug: bool
) -> list[EngineResult]:
    results: list[EngineResult] = []
    for converter in converters:
        started = time.perf_counter()
        try:
            documents = await run_bounded(
                functools.partial(
                    convert_checked, converter, source, profile=profile, max_chars=runtime.settings.max_extracted_chars
                ),
                timeout_seconds=runtime.settings.ingest_timeout_seconds,
                limiter=runtime.limiter,
            )
        except IngestionError as exc:
            results.append(
                EngineResult(
                    engine=converter.name,
                    profile=profile if profile in converter.profiles else None,
                    seconds=round(time.perf_counter() - started, 3),
                    error=EngineError(code=exc.code, error=error_message(exc, debug=debug)),
                )
            )
            continue
        results.append(_result(converter, documents, time.perf_counter() - started, profile))
    return results


@router.post("/extract", response_model=ExtractResponse, openapi_extra=EXTRACT_BODY)
async def extract(request: Request, runtime: RuntimeDep) -> ExtractResponse:
    """Multipart ``file`` plus ``engine`` (one engine, or ``auto``) or ``engines`` (a comma-separated
    list compared side by side), and ``profile`` (vision engines): form fields or query parameters."""
    content_type = request.headers.get("content-type", "").lower()
    if not content_type.startswith("multipart/form-data"):
        raise UnsupportedMediaTypeError(content_type)
    workdir = await make_workdir(runtime)
    try:
        reserve_upload(runtime, workdir, request.headers.get("content-length"))
        form = await parse_multipart(request, workdir / "upload.part", max_file_bytes=runtime.settings.max_upload_bytes)
        if form.file_path is None:
            raise InvalidRequestError("Invalid request: the 'file' part is required.")
        choices = _choices(request.query_params.multi_items(), form.fields)
        names = _engine_names(
            (choices.get("engine") or "").strip(),
            (choices.get("engines") or "").strip(),
            runtime.settings.extraction_engine,
        )
        profile = (choices.get("profile") or "").strip().lower() or None
        converters = [runtime.registry.get(name) for name in names]
        _check_profile(profile, converters)
        filename = form.upload_filename or "upload"
        try:
            check_filename(filename)
        except ValueError as exc:
            raise InvalidRequestError(f"Invalid request: the file part's filename {exc}.") from exc
        source_path = upload_path(workdir, filename)
        form.file_path.rename(source_path)
        source = await prepare_source(runtime, source_path, filename)
        if len(converters) == 1:
            # One engine: its failure is the response's error, as on ingest.
            started = time.perf_counter()
            documents = await run_bounded(
                lambda: convert_checked(
                    converters[0], source, profile=profile, max_chars=runtime.settings.max_extracted_chars
                ),
                timeout_seconds=runtime.settings.ingest_timeout_seconds,
                limiter=runtime.limiter,
            )
            results = [_result(converters[0], documents, time.perf_counter() - started, profile)]
        else:
            results = await _compare(runtime, converters, source, profile, debug=runtime.settings.debug)
    finally:
        await remove_workdir(runtime, workdir)
    lead = next((result for result in results if result.error is None), results[0])
    return ExtractResponse(
        engine=lead.engine,
        profile=lead.profile,
        route=lead.route,
        seconds=lead.seconds,
        characters=lead.characters,
        pages=lead.pages,
        documents=lead.documents,
        results=results if len(results) > 1 else None,
    )

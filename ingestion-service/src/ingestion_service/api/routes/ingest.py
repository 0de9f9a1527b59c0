"""PUT /api/v1/ingest: JSON (S3/MinIO object) or multipart (direct upload)."""

from __future__ import annotations

import json
import logging
import time

import anyio
from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.requests import ClientDisconnect

from ingestion_service.api.deps import RuntimeDep
from ingestion_service.api.models import ExtractionInfo, IngestFields, IngestRequestJSON, IngestResponse
from ingestion_service.api.openapi import INGEST_BODY
from ingestion_service.api.uploads import parse_form_bool, parse_multipart
from ingestion_service.errors import (
    ClientDisconnectedError,
    IngestAbortedError,
    IngestionError,
    IngestTimeoutError,
    InvalidRequestError,
    JsonBodyTooLargeError,
    UnsupportedMediaTypeError,
)
from ingestion_service.intake import (
    check_bucket,
    check_collection_binding,
    fetch_from_s3,
    make_workdir,
    prepare_source,
    ready_runner,
    remove_workdir,
    run_job,
    upload_path,
)
from ingestion_service.pipeline.indexing import IngestJob
from ingestion_service.pipeline.versioning import RunVersion

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/api/v1", tags=["ingest"])

MAX_JSON_BYTES = 64 * 1024
_FORM_FIELDS = frozenset(IngestFields.model_fields)


def _pydantic_message(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:5]:
        location = ".".join(str(part) for part in error["loc"]) or "body"
        parts.append(f"{location}: {error['msg']}")
    return "Invalid request: " + "; ".join(parts)


async def _json_fields(request: Request) -> IngestRequestJSON:
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_JSON_BYTES:
                raise JsonBodyTooLargeError(MAX_JSON_BYTES)
    except ClientDisconnect as exc:
        raise ClientDisconnectedError("client disconnected while sending the body") from exc
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise InvalidRequestError("Invalid request: body is not valid JSON.") from exc
    if not isinstance(data, dict):
        raise InvalidRequestError("Invalid request: body must be a JSON object.")
    try:
        return IngestRequestJSON.model_validate(data)
    except ValidationError as exc:
        raise InvalidRequestError(_pydantic_message(exc)) from exc


def _form_fields(fields: dict[str, str]) -> IngestFields:
    unknown = sorted(set(fields) - _FORM_FIELDS)
    if unknown:
        raise InvalidRequestError(f"Invalid request: unknown form field(s) {', '.join(unknown)}.")
    values: dict[str, object] = {name: value for name, value in fields.items() if name != "overwrite"}
    for required in ("file_id", "filename", "collection_name", "user_id"):
        if not str(values.get(required, "")).strip():
            raise InvalidRequestError(f"Invalid request: form field {required!r} is required.")
    if not str(values.get("collection_type", "")).strip():
        values.pop("collection_type", None)
    values["overwrite"] = parse_form_bool("overwrite", fields.get("overwrite"), default=True)
    try:
        return IngestFields.model_validate(values)
    except ValidationError as exc:
        raise InvalidRequestError(_pydantic_message(exc)) from exc


@router.put("/ingest", response_model=IngestResponse, response_model_exclude_none=True, openapi_extra=INGEST_BODY)
async def ingest(request: Request, runtime: RuntimeDep) -> IngestResponse:
    """Extract, chunk, embed and write one file; replaces its previous version atomically."""
    started = time.perf_counter()
    metrics = runtime.metrics
    run = RunVersion.new()  # taken at request start: later requests win
    workdir = await make_workdir(runtime)
    try:
        content_type = request.headers.get("content-type", "").lower()
        if content_type.startswith("application/json"):
            body = await _json_fields(request)
            fields: IngestFields = body
            check_collection_binding(body.collection_name, file_id=body.file_id, user_id=body.user_id)
            check_bucket(runtime.settings, body.s3_bucket)
            runner = await ready_runner(runtime)
            source_path = upload_path(workdir, body.filename)
            size = await fetch_from_s3(runtime, body.s3_bucket, body.s3_key, source_path)
        elif content_type.startswith("multipart/form-data"):
            runner = await ready_runner(runtime)
            form = await parse_multipart(
                request, workdir / "upload.part", max_file_bytes=runtime.settings.max_upload_bytes
            )
            if form.file_path is None:
                raise InvalidRequestError("Invalid request: the 'file' part is required.")
            fields = _form_fields(form.fields)
            check_collection_binding(fields.collection_name, file_id=fields.file_id, user_id=fields.user_id)
            source_path = upload_path(workdir, fields.filename)
            form.file_path.rename(source_path)
            size = form.file_size
        else:
            raise UnsupportedMediaTypeError(content_type)
        metrics.ingest_document_bytes.observe(size)
        job = IngestJob(
            source=await prepare_source(runtime, source_path, fields.filename),
            file_id=fields.file_id,
            collection_name=fields.collection_name,
            collection_type=fields.collection_type,
            user_id=fields.user_id,
            overwrite=fields.overwrite,
            run=run,
        )
        outcome = await run_job(runtime, runner, job, request.receive)
    except IngestAbortedError as exc:
        # Not a failure of the service: the client left, or the process is stopping.
        metrics.ingest_requests.labels(outcome="aborted", code=exc.code).inc()
        logger.warning("ingest aborted (%s); nothing was stored, the previous version is kept", exc.code)
        raise
    except IngestTimeoutError as exc:
        metrics.ingest_requests.labels(outcome="failure", code=exc.code).inc()
        logger.warning(
            "ingest stopped after INGEST_TIMEOUT_SECONDS (%g s); the previous version is kept", exc.limit_seconds
        )
        raise
    except IngestionError as exc:
        metrics.ingest_requests.labels(outcome="failure", code=exc.code).inc()
        raise
    except anyio.get_cancelled_exc_class():
        metrics.ingest_requests.labels(outcome="aborted", code="SHUTTING_DOWN").inc()
        raise
    except Exception:
        metrics.ingest_requests.labels(outcome="failure", code="PIPELINE_FAILED").inc()
        raise
    finally:
        metrics.ingest_duration.observe(time.perf_counter() - started)
        await remove_workdir(runtime, workdir)
    label = "kept" if outcome.kept_existing else "superseded" if outcome.superseded else "success"
    metrics.ingest_requests.labels(outcome=label, code="OK").inc()
    if not outcome.kept_existing:
        metrics.ingest_chunks.observe(outcome.chunks_count)
    return IngestResponse(
        collection_name=fields.collection_name,
        chunks_count=outcome.chunks_count,
        extraction=ExtractionInfo(
            engine=outcome.engine,
            ingest_version=None if outcome.kept_existing else run.version,
            superseded=outcome.superseded,
            kept_existing=outcome.kept_existing,
        ),
    )

"""PUT /api/v1/ingest: JSON (an S3/MinIO object, or a web page or document by ``url``) or multipart
(direct upload).

Synchronous by default: the answer comes when the document is indexed. ``Prefer: respond-async``
(RFC 7240) or ``?mode=async`` asks for a 202 once the document is staged and checked, with a job
to poll (``jobs.py``, ``routes/jobs.py``); ``?mode=sync`` keeps the synchronous answer whatever
the header says.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from ingestion_service.adapters.s3 import ObjectHead
from ingestion_service.api.deps import JobsDep, RuntimeDep
from ingestion_service.api.errors import error_message, hint_of
from ingestion_service.api.models import (
    ExtractionInfo,
    IngestAccepted,
    IngestBase,
    IngestFields,
    IngestForm,
    IngestRequestJSON,
    IngestRequestURL,
    IngestResponse,
)
from ingestion_service.api.openapi import INGEST_BODY
from ingestion_service.api.routes.jobs import job_url
from ingestion_service.api.uploads import parse_multipart, read_json_object
from ingestion_service.api.validation import invalid_request
from ingestion_service.errors import (
    IngestAbortedError,
    IngestionError,
    IngestTimeoutError,
    InvalidRequestError,
    UnsupportedMediaTypeError,
)
from ingestion_service.indexing.fingerprint import ingest_fingerprint
from ingestion_service.indexing.job import DocumentLabels, IngestJob, IngestOutcome
from ingestion_service.indexing.runner import IndexingRunner
from ingestion_service.indexing.versioning import RunVersion
from ingestion_service.intake.gates import FORBIDDEN_RESPONSE, check_bucket, check_collection_binding, labels_from
from ingestion_service.intake.handoff import ready_runner, run_job
from ingestion_service.intake.staging import (
    fetch_from_s3,
    fetch_url,
    identify_source,
    make_workdir,
    prepare_source,
    remove_workdir,
    reserve_upload,
    upload_path,
)
from ingestion_service.jobs.ingest import JobRegistry, JobSnapshot
from ingestion_service.metrics import IngestMetrics
from ingestion_service.run_control import RunControl
from ingestion_service.runtime import ServiceRuntime
from rag_runtime.http import error_content, note_request_fields, request_id_of
from shared_contract.error_body import ErrorBody

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/api/v1", tags=["ingest"], responses=FORBIDDEN_RESPONSE)

MAX_JSON_BYTES = 64 * 1024
RESPOND_ASYNC = "respond-async"

ModeQuery = Annotated[
    Literal["sync", "async"] | None,
    Query(
        description="async: answer 202 with a job to poll once the document is staged (as `Prefer: respond-async`); "
        "sync: answer when indexed, whatever `Prefer` says. Default: `Prefer`, else sync."
    ),
]


async def _json_fields(request: Request) -> IngestRequestJSON | IngestRequestURL:
    data = await read_json_object(request, max_bytes=MAX_JSON_BYTES)
    if "url" in data and ("s3_bucket" in data or "s3_key" in data):
        raise InvalidRequestError("Invalid request: send either url or s3_bucket and s3_key, not both.")
    model: type[IngestRequestJSON | IngestRequestURL] = IngestRequestURL if "url" in data else IngestRequestJSON
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid_request(exc) from exc


def _form_fields(fields: dict[str, str]) -> IngestForm:
    try:
        return IngestForm.model_validate(fields)
    except ValidationError as exc:
        raise invalid_request(exc, form=True) from exc


def prefers_async(prefer_headers: list[str]) -> bool:
    """Whether ``Prefer`` holds ``respond-async`` (RFC 7240: comma-separated, case-insensitive, may take params)."""
    for header in prefer_headers:
        for preference in header.split(","):
            token = preference.split(";", 1)[0].split("=", 1)[0].strip().lower()
            if token == RESPOND_ASYNC:
                return True
    return False


@contextmanager
def _counted(metrics: IngestMetrics, *, control: RunControl | None = None, warn: bool = True) -> Iterator[None]:
    """Count a failed or aborted ingest in ``ingest_requests_total`` (and log the expected ones when ``warn``)."""
    try:
        yield
    except IngestAbortedError as exc:
        # Not a failure of the service: the client left, the job was cancelled, or the process is stopping.
        metrics.ingest_requests.labels(outcome="aborted", code=exc.code).inc()
        if warn:
            logger.warning("ingest aborted (%s); nothing was stored, the previous version is kept", exc.code)
        raise
    except IngestTimeoutError as exc:
        metrics.ingest_requests.labels(outcome="failure", code=exc.code).inc()
        if warn:
            logger.warning(
                "ingest stopped after INGEST_TIMEOUT_SECONDS (%g s); the previous version is kept", exc.limit_seconds
            )
        raise
    except IngestionError as exc:
        metrics.ingest_requests.labels(outcome="failure", code=exc.code).inc()
        raise
    except anyio.get_cancelled_exc_class():
        reason = control.aborted if control is not None else None
        metrics.ingest_requests.labels(outcome="aborted", code=reason.code if reason else "SHUTTING_DOWN").inc()
        raise
    except Exception:
        metrics.ingest_requests.labels(outcome="failure", code="PIPELINE_FAILED").inc()
        raise


def _count_success(metrics: IngestMetrics, outcome: IngestOutcome) -> None:
    if outcome.kept_existing:
        label = "kept"
    elif outcome.unchanged:
        label = "unchanged"
    elif outcome.superseded:
        label = "superseded"
    else:
        label = "success"
    metrics.ingest_requests.labels(outcome=label, code="OK").inc()
    if not (outcome.kept_existing or outcome.unchanged):
        metrics.ingest_chunks.observe(outcome.chunks_count)


def _response(job: IngestJob, outcome: IngestOutcome) -> IngestResponse:
    version = outcome.live_version if outcome.unchanged or outcome.kept_existing else job.run.version
    if outcome.kept_existing:
        content_hash = outcome.stored_hash
    else:
        content_hash = job.identity.sha256 if job.identity is not None else None
    return IngestResponse(
        collection_name=job.collection_name,
        chunks_count=outcome.chunks_count,
        unchanged=outcome.unchanged,
        content_hash=content_hash,
        extraction=ExtractionInfo(
            engine=outcome.engine,
            ingest_version=version,
            superseded=outcome.superseded,
            kept_existing=outcome.kept_existing,
            reused_vectors=outcome.reused_vectors,
        ),
    )


async def _stage(
    request: Request, runtime: ServiceRuntime, workdir: Path, run: RunVersion
) -> tuple[IndexingRunner, IngestJob]:
    """Read and check the request, stage the document in ``workdir`` and check its content."""
    content_type = request.headers.get("content-type", "").lower()
    head: ObjectHead | None = None
    name: str | None = None  # what listings and citations show, when not the file name
    if content_type.startswith("application/json"):
        body = await _json_fields(request)
        fields: IngestBase = body
        note_request_fields(request, file_id=body.file_id, collection_name=body.collection_name)
        check_collection_binding(body.collection_name, file_id=body.file_id, user_id=body.user_id)
        if isinstance(body, IngestRequestJSON):
            check_bucket(runtime.settings, body.s3_bucket)
        # The request's own labels are checked before the download (again with the object's metadata after).
        labels_from(_labels(body), runtime.settings.attribute_types)
        runner = await ready_runner(runtime)
        if isinstance(body, IngestRequestURL):
            fetched = await fetch_url(runtime, body.url, workdir)
            source_path, filename, name, size = fetched.path, fetched.filename, body.url, fetched.size
        else:
            filename = body.filename
            source_path = upload_path(workdir, filename)
            head = await fetch_from_s3(runtime, body.s3_bucket, body.s3_key, source_path)
            size = head.size
    elif content_type.startswith("multipart/form-data"):
        runner = await ready_runner(runtime)
        reserve_upload(runtime, workdir, request.headers.get("content-length"))
        form = await parse_multipart(request, workdir / "upload.part", max_file_bytes=runtime.settings.max_upload_bytes)
        if form.file_path is None:
            raise InvalidRequestError("Invalid request: the 'file' part is required.")
        form_fields = _form_fields(form.fields)
        fields = form_fields
        note_request_fields(request, file_id=fields.file_id, collection_name=fields.collection_name)
        check_collection_binding(fields.collection_name, file_id=fields.file_id, user_id=fields.user_id)
        filename = form_fields.filename
        source_path = upload_path(workdir, filename)
        form.file_path.rename(source_path)
        size = form.file_size
    else:
        raise UnsupportedMediaTypeError(content_type)
    runtime.metrics.ingest_document_bytes.observe(size)
    settings = runtime.settings
    labels = labels_from(_labels(fields), settings.attribute_types, head.metadata if head is not None else None)
    source = await prepare_source(runtime, source_path, filename)
    s3_origin = (fields.s3_bucket, fields.s3_key) if isinstance(fields, IngestRequestJSON) else (None, None)
    job = IngestJob(
        source=source,
        file_id=fields.file_id,
        collection_name=fields.collection_name,
        collection_type=fields.collection_type,
        user_id=fields.user_id,
        overwrite=fields.overwrite,
        run=run,
        identity=await identify_source(
            source, s3_bucket=s3_origin[0], s3_key=s3_origin[1], s3_etag=head.etag if head is not None else None
        ),
        labels=labels,
        fingerprint=ingest_fingerprint(settings, settings.extraction_engine),
        force=fields.force,
        name=name,
        path=fields.path if isinstance(fields, IngestFields) else None,
    )
    return runner, job


def _labels(fields: IngestBase) -> DocumentLabels:
    return DocumentLabels(tags=fields.tags, category=fields.category, attributes=fields.attributes)


def _submit(
    request: Request,
    runtime: ServiceRuntime,
    jobs: JobRegistry,
    staged: tuple[IndexingRunner, IngestJob],
    workdir: Path,
    started: float,
) -> JobSnapshot:
    """Hand the staged ingest to a job; from here the job owns ``workdir``."""
    runner, job = staged
    metrics = runtime.metrics
    request_id = request_id_of(request)
    debug = runtime.settings.debug

    async def work(control: RunControl) -> dict[str, Any]:
        # No disconnect watch: the submitting request is over; DELETE and shutdown stop a job.
        try:
            with _counted(metrics, control=control, warn=False):
                outcome = await runner.ingest(job, limiter=runtime.limiter, control=control)
        finally:
            metrics.ingest_duration.observe(time.perf_counter() - started)
            await remove_workdir(runtime, workdir)
        _count_success(metrics, outcome)
        # The sync answer's JSON exactly (it is sent with response_model_exclude_none).
        return _response(job, outcome).model_dump(mode="json", exclude_none=True)

    def render_error(error: IngestionError) -> dict[str, Any]:
        # What the IngestionError handler would have answered the submitting request.
        return error_content(error_message(error, debug=debug), error.code, request_id, hint=hint_of(error))

    return jobs.submit(
        file_id=job.file_id,
        collection_name=job.collection_name,
        request_id=request_id,
        work=work,
        render_error=render_error,
    )


def _accepted(request: Request, snapshot: JobSnapshot, *, preference_applied: bool) -> JSONResponse:
    url = job_url(request, snapshot.job_id)
    body = IngestAccepted(
        job_id=snapshot.job_id,
        state=snapshot.state,
        file_id=snapshot.file_id,
        collection_name=snapshot.collection_name,
        status_url=url,
    )
    headers = {"Location": url}
    if preference_applied:
        headers["Preference-Applied"] = RESPOND_ASYNC
    return JSONResponse(status_code=202, content=body.model_dump(mode="json"), headers=headers)


@router.put(
    "/ingest",
    response_model=IngestResponse,
    response_model_exclude_none=True,
    openapi_extra=INGEST_BODY,
    responses={
        202: {"model": IngestAccepted, "description": "Async mode: staged and queued; poll `Location`."},
        502: {
            "model": ErrorBody,
            "description": "S3_FETCH_FAILED: the S3 object could not be read; URL_FETCH_FAILED: the url's document "
            "could not be fetched.",
        },
        504: {
            "model": ErrorBody,
            "description": "INGEST_TIMEOUT: the run took longer than INGEST_TIMEOUT_SECONDS; URL_FETCH_TIMEOUT: "
            "fetching the url took longer than URL_FETCH_TIMEOUT_SECONDS.",
        },
    },
)
async def ingest(
    request: Request, runtime: RuntimeDep, jobs: JobsDep, mode: ModeQuery = None
) -> IngestResponse | JSONResponse:
    """Extract, chunk, embed and write one file; replaces its previous version atomically.

    With ``Prefer: respond-async`` or ``?mode=async``: 202 and a job once the document is staged.
    """
    started = time.perf_counter()
    metrics = runtime.metrics
    run = RunVersion.new()  # taken at request start: later requests win (async ones too)
    preferred = prefers_async(request.headers.getlist("prefer"))
    respond_async = mode == "async" or (mode is None and preferred)
    workdir = await make_workdir(runtime)
    handed_off = False
    try:
        with _counted(metrics):
            staged = await _stage(request, runtime, workdir, run)
            if respond_async:
                snapshot = _submit(request, runtime, jobs, staged, workdir, started)
                handed_off = True
                return _accepted(request, snapshot, preference_applied=preferred)
            runner, job = staged
            outcome = await run_job(runtime, runner, job, request.receive)
    finally:
        if not handed_off:
            metrics.ingest_duration.observe(time.perf_counter() - started)
            await remove_workdir(runtime, workdir)
    _count_success(metrics, outcome)
    return _response(job, outcome)

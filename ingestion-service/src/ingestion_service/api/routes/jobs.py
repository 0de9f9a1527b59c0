"""GET and DELETE /api/v1/ingest/jobs/{job_id}: the async ingest jobs (``jobs/ingest.py``)."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request, Response

from ingestion_service.api.deps import JobsDep
from ingestion_service.api.models import IngestJobResponse, IngestStageView
from ingestion_service.jobs.ingest import JobSnapshot
from shared_contract.error_body import ErrorBody

JOBS_PATH = "/api/v1/ingest/jobs"

# Unknown, expired or another replica's job.
JOB_NOT_FOUND_RESPONSE: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "JOB_NOT_FOUND: no such job here (expired, another replica, restarted)."}
}

router = APIRouter(prefix=JOBS_PATH, tags=["ingest"], responses=JOB_NOT_FOUND_RESPONSE)


def job_url(request: Request, job_id: str) -> str:
    """The job's path as the client reaches it (behind a proxy that strips a prefix, with its root_path)."""
    return f"{request.scope.get('root_path', '')}{JOBS_PATH}/{job_id}"


def _view(snapshot: JobSnapshot) -> IngestJobResponse:
    progress = snapshot.stage
    stage = (
        None
        if progress is None
        else IngestStageView(
            name=progress.stage,
            done=progress.done,
            total=progress.total,
            eta_seconds=progress.eta_seconds(time.monotonic()),
        )
    )
    return IngestJobResponse(
        job_id=snapshot.job_id,
        state=snapshot.state,
        file_id=snapshot.file_id,
        collection_name=snapshot.collection_name,
        created_at=snapshot.created_at,
        started_at=snapshot.started_at,
        finished_at=snapshot.finished_at,
        stage=stage,
        result=snapshot.result,
        error=snapshot.error,
    )


@router.get("/{job_id}", response_model=IngestJobResponse)
async def get_job(job_id: str, jobs: JobsDep) -> IngestJobResponse:
    """The job's state; once finished, the sync ingest's answer as ``result`` or ``error`` (404 JOB_NOT_FOUND)."""
    return _view(jobs.get(job_id))


@router.delete(
    "/{job_id}",
    response_model=IngestJobResponse,
    responses={202: {"model": IngestJobResponse, "description": "Cancellation requested; poll until `aborted`."}},
)
async def cancel_job(job_id: str, jobs: JobsDep, response: Response) -> IngestJobResponse:
    """Cancel an unfinished job (202; it ends ``aborted``, JOB_CANCELLED, previous version kept).

    A finished job is left as it is (200). A job already committing its version finishes.
    """
    snapshot, requested = jobs.cancel(job_id)
    if requested:
        response.status_code = 202
    return _view(snapshot)

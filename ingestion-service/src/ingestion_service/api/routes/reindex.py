"""GET and DELETE /api/v1/reindex/jobs/{job_id}: reindex jobs (``jobs/reindex.py``).

POST /api/v1/collections/{name}/reindex, which starts one, lives with the collection routes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request, Response

from ingestion_service.api.deps import ReindexDep
from ingestion_service.api.models import ReindexJobResponse
from ingestion_service.jobs.reindex_state import ReindexRecord
from shared_contract.error_body import ErrorBody

REINDEX_JOBS_PATH = "/api/v1/reindex/jobs"

REINDEX_JOB_NOT_FOUND_RESPONSE: dict[int | str, dict[str, Any]] = {
    404: {
        "model": ErrorBody,
        "description": "REINDEX_JOB_NOT_FOUND: no such job on this replica (never created, or one of the oldest "
        "finished jobs, which are dropped beyond 100).",
    }
}

router = APIRouter(prefix=REINDEX_JOBS_PATH, tags=["collections"], responses=REINDEX_JOB_NOT_FOUND_RESPONSE)


def reindex_job_url(request: Request, job_id: str) -> str:
    """The job's path as the client reaches it (behind a proxy that strips a prefix, with its root_path)."""
    return f"{request.scope.get('root_path', '')}{REINDEX_JOBS_PATH}/{job_id}"


def reindex_view(record: ReindexRecord) -> ReindexJobResponse:
    """The wire form of a job (without its bookkeeping: cursor, target index, file format)."""
    fields = record.model_dump(exclude={"format", "target_index", "cursor"})
    return ReindexJobResponse.model_validate(
        {**fields, "progress": record.progress, "eta_seconds": record.eta_seconds(datetime.now(UTC))}
    )


@router.get("/{job_id}", response_model=ReindexJobResponse)
async def get_reindex_job(job_id: str, reindex: ReindexDep) -> ReindexJobResponse:
    """The job's state and progress (404 REINDEX_JOB_NOT_FOUND)."""
    return reindex_view(reindex.get(job_id))


@router.delete(
    "/{job_id}",
    response_model=ReindexJobResponse,
    responses={202: {"model": ReindexJobResponse, "description": "Cancellation requested; poll until `cancelled`."}},
)
async def cancel_reindex_job(job_id: str, reindex: ReindexDep, response: Response) -> ReindexJobResponse:
    """Cancel an unfinished job (202; it ends ``cancelled``, the document being indexed keeps its previous version).

    A finished job is left as it is (200). Documents already rebuilt stay rebuilt.
    """
    record, requested = reindex.cancel(job_id)
    if requested:
        response.status_code = 202
    return reindex_view(record)

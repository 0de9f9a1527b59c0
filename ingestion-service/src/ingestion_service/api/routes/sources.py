"""/api/v1/sources: sources the server keeps in step with a collection (``ingestion_service.sources``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ingestion_service.api.deps import SourcesDep
from ingestion_service.api.models.sources import SourceDeleted, SourceListResponse, SourceRequest, SourceView
from ingestion_service.intake.gates import check_not_memory
from shared_contract.error_body import ErrorBody

router = APIRouter(prefix="/api/v1/sources", tags=["sources"])

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody, "description": "SOURCE_NOT_FOUND"}}


def _accepted(view: SourceView) -> JSONResponse:
    return JSONResponse(
        status_code=202,
        content=view.model_dump(mode="json"),
        headers={"Location": f"/api/v1/sources/{view.source_id}"},
    )


@router.post(
    "",
    status_code=202,
    response_model=SourceView,
    responses={
        409: {"model": ErrorBody, "description": "SOURCE_EXISTS"},
        422: {"model": ErrorBody, "description": "SOURCE_NOT_ALLOWED, URL_NOT_ALLOWED"},
    },
)
async def register_source(body: SourceRequest, sources: SourcesDep) -> JSONResponse:
    """Keep a source in step with the collection; answered ``pending`` and synced in the background."""
    check_not_memory(body.collection_name)
    record = await sources.register(
        uri=body.uri,
        kind=body.kind,
        collection_name=body.collection_name,
        schedule_minutes=body.schedule_minutes,
        max_pages=body.max_pages,
        max_depth=body.max_depth,
        include=body.include,
        exclude=body.exclude,
    )
    return _accepted(SourceView.of(record))


@router.get("", response_model=SourceListResponse)
async def list_sources(sources: SourcesDep) -> SourceListResponse:
    """Every registered source, oldest first."""
    return SourceListResponse(sources=[SourceView.of(record) for record in sources.records()])


@router.get("/{source_id}", response_model=SourceView, responses=_NOT_FOUND)
async def get_source(source_id: str, sources: SourcesDep) -> SourceView:
    """The source's state and the counts of its last sync."""
    return SourceView.of(sources.get(source_id))


@router.post(
    "/{source_id}/sync",
    status_code=202,
    response_model=SourceView,
    responses={**_NOT_FOUND, 409: {"model": ErrorBody, "description": "SOURCE_SYNC_RUNNING"}},
)
async def sync_source(source_id: str, sources: SourcesDep) -> JSONResponse:
    """Sync the source now (added, changed and removed items, as ``rag sync`` decides them)."""
    return _accepted(SourceView.of(await sources.sync(source_id)))


@router.delete("/{source_id}", response_model=SourceDeleted, responses=_NOT_FOUND)
async def delete_source(source_id: str, sources: SourcesDep) -> SourceDeleted:
    """Forget the source and delete its documents from the collection."""
    deleted = await sources.remove(source_id)
    return SourceDeleted(source_id=source_id, documents_deleted=deleted)

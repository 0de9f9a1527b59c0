"""Collection (tenant) routes: GET /api/v1/collections, GET /api/v1/collections/{name}/stats,
POST /api/v1/collections/{name}/reindex."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response

from ingestion_service.api.deps import ReindexDep, RuntimeDep, reject_repeated_query_params
from ingestion_service.api.errors import store_failures
from ingestion_service.api.models import (
    CollectionEntry,
    CollectionListResponse,
    CollectionStatsResponse,
    OriginalsUsage,
    ReindexJobResponse,
    ReindexRequest,
)
from ingestion_service.api.routes.reindex import reindex_job_url, reindex_view
from ingestion_service.errors import PipelineFailedError
from ingestion_service.indexing.fingerprint import ingest_fingerprint
from ingestion_service.intake.gates import FORBIDDEN_RESPONSE, check_not_memory
from ingestion_service.intake.handoff import require_qdrant
from rag_runtime.http import require_json_body
from rag_runtime.store import KNOWLEDGE_BASES, tenant_counts
from shared_contract import CollectionName
from shared_contract.error_body import ErrorBody

router = APIRouter(
    prefix="/api/v1/collections", tags=["collections"], dependencies=[Depends(reject_repeated_query_params)]
)

CollectionPath = Annotated[CollectionName, Path(description="The tenant collection (meta.collection_name).")]


@router.get("", response_model=CollectionListResponse)
async def list_collections(
    runtime: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    include_all: Annotated[
        bool,
        Query(
            description="Also Open WebUI's per-upload `file-*` and per-user `user-memory-*` tenants, and long-term memory's `memory-*`."
        ),
    ] = False,
) -> CollectionListResponse:
    """The tenants that hold committed chunks, by name, with documents and chunks each (two facets)."""
    await require_qdrant(runtime)
    with store_failures(PipelineFailedError):
        tenants, complete = await tenant_counts(
            runtime.store, limit=limit, kinds=None if include_all else KNOWLEDGE_BASES
        )
    entries = [
        CollectionEntry(name=tenant.name, kind=tenant.kind, documents=tenant.documents, chunks=tenant.chunks)
        for tenant in tenants
    ]
    return CollectionListResponse(collections=entries, complete=complete)


@router.get("/{name}/stats", response_model=CollectionStatsResponse)
async def collection_stats(name: CollectionPath, runtime: RuntimeDep) -> CollectionStatsResponse:
    """Documents, chunks and text bytes of one collection, documents per language, format and engine,
    and how many were built under other settings or an older chunking (a reindex rebuilds them).

    A collection that holds nothing answers zeros (tenants exist only as values on points).
    """
    await require_qdrant(runtime)
    with store_failures(PipelineFailedError):
        stats = await runtime.catalog.stats(
            name, ingest_fingerprint(runtime.settings, runtime.settings.extraction_engine)
        )
    response = CollectionStatsResponse.model_validate(stats, from_attributes=True)
    if runtime.originals is not None:
        usage = await runtime.originals.usage(name)
        response.originals = OriginalsUsage(originals=usage.originals, bytes=usage.bytes)
    return response


@router.post(
    "/{name}/reindex",
    status_code=202,
    response_model=ReindexJobResponse,
    responses={
        404: {"model": ErrorBody, "description": "SOURCE_INDEX_NOT_FOUND: `source_index` names no Qdrant collection."},
        409: {"model": ErrorBody, "description": "REINDEX_RUNNING: a reindex of this collection is unfinished."},
        **FORBIDDEN_RESPONSE,
    },
    dependencies=[Depends(require_json_body)],
)
async def reindex_collection(
    name: CollectionPath,
    request: Request,
    response: Response,
    reindex: ReindexDep,
    body: Annotated[ReindexRequest | None, Body()] = None,
) -> ReindexJobResponse:
    """Re-ingest every document of the collection from its source, as a background job.

    202 with the job and ``Location: /api/v1/reindex/jobs/{job_id}`` to poll. S3 documents are read
    from S3 again; uploads are rebuilt from their stored text. Documents already built from the same
    source under the current settings are left as they are (``unchanged``) unless ``force``.
    """
    check_not_memory(name)  # rebuilding memory points through the ingest pipeline would bypass its owner
    options = body if body is not None else ReindexRequest()
    record = await reindex.start(name, source_index=options.source_index, force=options.force)
    response.headers["Location"] = reindex_job_url(request, record.job_id)
    return reindex_view(record)

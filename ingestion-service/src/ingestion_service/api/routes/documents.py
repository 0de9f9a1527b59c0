"""DELETE /api/v1/documents/{file_id} and GET /api/v1/documents/{file_id}/chunks."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Query

from ingestion_service.api.deps import RuntimeDep, reject_repeated_query_params
from ingestion_service.api.models import ChunkStats, ChunkView, DeleteResponse, DocumentChunksResponse
from ingestion_service.errors import DeleteFailedError, IngestionError, PipelineFailedError
from ingestion_service.intake import require_qdrant
from shared_contract import CollectionName, ContractError, MetaKey

router = APIRouter(prefix="/api/v1/documents", tags=["documents"], dependencies=[Depends(reject_repeated_query_params)])

PREVIEW_CHARS = 200
CollectionQuery = Annotated[
    CollectionName | None,
    Query(description="Only this tenant collection (default: every collection)."),
]


@router.delete("/{file_id}", response_model=DeleteResponse, response_model_exclude_none=True)
async def delete_document(file_id: str, runtime: RuntimeDep, collection_name: CollectionQuery = None) -> DeleteResponse:
    """Remove the file's chunks from every collection, or from ``collection_name`` only. Idempotent."""
    metrics = runtime.metrics
    try:
        await require_qdrant(runtime)
        try:
            deleted = await runtime.index.delete_file(file_id, collection_name)
        except ContractError as exc:
            raise DeleteFailedError(str(exc)) from exc
    except IngestionError as exc:
        metrics.delete_requests.labels(outcome="failure", code=exc.code).inc()
        raise
    metrics.delete_requests.labels(outcome="success", code="OK").inc()
    return DeleteResponse(file_id=file_id, collection_name=collection_name, chunks_deleted=deleted)


@router.get("/{file_id}/chunks", response_model=DocumentChunksResponse)
async def list_chunks(
    file_id: str,
    runtime: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    # The ``next_offset`` of the previous page: a point id, which is always a UUID.
    offset: Annotated[uuid.UUID | None, Query()] = None,
    include_content: Literal["false", "preview", "full"] = "preview",
    collection_name: CollectionQuery = None,
) -> DocumentChunksResponse:
    """Inspection (ENABLE_INSPECTION_API): a page of the file's stored chunks in id order."""
    if not runtime.settings.enable_inspection_api:
        raise HTTPException(status_code=404, detail="Not Found")
    await require_qdrant(runtime)
    try:
        total = await runtime.index.count(file_id, collection_name)
        chunks, next_offset = await runtime.index.scroll(
            file_id, collection_name, limit=limit, offset=None if offset is None else str(offset)
        )
    except ContractError as exc:
        raise PipelineFailedError(str(exc)) from exc
    views = []
    for chunk in sorted(chunks, key=lambda c: int(c.meta.get(MetaKey.SPLIT_ID) or 0)):
        content: str | None = None
        if include_content == "full":
            content = chunk.content
        elif include_content == "preview":
            content = chunk.content[:PREVIEW_CHARS] + ("…" if len(chunk.content) > PREVIEW_CHARS else "")
        split_id = chunk.meta.get(MetaKey.SPLIT_ID)
        views.append(
            ChunkView(
                split_id=split_id if isinstance(split_id, int) else None,
                content_length=len(chunk.content),
                content=content,
                meta=chunk.meta,
            )
        )
    first = chunks[0].meta if chunks else {}
    stats = ChunkStats(
        total_chunks=total,
        extraction_engine=first.get("extractor"),
        languages=list(first.get(MetaKey.LANGUAGES) or []),
        name=first.get(MetaKey.NAME),
        collection_name=first.get(MetaKey.COLLECTION_NAME),
    )
    return DocumentChunksResponse(
        file_id=file_id, returned=len(views), limit=limit, next_offset=next_offset, stats=stats, chunks=views
    )

"""The documents API: list, read whole, relabel and delete a collection's documents; inspect chunks.

Reads and metadata writes go through ``runtime.catalog`` (``adapters/document_catalog.py``);
deletes through the chunk index, which owns the versioning protocol.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Query
from pydantic import AfterValidator

from ingestion_service.adapters.document_catalog import (
    UNCHANGED,
    DocumentChanges,
    DocumentInfo,
    DocumentSort,
    Unchanged,
)
from ingestion_service.api.deps import RuntimeDep, reject_repeated_query_params
from ingestion_service.api.errors import store_failures
from ingestion_service.api.models import (
    MAX_LABEL_CHARS,
    ChunkStats,
    ChunkView,
    DeleteResponse,
    DocumentChunksResponse,
    DocumentListResponse,
    DocumentPatch,
    DocumentTextResponse,
    DocumentView,
)
from ingestion_service.errors import (
    DocumentNotFoundError,
    IngestionError,
    InvalidRequestError,
    MetadataUpdateFailedError,
    PipelineFailedError,
)
from ingestion_service.indexing import removal
from ingestion_service.intake.gates import FORBIDDEN_RESPONSE, check_not_memory
from ingestion_service.intake.handoff import require_qdrant
from ingestion_service.settings import Settings
from rag_runtime.http import require_json_body
from rag_runtime.store.document_filter import filter_conditions
from shared_contract import CollectionName, ContractError, MetaKey
from shared_contract.attributes import AttributeValue, check_attributes
from shared_contract.document_filter import DocumentFilter
from shared_contract.error_body import ErrorBody
from shared_contract.paths import MAX_PATH_CHARS, relative_path

router = APIRouter(
    prefix="/api/v1/documents",
    tags=["documents"],
    dependencies=[Depends(reject_repeated_query_params)],
    responses=FORBIDDEN_RESPONSE,
)

PREVIEW_CHARS = 200
CollectionQuery = Annotated[
    CollectionName | None,
    Query(description="Only this tenant collection (default: every collection)."),
]
# A file may be in several tenants: reading or changing one names its tenant.
RequiredCollectionQuery = Annotated[CollectionName, Query(description="The tenant collection holding the file.")]
# Routes take ``{file_id:path}``, so an id with '/' (sent as %2F, decoded before routing) is addressable.
# The text and chunks routes are GET only and end in a fixed segment the greedy match leaves to them,
# so ``a/text/text`` is the text of file ``a/text``; PATCH and DELETE take the whole rest of the path.
RelativePath = Annotated[str, AfterValidator(relative_path)]
FileIdPath = Annotated[str, Path(min_length=1, description="The file's id, URL-quoted ('/' as %2F).")]

DOCUMENT_NOT_FOUND_RESPONSE: dict[int | str, dict[str, Any]] = {
    404: {
        "model": ErrorBody,
        "description": "DOCUMENT_NOT_FOUND: the collection holds no committed chunk of this file.",
    }
}


def document_view(info: DocumentInfo) -> DocumentView:
    """The wire form of a catalog entry."""
    return DocumentView.model_validate(info, from_attributes=True)


@router.get("", response_model=DocumentListResponse)
async def list_documents(
    runtime: RuntimeDep,
    collection_name: RequiredCollectionQuery,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    # The ``next_offset`` of the previous page: a position in the sorted listing.
    offset: Annotated[int, Query(ge=0)] = 0,
    sort: Annotated[DocumentSort, Query(description="Newest first by default.")] = "-ingested_at",
    tag: Annotated[str | None, Query(min_length=1, max_length=MAX_LABEL_CHARS, description="Only this tag.")] = None,
    format: Annotated[
        str | None,
        Query(min_length=1, max_length=MAX_LABEL_CHARS, description="Only this source format (pdf, md, ...)."),
    ] = None,
    category: Annotated[
        str | None, Query(min_length=1, max_length=MAX_LABEL_CHARS, description="Only this category.")
    ] = None,
    path: Annotated[
        RelativePath | None,
        Query(min_length=1, max_length=MAX_PATH_CHARS, description="Only the file at this relative path."),
    ] = None,
    folder: Annotated[
        RelativePath | None,
        Query(min_length=1, max_length=MAX_PATH_CHARS, description="Only files under this folder (relative path)."),
    ] = None,
) -> DocumentListResponse:
    """The collection's documents, one entry per file (its newest committed version), sorted and paged."""
    check_not_memory(collection_name)
    selection = DocumentFilter(
        tags=None if tag is None else [tag],
        formats=None if format is None else [format],
        category=category,
        paths=None if path is None else [path],
        path_prefix=folder,
    )
    conditions = filter_conditions(selection, runtime.settings.attribute_types)
    await require_qdrant(runtime)
    with store_failures(PipelineFailedError):
        page = await runtime.catalog.list_documents(
            collection_name, conditions=conditions, sort=sort, limit=limit, offset=offset
        )
    end = offset + limit
    return DocumentListResponse(
        documents=[document_view(info) for info in page.documents],
        total=page.total,
        next_offset=str(end) if end < page.total else None,
    )


@router.get("/{file_id:path}/text", response_model=DocumentTextResponse, responses=DOCUMENT_NOT_FOUND_RESPONSE)
async def document_text(
    file_id: FileIdPath, runtime: RuntimeDep, collection_name: RequiredCollectionQuery
) -> DocumentTextResponse:
    """The whole document rebuilt from its committed chunks in order, window overlap removed."""
    check_not_memory(collection_name)
    await require_qdrant(runtime)
    with store_failures(PipelineFailedError):
        document = await runtime.catalog.read_text(file_id, collection_name)
    if document is None:
        raise DocumentNotFoundError(file_id)
    return DocumentTextResponse(
        file_id=file_id,
        collection_name=collection_name,
        name=document.name,
        path=document.path,
        text=document.text,
        chunks=document.chunks,
    )


def _changes(patch: DocumentPatch, settings: Settings) -> DocumentChanges:
    """The request as a catalog update: null clears (tags to [], attributes to {}), a missing field is kept."""
    given = patch.model_fields_set
    if not given:
        raise InvalidRequestError("Invalid request: give at least one of tags, category, attributes, name.")
    attributes: dict[str, AttributeValue] | Unchanged = UNCHANGED
    if "attributes" in given:
        try:
            attributes = check_attributes(patch.attributes or {}, settings.attribute_types)
        except ValueError as exc:
            raise InvalidRequestError(f"Invalid request: attributes: {exc}.") from exc
    return DocumentChanges(
        tags=(patch.tags or []) if "tags" in given else UNCHANGED,
        category=patch.category if "category" in given else UNCHANGED,
        attributes=attributes,
        name=patch.name if "name" in given and patch.name is not None else UNCHANGED,
    )


@router.patch(
    "/{file_id:path}",
    response_model=DocumentView,
    responses=DOCUMENT_NOT_FOUND_RESPONSE,
    dependencies=[Depends(require_json_body)],
)
async def update_document(
    file_id: FileIdPath, patch: DocumentPatch, runtime: RuntimeDep, collection_name: RequiredCollectionQuery
) -> DocumentView:
    """Change the file's stored metadata in one collection, without re-embedding; answers its listing entry."""
    check_not_memory(collection_name)
    changes = _changes(patch, runtime.settings)
    await require_qdrant(runtime)
    with store_failures(MetadataUpdateFailedError):
        found = await runtime.catalog.update(file_id, collection_name, changes)
    with store_failures(PipelineFailedError):
        info = await runtime.catalog.document(file_id, collection_name) if found else None
    if info is None:
        raise DocumentNotFoundError(file_id)
    return document_view(info)


@router.delete("/{file_id:path}", response_model=DeleteResponse, response_model_exclude_none=True)
async def delete_document(
    file_id: FileIdPath, runtime: RuntimeDep, collection_name: CollectionQuery = None
) -> DeleteResponse:
    """Remove the file's chunks from every collection but long-term memory's, or from ``collection_name`` only.
    Idempotent."""
    metrics = runtime.metrics
    try:
        check_not_memory(collection_name)
        await require_qdrant(runtime)
        deleted = await removal.delete_document(runtime.index, runtime.originals, file_id, collection_name)
    except IngestionError as exc:
        metrics.delete_requests.labels(outcome="failure", code=exc.code).inc()
        raise
    metrics.delete_requests.labels(outcome="success", code="OK").inc()
    return DeleteResponse(file_id=file_id, collection_name=collection_name, chunks_deleted=deleted)


@router.get(
    "/{file_id:path}/chunks",
    response_model=DocumentChunksResponse,
    responses={404: {"model": ErrorBody, "description": "NOT_FOUND: ENABLE_INSPECTION_API is off."}},
)
async def list_chunks(
    file_id: FileIdPath,
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
    check_not_memory(collection_name)
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

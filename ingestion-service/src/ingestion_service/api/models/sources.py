"""Wire models of /api/v1/sources: a source registered, and its state as GET answers it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from ingestion_service.api.models.ingest import MAX_URL_CHARS
from ingestion_service.sources.model import SourceCounts, SourceFailure, SourceKind, SourceRecord, SourceState
from shared_contract import CollectionName

_Glob = Annotated[str, Field(min_length=1, max_length=256)]


class SourceRequest(BaseModel):
    """POST /api/v1/sources."""

    uri: str = Field(
        min_length=1,
        max_length=MAX_URL_CHARS,
        description="file: an absolute path or file:// URI; url and website: http(s); folder: an absolute "
        "path or file:// URI; s3: s3://bucket/prefix.",
    )
    kind: SourceKind
    collection_name: CollectionName
    schedule_minutes: int | None = Field(
        default=None, ge=1, le=7 * 24 * 60, description="Sync again this often; none: only on POST .../sync."
    )
    max_pages: int | None = Field(default=None, ge=1, description="website: pages at most (SOURCE_MAX_PAGES caps it).")
    max_depth: int | None = Field(
        default=None, ge=0, description="website without a sitemap: link depth (SOURCE_MAX_DEPTH caps it)."
    )
    include: list[_Glob] = Field(
        default_factory=lambda: list[str](),
        max_length=64,
        description="folder and s3: only relative paths matching one.",
    )
    exclude: list[_Glob] = Field(
        default_factory=lambda: list[str](), max_length=64, description="folder and s3: relative paths left out."
    )


class SourceView(BaseModel):
    """A source: its state, the counts of its last sync and when it runs next."""

    source_id: str
    uri: str
    kind: SourceKind
    collection_name: str
    state: SourceState = Field(description="pending, indexing, indexed, or failed (``error`` says why).")
    error: SourceFailure | None
    counts: SourceCounts
    failures: list[SourceFailure] = Field(description="Items the last sync could not ingest (the first 50).")
    schedule_minutes: int | None
    max_pages: int
    max_depth: int
    include: list[str]
    exclude: list[str]
    created_at: datetime
    last_synced_at: datetime | None
    next_sync_at: datetime | None

    @staticmethod
    def of(record: SourceRecord) -> SourceView:
        """The wire form of a record (its item list stays inside)."""
        return SourceView.model_validate(record.model_dump(exclude={"items", "format", "target_index"}))


class SourceListResponse(BaseModel):
    """200 body of GET /api/v1/sources."""

    sources: list[SourceView]


class SourceDeleted(BaseModel):
    """200 body of DELETE /api/v1/sources/{source_id}."""

    source_id: str
    documents_deleted: int

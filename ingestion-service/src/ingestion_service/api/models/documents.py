"""Wire models of the documents API: listing, text, chunks, PATCH and DELETE."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ingestion_service.api.models.fields import (
    MAX_FILENAME_CHARS,
    MAX_LABEL_CHARS,
    MAX_TAGS,
    check_filename,
    check_tags,
)


class DeleteResponse(BaseModel):
    """200 body of DELETE /api/v1/documents/{file_id}."""

    status: bool = True
    file_id: str
    collection_name: str | None = None
    chunks_deleted: int


class ChunkStats(BaseModel):
    """Summary read from the first chunk of the page."""

    total_chunks: int
    extraction_engine: str | None = None
    languages: list[str] = Field(default_factory=lambda: list[str]())
    name: str | None = None
    collection_name: str | None = None


class ChunkView(BaseModel):
    """One stored chunk."""

    split_id: int | None
    content_length: int
    content: str | None = None
    meta: dict[str, Any]


class DocumentChunksResponse(BaseModel):
    """200 body of GET /api/v1/documents/{file_id}/chunks."""

    status: bool = True
    file_id: str
    returned: int
    limit: int
    next_offset: str | None
    stats: ChunkStats
    chunks: list[ChunkView]


class DocumentView(BaseModel):
    """One document (the newest committed version of a file in one collection).

    null: not recorded; documents ingested before these keys existed lack them until re-ingested.
    """

    file_id: str
    name: str | None
    collection_name: str
    content_hash: str | None = Field(description="sha256 of the source file's bytes.")
    source_bytes: int | None
    format: str | None = Field(description="Lower-case source kind: pdf, docx, md, ...")
    chunks: int
    text_bytes: int | None = Field(description="UTF-8 bytes of all the document's chunk text.")
    languages: list[str]
    extractor: str | None = Field(description="The extraction engine that read it.")
    tags: list[str]
    category: str | None
    attributes: dict[str, Any]
    ingested_at: datetime | None
    ingest_version: str | None
    s3_bucket: str | None = Field(description="Where an S3 ingest read it from (null for uploads).")
    s3_key: str | None
    s3_etag: str | None = Field(
        description="The object's ETag when it was read (sync skips an unchanged object by it)."
    )
    path: str | None = Field(default=None, description="Its path relative to the folder it was synced from.")
    source_uri: str | None = Field(
        default=None, description="A source's document (POST /api/v1/sources): the URI it was read from."
    )
    fetched_at: str | None = Field(
        default=None, description="A source's document: when (ISO 8601, UTC) the indexed bytes were read."
    )


class DocumentListResponse(BaseModel):
    """200 body of GET /api/v1/documents."""

    documents: list[DocumentView]
    total: int = Field(description="Documents in the whole listing (every page).")
    next_offset: str | None = Field(description="The next page's `offset`; null on the last page.")


class DocumentTextResponse(BaseModel):
    """200 body of GET /api/v1/documents/{file_id}/text."""

    file_id: str
    collection_name: str
    name: str | None
    path: str | None = Field(default=None, description="Its path relative to the folder it was synced from.")
    text: str = Field(description="The chunks in order, each window overlap kept once.")
    chunks: int


class DocumentPatch(BaseModel):
    """PATCH /api/v1/documents/{file_id}: a given field replaces the stored value; a missing one is kept.

    null clears ``tags`` (stored as []), ``category`` and ``attributes`` (stored as {}); ``name``
    cannot be cleared. ``attributes`` replaces the whole object, not single keys. At least one
    field (the route refuses an empty body).
    """

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, json_schema_extra={"minProperties": 1})

    tags: list[str] | None = Field(default=None, max_length=MAX_TAGS)
    category: str | None = Field(default=None, min_length=1, max_length=MAX_LABEL_CHARS)
    attributes: dict[str, Any] | None = Field(
        default=None, description="Keys declared in INDEXED_ATTRIBUTES are type-checked."
    )
    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_FILENAME_CHARS,
        description="The file name shown and cited (meta.name and meta.source); not null.",
    )

    @field_validator("tags")
    @classmethod
    def _clean_tags(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else check_tags(value)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str | None) -> str:
        # Runs only for a given value: an explicit null lands here, an omitted name does not.
        if value is None:
            raise ValueError("cannot be cleared (omit it to keep the stored name)")
        return check_filename(value)

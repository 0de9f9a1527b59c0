"""Wire models of the ingestion API (field names exactly as Open WebUI sends them)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool


class IngestFields(BaseModel):
    """The fields both request modes carry."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    file_id: str = Field(min_length=1, max_length=256)
    filename: str = Field(min_length=1, max_length=1024)
    collection_name: str = Field(min_length=1, max_length=256)
    collection_type: str = Field(default="file", min_length=1, max_length=64)
    user_id: str = Field(min_length=1, max_length=256)
    overwrite: StrictBool = True


class IngestRequestJSON(IngestFields):
    """JSON mode: the object is read from S3/MinIO."""

    s3_bucket: str = Field(min_length=1, max_length=255)
    s3_key: str = Field(min_length=1, max_length=1024)


class ExtractionInfo(BaseModel):
    """How the document was extracted and what the run did."""

    engine: str
    ingest_version: str | None = None
    superseded: bool = False
    kept_existing: bool = False


class IngestResponse(BaseModel):
    """200 body; Open WebUI checks only ``status``."""

    status: bool = True
    collection_name: str
    chunks_count: int
    extraction: ExtractionInfo


class DeleteResponse(BaseModel):
    """200 body of DELETE /api/v1/documents/{file_id}."""

    status: bool = True
    file_id: str
    collection_name: str | None = None
    chunks_deleted: int


class ExtractedDocument(BaseModel):
    """One document the converter produced."""

    content: str
    meta: dict[str, Any]


class ExtractResponse(BaseModel):
    """200 body of POST /api/v1/extract."""

    status: bool = True
    engine: str
    profile: str | None = None
    documents: list[ExtractedDocument]


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

"""Wire models of the ingestion API (field names exactly as Open WebUI sends them)."""

from __future__ import annotations

import ipaddress
import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from ingestion_service.jobs import JobState
from shared_contract import CollectionName

# Linux and Open WebUI's own storage cap names at 255 bytes; longer ones are not real uploads.
MAX_FILENAME_CHARS = 255
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")
# S3 general purpose bucket rules: 3-63 of [a-z0-9.-], starting and ending with a letter or digit.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
MAX_S3_KEY_BYTES = 1024


def check_filename(value: str) -> str:
    """A file name, not a path: no control characters, no separators, at most 255 characters."""
    if len(value) > MAX_FILENAME_CHARS:
        raise ValueError(f"must be at most {MAX_FILENAME_CHARS} characters")
    if _CONTROL_CHARACTERS.search(value):
        raise ValueError("must not contain control characters (NUL, newline, ...)")
    if "/" in value or "\\" in value or value in (".", ".."):
        raise ValueError("must be a file name, not a path")
    return value


def check_bucket_name(value: str) -> str:
    """The S3 bucket naming rules, checked before any S3 call so a bad name is a 400, not a 502."""
    reason = None
    if not _BUCKET.match(value):
        reason = (
            "3-63 characters of lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit"
        )
    elif ".." in value:
        reason = "no two adjacent dots"
    elif value.startswith(_BUCKET_RESERVED_PREFIXES) or value.endswith(_BUCKET_RESERVED_SUFFIXES):
        reason = "no reserved prefix or suffix"
    else:
        try:
            ipaddress.IPv4Address(value)
            reason = "not formatted as an IP address"
        except ValueError:
            pass
    if reason is not None:
        raise ValueError(f"is not a valid S3 bucket name ({reason})")
    return value


class IngestFields(BaseModel):
    """The fields both request modes carry."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    file_id: str = Field(min_length=1, max_length=256)
    filename: str = Field(min_length=1, max_length=MAX_FILENAME_CHARS)
    collection_name: CollectionName  # refused, never trimmed, if it breaks the contract rule
    collection_type: str = Field(default="file", min_length=1, max_length=64)
    user_id: str = Field(min_length=1, max_length=256)
    overwrite: StrictBool = True

    @field_validator("filename")
    @classmethod
    def _plain_filename(cls, value: str) -> str:
        return check_filename(value)


class IngestRequestJSON(IngestFields):
    """JSON mode: the object is read from S3/MinIO."""

    s3_bucket: str = Field(min_length=1, max_length=255)
    s3_key: str = Field(min_length=1, max_length=1024)

    @field_validator("s3_bucket")
    @classmethod
    def _valid_bucket(cls, value: str) -> str:
        return check_bucket_name(value)

    @field_validator("s3_key")
    @classmethod
    def _key_fits(cls, value: str) -> str:
        if len(value.encode()) > MAX_S3_KEY_BYTES:
            raise ValueError(f"must be at most {MAX_S3_KEY_BYTES} bytes of UTF-8")
        return value


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


class IngestAccepted(BaseModel):
    """202 body of an async ingest (``Prefer: respond-async`` or ``?mode=async``): the document is staged."""

    status: bool = True
    job_id: str
    state: JobState
    file_id: str
    collection_name: str
    status_url: str = Field(description="Where to poll the job; also the Location header.")


class IngestJobResponse(BaseModel):
    """GET /api/v1/ingest/jobs/{job_id}: an async ingest and, once finished, what the sync ingest would have answered."""

    job_id: str
    state: JobState
    file_id: str
    collection_name: str
    created_at: datetime
    started_at: datetime | None = Field(
        description="When the pipeline run got its concurrency slot; null if it never got one "
        "(still queued, cancelled while queued, or overwrite=false with an existing version)."
    )
    finished_at: datetime | None
    result: dict[str, Any] | None = Field(
        description="succeeded: the sync ingest's 200 body (IngestResponse), exactly; otherwise null."
    )
    error: dict[str, Any] | None = Field(
        description="failed or aborted: the sync ingest's flat error body {status, error, code, request_id}, "
        "request_id being the submitting request's; otherwise null."
    )


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


class EngineError(BaseModel):
    """Why one engine of a comparison failed (the shared error codes)."""

    code: str
    error: str


class EngineResult(BaseModel):
    """One engine's reading of the file: what it produced, how long it took, or why it failed."""

    engine: str
    profile: str | None = None
    route: str | None = Field(default=None, description="auto only: the routing decision.")
    seconds: float
    characters: int = 0
    pages: int = Field(default=0, description="Documents carrying a page number (0 when the engine gives none).")
    documents: list[ExtractedDocument] = Field(default_factory=lambda: list[ExtractedDocument]())
    error: EngineError | None = None


class ExtractResponse(BaseModel):
    """200 body of POST /api/v1/extract.

    One engine: ``engine``, ``profile``, ``documents`` plus time, characters and pages. Several
    (``engines=a,b,c``): ``results`` side by side, one per engine, each with its own error if it failed;
    the top-level fields then describe the first engine that succeeded.
    """

    status: bool = True
    engine: str
    profile: str | None = None
    route: str | None = None
    seconds: float = 0.0
    characters: int = 0
    pages: int = 0
    documents: list[ExtractedDocument]
    results: list[EngineResult] | None = None


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

"""Wire models of the ingestion API (field names exactly as Open WebUI sends them)."""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from ingestion_service.jobs import JobState
from ingestion_service.reindex import ReindexState
from shared_contract import CollectionName
from shared_contract.schema import TenantKind

# Linux and Open WebUI's own storage cap names at 255 bytes; longer ones are not real uploads.
MAX_FILENAME_CHARS = 255
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")
# S3 general purpose bucket rules: 3-63 of [a-z0-9.-], starting and ending with a letter or digit.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
MAX_S3_KEY_BYTES = 1024
MAX_TAGS = 64
MAX_LABEL_CHARS = 128


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


def check_tags(values: list[str]) -> list[str]:
    """Tags stripped, without blanks or repeats, in the given order; each at most 128 characters."""
    tags: list[str] = []
    for value in values:
        tag = value.strip()
        if len(tag) > MAX_LABEL_CHARS:
            raise ValueError(f"each tag must be at most {MAX_LABEL_CHARS} characters")
        if tag and tag not in tags:
            tags.append(tag)
    return tags


class IngestFields(BaseModel):
    """The fields both request modes carry."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    # Refused, never trimmed, like collection_name: the documents routes address the id exactly as sent.
    file_id: str = Field(min_length=1, max_length=256)
    filename: str = Field(min_length=1, max_length=MAX_FILENAME_CHARS)
    collection_name: CollectionName  # refused, never trimmed, if it breaks the contract rule
    collection_type: str = Field(default="file", min_length=1, max_length=64)
    user_id: str = Field(min_length=1, max_length=256)
    overwrite: StrictBool = True
    force: StrictBool = Field(
        default=False,
        description="Re-extract and re-embed even when the same bytes are stored under the same settings.",
    )
    tags: list[str] | None = Field(
        default=None,
        max_length=MAX_TAGS,
        description="Labels to filter on (/search filter.tags); replace the stored ones.",
    )
    category: str | None = Field(default=None, min_length=1, max_length=MAX_LABEL_CHARS)
    attributes: dict[str, Any] | None = Field(
        default=None,
        description="Your own metadata; keys declared in INDEXED_ATTRIBUTES are filterable and type-checked.",
    )

    @field_validator("file_id", mode="before")
    @classmethod
    def _untrimmed_file_id(cls, value: object) -> object:
        # "before": the model's str_strip_whitespace would otherwise trim it first.
        if isinstance(value, str) and value != value.strip():
            raise ValueError("must not start or end with whitespace")
        # The documents routes could never address such an id (a URL path segment holds no newline).
        if isinstance(value, str) and any(unicodedata.category(char) == "Cc" for char in value):
            raise ValueError("must not contain control characters (a newline, a tab)")
        return value

    @field_validator("filename")
    @classmethod
    def _plain_filename(cls, value: str) -> str:
        return check_filename(value)

    @field_validator("tags")
    @classmethod
    def _clean_tags(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else check_tags(value)


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
    reused_vectors: bool = Field(
        default=False,
        description="The chunks and vectors were copied from this file's identical copy in another collection.",
    )


class IngestResponse(BaseModel):
    """200 body; Open WebUI checks only ``status``."""

    status: bool = True
    collection_name: str
    chunks_count: int
    unchanged: bool = Field(
        default=False,
        description="The same bytes were already stored under the same settings: nothing was re-embedded "
        "(metadata such as name, tags, category and attributes was updated in place).",
    )
    content_hash: str | None = Field(
        default=None,
        description="sha256 of the source file's bytes; with extraction.kept_existing, of the stored version's.",
    )
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


# --- The documents API and collection stats ------------------------------------------------------


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


class CollectionEntry(BaseModel):
    """One tenant of the shared collection."""

    name: str
    kind: TenantKind = Field(
        description="file: Open WebUI's per-upload `file-<id>`; user_memory: `user-memory-<id>`; memory: long-term "
        "memory's `memory-<user>`; else a knowledge base."
    )
    documents: int = Field(description="Documents (a memory tenant: facts).")
    chunks: int


class CollectionListResponse(BaseModel):
    """200 body of GET /api/v1/collections."""

    collections: list[CollectionEntry]
    complete: bool = Field(
        description="False when more tenants of the kinds listed exist than `limit`: the largest are listed."
    )


class CollectionStatsResponse(BaseModel):
    """200 body of GET /api/v1/collections/{name}/stats (zeros for a collection that holds nothing)."""

    collection_name: str
    documents: int
    chunks: int
    text_bytes: int = Field(description="Sum of the documents' text_bytes (documents without it add 0).")
    languages: dict[str, int] = Field(description="Language code -> documents in it.")
    formats: dict[str, int] = Field(description="Source format -> documents.")
    extractors: dict[str, int] = Field(description="Extraction engine -> documents.")
    last_ingest: datetime | None = Field(description="When the most recently ingested document was ingested.")
    outdated_documents: int = Field(
        description="Documents built under other settings, an older chunking or contract than this service's "
        "(their ingest fingerprint differs): POST /api/v1/collections/{name}/reindex rebuilds them."
    )


# A Qdrant collection name, as QDRANT_INDEX takes it (it becomes a directory name in an embedded store).
QDRANT_INDEX_PATTERN = r"^[A-Za-z0-9_-]{1,255}$"


class ReindexRequest(BaseModel):
    """Optional JSON body of POST /api/v1/collections/{name}/reindex (no body: the defaults)."""

    model_config = ConfigDict(extra="forbid")

    source_index: str | None = Field(
        default=None,
        pattern=QDRANT_INDEX_PATTERN,
        description="The QDRANT_INDEX the collection's documents are read from (the index used before an "
        "embedding-model change); null or this service's own QDRANT_INDEX: rebuild in place.",
    )
    force: StrictBool = Field(
        default=False, description="Re-embed documents already built from the same source under the current settings."
    )


class ReindexFailureView(BaseModel):
    """A document the reindex could not rebuild; it keeps its previous version."""

    file_id: str
    name: str | None
    code: str = Field(description="The error code an ingest of the document answered (e.g. S3_FETCH_FAILED).")
    error: str


class ReindexCurrentView(BaseModel):
    """The document being indexed."""

    file_id: str
    name: str | None


class ReindexErrorView(BaseModel):
    """Why a reindex job ended `failed` (the job itself could not go on)."""

    code: str
    error: str


class ReindexJobResponse(BaseModel):
    """A reindex job: body of the 202 that starts it and of GET/DELETE /api/v1/reindex/jobs/{job_id}."""

    job_id: str
    state: ReindexState = Field(
        description="queued -> running -> succeeded (every document tried; see failed/failures), failed (the job "
        "itself could not go on: see error) or cancelled (DELETE)."
    )
    collection_name: str
    source_index: str | None = Field(description="Where documents are read from; null: this service's index.")
    force: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    total: int | None = Field(description="Documents to process; null until they are listed.")
    done: int = Field(description="Documents processed: reingested + unchanged + failed + skipped.")
    reingested: int
    unchanged: int = Field(description="Already built from the same source under the current settings.")
    failed: int
    skipped: int = Field(description="Deleted after the listing, before their turn.")
    failures: list[ReindexFailureView] = Field(description="The failed documents, the first 100.")
    current: ReindexCurrentView | None = Field(description="The document being indexed, while running.")
    error: ReindexErrorView | None

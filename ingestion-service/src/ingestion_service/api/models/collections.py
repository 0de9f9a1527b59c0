"""Wire models of the collections API and of reindex jobs."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from ingestion_service.jobs.reindex_state import ReindexState
from shared_contract.schema import TenantKind


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


class OriginalsUsage(BaseModel):
    """The collection's kept originals (ORIGINALS_DIR or ORIGINALS_BUCKET)."""

    originals: int = Field(description="Originals kept: one per document, the live version's.")
    bytes: int


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
    originals: OriginalsUsage | None = Field(
        default=None, description="The originals kept for page images and reindexing; null with KEEP_ORIGINALS=false."
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
    progress: float | None = Field(description="done / total, from 0 to 1; null until the documents are listed.")
    eta_seconds: float | None = Field(
        description="Seconds until the job is done, at the pace of the documents this process finished since it "
        "listed them (a resumed job's pace starts again); null until one is finished, and once the job ended."
    )
    reingested: int
    unchanged: int = Field(description="Already built from the same source under the current settings.")
    failed: int
    skipped: int = Field(description="Deleted after the listing, before their turn.")
    failures: list[ReindexFailureView] = Field(description="The failed documents, the first 100.")
    current: ReindexCurrentView | None = Field(description="The document being indexed, while running.")
    error: ReindexErrorView | None

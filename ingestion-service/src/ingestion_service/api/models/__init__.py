"""Wire models of the ingestion API, one module per resource; imported from here."""

from __future__ import annotations

from ingestion_service.api.models.collections import (
    QDRANT_INDEX_PATTERN,
    CollectionEntry,
    CollectionListResponse,
    CollectionStatsResponse,
    ReindexCurrentView,
    ReindexErrorView,
    ReindexFailureView,
    ReindexJobResponse,
    ReindexRequest,
)
from ingestion_service.api.models.documents import (
    ChunkStats,
    ChunkView,
    DeleteResponse,
    DocumentChunksResponse,
    DocumentListResponse,
    DocumentPatch,
    DocumentTextResponse,
    DocumentView,
)
from ingestion_service.api.models.extract import (
    EngineError,
    EngineResult,
    ExtractedDocument,
    ExtractResponse,
)
from ingestion_service.api.models.fields import (
    MAX_FILENAME_CHARS,
    MAX_LABEL_CHARS,
    MAX_TAGS,
    check_bucket_name,
    check_filename,
    check_tags,
)
from ingestion_service.api.models.ingest import (
    MAX_URL_CHARS,
    ExtractionInfo,
    IngestAccepted,
    IngestBase,
    IngestFields,
    IngestForm,
    IngestJobResponse,
    IngestRequestJSON,
    IngestRequestURL,
    IngestResponse,
)
from ingestion_service.api.models.web_loader import MAX_URLS, WebLoaderRequest

__all__ = [
    "MAX_FILENAME_CHARS",
    "MAX_LABEL_CHARS",
    "MAX_TAGS",
    "MAX_URLS",
    "MAX_URL_CHARS",
    "QDRANT_INDEX_PATTERN",
    "ChunkStats",
    "ChunkView",
    "CollectionEntry",
    "CollectionListResponse",
    "CollectionStatsResponse",
    "DeleteResponse",
    "DocumentChunksResponse",
    "DocumentListResponse",
    "DocumentPatch",
    "DocumentTextResponse",
    "DocumentView",
    "EngineError",
    "EngineResult",
    "ExtractResponse",
    "ExtractedDocument",
    "ExtractionInfo",
    "IngestAccepted",
    "IngestBase",
    "IngestFields",
    "IngestForm",
    "IngestJobResponse",
    "IngestRequestJSON",
    "IngestRequestURL",
    "IngestResponse",
    "ReindexCurrentView",
    "ReindexErrorView",
    "ReindexFailureView",
    "ReindexJobResponse",
    "ReindexRequest",
    "WebLoaderRequest",
    "check_bucket_name",
    "check_filename",
    "check_tags",
]

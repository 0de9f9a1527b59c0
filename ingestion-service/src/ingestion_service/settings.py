"""The service's configuration: the shared contract's variables plus the ingestion-only ones."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator

from shared_contract import ContractConfigError, ContractSettings, load_settings
from shared_contract.http import LogFormat
from shared_contract.lexical import DEFAULT_LEXICAL_WINDOW
from shared_contract.settings import check_api_key, check_http_url

ConcreteEngine = Literal["kreuzberg", "kreuzberg-http", "tika", "pypdf", "docling", "unstructured"]
SplitBy = Literal["token", "markdown", "word", "sentence", "passage"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class Settings(ContractSettings):
    """Every ingestion-service variable. Built once per app via :func:`get_settings`."""

    # Server and auth.
    api_key: SecretStr = Field(description="Bearer token callers must send; at least 32 characters.")
    host: str = "0.0.0.0"  # noqa: S104 - a container service listens on every interface
    port: int = Field(default=8000, ge=1, le=65535)
    debug: bool = Field(default=False, description="Append raw exception text to error bodies.")
    log_level: LogLevel = "INFO"
    log_format: LogFormat = Field(default="json", description="json: one JSON object per line; text: plain lines.")
    metrics_enabled: bool = True
    enable_inspection_api: bool = False

    # Request gates.
    max_upload_bytes: int = Field(default=100 * 1024 * 1024, gt=0)
    max_request_bytes: int = Field(
        default=64 * 1024,
        gt=0,
        description="Body cap of every route other than the uploads (ingest, extract), which MAX_UPLOAD_BYTES caps.",
    )
    ingest_concurrency: int = Field(default=2, ge=1, le=64, description="Pipeline runs at once per process.")
    ingest_pending_timeout_seconds: float = Field(
        default=3600.0,
        gt=0,
        description="Server store: start-up recovery removes pending (unfinished) runs older than this.",
    )

    # Per-document limits: a few KB can expand into millions of characters (zip bombs, repeated text).
    max_unpacked_bytes: int = Field(
        default=256 * 1024 * 1024, gt=0, description="Declared uncompressed size of a ZIP-based document's members."
    )
    max_compression_ratio: float = Field(
        default=100.0, gt=1, description="Uncompressed/compressed ratio of any ZIP member above 1 MiB."
    )
    max_extracted_chars: int = Field(default=5_000_000, gt=0, description="Characters extraction may return.")
    max_chunks_per_document: int = Field(default=5_000, gt=0, description="Chunks one document may produce.")
    ingest_timeout_seconds: float = Field(
        default=600.0, gt=0, description="Wall time of one document's pipeline run (extraction to write)."
    )
    shutdown_grace_seconds: int = Field(
        default=20,
        ge=0,
        description="On SIGTERM, running ingests get this long before they are aborted (below Kubernetes' 30 s).",
    )
    scratch_dir: Path | None = Field(
        default=None, description="Where uploads are staged (default: <system temp>/ingestion-service)."
    )

    # S3 / MinIO.
    s3_endpoint_url: str | None = None
    s3_access_key_id: SecretStr | None = None
    s3_secret_access_key: SecretStr | None = None
    s3_region: str = "us-east-1"
    s3_allowed_buckets: str = Field(default="", description="Comma-separated allow-list; empty = any bucket.")
    s3_connect_timeout: float = Field(default=5.0, gt=0)
    s3_read_timeout: float = Field(default=60.0, gt=0)

    # Extraction.
    extraction_engine: ConcreteEngine = "kreuzberg"
    enable_ocr: bool = Field(default=False, description="Let kreuzberg OCR scans with its Tesseract backend.")
    ocr_language: str = "eng"
    kreuzberg_url: str = "http://kreuzberg:8000"
    kreuzberg_connect_timeout: float = Field(default=5.0, gt=0)
    kreuzberg_read_timeout: float = Field(default=60.0, gt=0)
    tika_url: str = "http://tika:9998"
    tika_connect_timeout: float = Field(default=5.0, gt=0)
    tika_read_timeout: float = Field(default=60.0, gt=0)

    # Chunking.
    chunk_split_by: SplitBy = "markdown"
    chunk_size: int = Field(default=400, gt=0, le=100_000)
    chunk_overlap: int = Field(default=80, ge=0)
    chunk_min_size: int = Field(default=100, ge=0)
    tokenizer_model: str | None = None
    tokenizer_revision: str | None = None
    embed_headers_breadcrumb: bool = True
    lexical_window_chunks: int = Field(
        default=DEFAULT_LEXICAL_WINDOW,
        ge=0,
        le=8,
        description="Neighbour chunks on each side whose text joins a chunk's BM25 entry (0 = the chunk alone).",
    )

    @field_validator("api_key")
    @classmethod
    def _long_enough(cls, value: SecretStr) -> SecretStr:
        return check_api_key(value)

    @field_validator("s3_endpoint_url", "kreuzberg_url", "tika_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        return check_http_url(value)

    @model_validator(mode="after")
    def _chunk_bounds(self) -> Self:
        if self.chunk_overlap >= self.chunk_size:
            raise ContractConfigError("CHUNK_OVERLAP", f"must be smaller than CHUNK_SIZE ({self.chunk_size})")
        if self.chunk_min_size > self.chunk_size:
            raise ContractConfigError("CHUNK_MIN_SIZE", f"must lie in [0, CHUNK_SIZE={self.chunk_size}]")
        return self

    @property
    def allowed_buckets(self) -> frozenset[str]:
        """The S3 bucket allow-list; empty means every bucket the credentials reach."""
        return frozenset(part.strip() for part in self.s3_allowed_buckets.split(",") if part.strip())


def get_settings() -> Settings:
    """Settings from the environment; invalid values raise ContractConfigError naming the variable."""
    return load_settings(Settings)

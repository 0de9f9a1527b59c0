"""The service's own groups: server and auth, request gates, per-document limits, jobs and
staging, S3."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator

from rag_runtime.http import LogFormat
from shared_contract.settings import Fingerprint, SettingsGroup, check_api_key, check_http_url

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class ServerSettings(SettingsGroup):
    """How the service listens, authenticates and reports."""

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
    loader_index_uploads: Annotated[bool, Fingerprint.OPERATIONAL] = Field(
        default=False,
        description="PUT /process also indexes what it extracted under tenant file-<id>, the id from Open WebUI's "
        "storage name <id>_<name> in X-Filename (before it answers).",
    )

    @field_validator("api_key")
    @classmethod
    def _api_key_long_enough(cls, value: SecretStr) -> SecretStr:
        return check_api_key(value)

    @field_validator("log_level", mode="before")
    @classmethod
    def _log_level_case(cls, value: object) -> object:
        # LOG_LEVEL=info is as common as INFO (``rag dev`` takes both).
        return value.strip().upper() if isinstance(value, str) else value


class RequestGateSettings(SettingsGroup):
    """What a request may bring and how many run at once."""

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


class DocumentLimitSettings(SettingsGroup):
    """What one document may expand into and how long it may take."""

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


class JobSettings(SettingsGroup):
    """Async ingest jobs, the staging area and the reindex jobs' state."""

    # Jobs and staging.
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


class OriginalSettings(SettingsGroup):
    """Where ingested originals are kept (page images of citations, reindex with pages)."""

    # Originals: a local directory by default, an S3 bucket (S3_ENDPOINT_URL's credentials) when set.
    keep_originals: Annotated[bool, Fingerprint.OPERATIONAL] = Field(
        default=True,
        description="Keep each ingested file's bytes, versioned and deleted with its chunks; off: citations "
        "have no page images and a reindex rebuilds uploads from their stored text.",
    )
    originals_dir: Annotated[Path, Fingerprint.OPERATIONAL] = Field(
        default=Path(".data/originals"), description="The local store of originals (when ORIGINALS_BUCKET is unset)."
    )
    originals_bucket: Annotated[str | None, Fingerprint.OPERATIONAL] = Field(
        default=None, description="Keep originals in this S3 bucket instead of ORIGINALS_DIR."
    )
    originals_prefix: Annotated[str, Fingerprint.OPERATIONAL] = Field(
        default="originals/", description="Key prefix of the originals in ORIGINALS_BUCKET."
    )
    originals_max_bytes: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=20 * 1024**3,
        gt=0,
        description="Bytes of originals kept in all; past it a new file is indexed without its original "
        "(logged, counted in ingest_originals_skipped_total).",
    )


class S3Settings(SettingsGroup):
    """The object store uploads are fetched from."""

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

    @field_validator("s3_endpoint_url")
    @classmethod
    def _s3_endpoint_url(cls, value: str | None) -> str | None:
        return check_http_url(value)

    @property
    def allowed_buckets(self) -> frozenset[str]:
        """The S3 bucket allow-list; empty means every bucket the credentials reach."""
        return frozenset(part.strip() for part in self.s3_allowed_buckets.split(",") if part.strip())

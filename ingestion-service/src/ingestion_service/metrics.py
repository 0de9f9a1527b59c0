"""Prometheus series, in a registry per app so several apps in one process never clash."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_BYTES_BUCKETS = (1e3, 1e4, 1e5, 1e6, 5e6, 1e7, 5e7, 1e8, 5e8)
_CHUNK_BUCKETS = (0, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 5000)
_SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)


class IngestMetrics:
    """Every series the service exports."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.ingest_requests = Counter(
            "ingest_requests_total", "Ingest requests by outcome and code.", ["outcome", "code"], registry=self.registry
        )
        self.loader_requests = Counter(
            "loader_requests_total",
            "Open WebUI document-loader requests (PUT /process) by outcome and code.",
            ["outcome", "code"],
            registry=self.registry,
        )
        self.loader_indexing = Counter(
            "loader_indexing_total",
            "Uploads PUT /process indexed with LOADER_INDEX_UPLOADS, by outcome (indexed, unchanged, superseded, "
            "skipped, error) and code.",
            ["outcome", "code"],
            registry=self.registry,
        )
        self.web_loader_urls = Counter(
            "web_loader_urls_total",
            "URLs Open WebUI's web loader (POST /process) asked for, by outcome (success, error) and code.",
            ["outcome", "code"],
            registry=self.registry,
        )
        self.delete_requests = Counter(
            "delete_requests_total", "Delete requests by outcome and code.", ["outcome", "code"], registry=self.registry
        )
        self.ingest_duration = Histogram(
            "ingest_duration_seconds", "Wall time of ingest requests.", buckets=_SECONDS_BUCKETS, registry=self.registry
        )
        self.ingest_chunks = Histogram(
            "ingest_chunks", "Chunks written per successful ingest.", buckets=_CHUNK_BUCKETS, registry=self.registry
        )
        self.ingest_document_bytes = Histogram(
            "ingest_document_bytes",
            "Size of ingested source documents.",
            buckets=_BYTES_BUCKETS,
            registry=self.registry,
        )
        self.ingest_empty = Counter(
            "ingest_empty_total", "Ingests whose extraction found no text.", registry=self.registry
        )
        self.ingest_front_matter_unread = Counter(
            "ingest_front_matter_unread_total",
            "Ingests of Markdown whose front matter could not be read (indexed as text, no labels from it).",
            registry=self.registry,
        )
        self.ingest_unchanged = Counter(
            "ingest_unchanged_total",
            "Ingests of bytes already stored under the same settings (nothing extracted or embedded).",
            registry=self.registry,
        )
        self.ingest_reused = Counter(
            "ingest_reused_vectors_total",
            "Ingests whose chunks and vectors were copied from the file's identical copy in another collection.",
            registry=self.registry,
        )
        self.ingest_originals_skipped = Counter(
            "ingest_originals_skipped_total",
            "Ingests whose original was not kept: ORIGINALS_MAX_BYTES was reached.",
            registry=self.registry,
        )
        self.citation_pages = Counter(
            "citation_pages_total",
            "Citation links opened, by what they asked for (page, original) and outcome (ok or the error code).",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self.ingest_superseded = Counter(
            "ingest_superseded_total", "Ingests that found a newer run of the same file.", registry=self.registry
        )
        self.recovered_points = Counter(
            "ingest_recovered_points_total",
            "Points start-up recovery removed: of unfinished runs (pending) or superseded versions.",
            ["kind"],
            registry=self.registry,
        )
        self.cleanup_failures = Counter(
            "ingest_cleanup_failures_total", "Failed removals of a failed run's own points.", registry=self.registry
        )
        self.ingest_jobs = Counter(
            "ingest_jobs_total",
            "Async ingest jobs by final state (succeeded, failed, aborted).",
            ["state"],
            registry=self.registry,
        )
        self.ingest_jobs_active = Gauge(
            "ingest_jobs_active", "Async ingest jobs now queued or running.", ["state"], registry=self.registry
        )
        for state in ("queued", "running"):
            self.ingest_jobs_active.labels(state=state).set(0)
        self.stage_duration = Histogram(
            "pipeline_stage_duration_seconds",
            "Wall time per pipeline stage.",
            ["stage"],
            buckets=_SECONDS_BUCKETS,
            registry=self.registry,
        )
        self.reindex_documents = Counter(
            "reindex_documents_total",
            "Documents reindex jobs processed, by outcome (reingested, unchanged, failed, skipped).",
            ["outcome"],
            registry=self.registry,
        )

        self.extraction_routes = Counter(
            "extraction_routes_total",
            "Documents EXTRACTION_ENGINE=auto routed, by route (default, diagram:vector, diagram:raster, scan, and the "
            "fallbacks to the default engine: <kind>:vision-unconfigured, diagram:gotenberg-unconfigured).",
            ["route"],
            registry=self.registry,
        )

    def observe_stage(self, stage: str, seconds: float) -> None:
        """The pipeline components' timing callback."""
        self.stage_duration.labels(stage=stage).observe(seconds)

    def observe_route(self, route: str) -> None:
        """The ``auto`` router's callback, once per document it routes."""
        self.extraction_routes.labels(route=route).inc()

    def render(self) -> bytes:
        """The exposition text."""
        return generate_latest(self.registry)

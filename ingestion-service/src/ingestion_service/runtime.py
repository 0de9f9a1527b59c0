"""Everything the app holds for its lifetime, and the readiness state the probes report."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from ingestion_service.adapters.chunk_index import ChunkIndex
from ingestion_service.adapters.document_catalog import DocumentCatalog
from ingestion_service.adapters.originals import LocalOriginals, OriginalStore, S3Originals
from ingestion_service.adapters.s3 import S3Source, build_s3_client
from ingestion_service.adapters.scratch import ScratchSpace, default_root
from ingestion_service.adapters.tokenizer import load_token_counter
from ingestion_service.adapters.url_fetcher import UrlFetcher
from ingestion_service.documents import ConverterFactory, ConverterRegistry, tessdata
from ingestion_service.indexing import versioning
from ingestion_service.indexing.assembly import PipelineParts, assemble, build_parts
from ingestion_service.indexing.originals import Originals
from ingestion_service.indexing.runner import BeforeCommitHook, IndexingRunner
from ingestion_service.metrics import IngestMetrics
from ingestion_service.pipeline.embed_text import EmbedTextBuilder
from ingestion_service.settings import Settings
from rag_runtime.embedding import ContractEmbedder
from rag_runtime.language_id import language_identifier
from rag_runtime.store import ChunkStore, bootstrap_collection, close_store, open_store, verify_collection
from shared_contract import MULTILINGUAL_VECTOR, CollectionManifest, ContractError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

logger = logging.getLogger(__name__)

VISION_ENGINES = frozenset({"vision-llm", "hybrid-diagram", "auto"})

# After the shutdown grace period, aborted runs get this long to stop and remove their points
# before the store closes (Kubernetes kills 30 s after SIGTERM; the grace defaults to 20 s).
ABORT_WAIT_SECONDS = 5.0


@dataclass
class ServiceHooks:
    """Constructor injection for tests and embedding hosts (``rag dev``); all optional.

    ``embedder``: an already-built (possibly warm) embedder to share. ``converter_factories``:
    engines to register or replace. ``customize_parts``: swap pipeline stages before assembly
    (fault injection). ``before_commit``: called between write and commit (interleaving tests).
    ``index_factory``: wrap the chunk index (store faults in commit/cleanup/delete).
    ``catalog_factory``: build the documents API's catalog (limits, store faults).
    ``store``: an already-open store to use instead of opening one from the settings.
    ``originals_store``: where originals are kept, instead of ORIGINALS_DIR / ORIGINALS_BUCKET.
    ``job_clock``: the monotonic clock async ingest jobs expire by (TTL tests).
    ``source_clock`` / ``source_tick_seconds``: the wall clock sources are scheduled by, and how often
    the schedule is looked at (schedule tests).
    """

    embedder: ContractEmbedder | None = None
    s3_source: S3Source | None = None
    converter_factories: Mapping[str, ConverterFactory] = field(default_factory=lambda: dict[str, ConverterFactory]())
    customize_parts: Callable[[PipelineParts], PipelineParts] | None = None
    before_commit: BeforeCommitHook | None = None
    index_factory: Callable[[ChunkStore], ChunkIndex] | None = None
    catalog_factory: Callable[[ChunkStore], DocumentCatalog] | None = None
    store: ChunkStore | None = None
    originals_store: OriginalStore | None = None
    job_clock: Callable[[], float] | None = None
    source_clock: Callable[[], datetime] | None = None
    source_tick_seconds: float | None = None


@dataclass
class Readiness:
    """What /health/ready reports."""

    pipeline_ready: bool = False
    pipeline_error: str | None = None
    collection_ready: bool = False
    collection_error: str | None = None
    recovered: bool = False


class ServiceRuntime:
    """Owns the store, embedder, registry, pipeline runner, S3 source, URL fetcher and scratch space (the background
    jobs that use them are the app's: ``main``)."""

    def __init__(self, settings: Settings, hooks: ServiceHooks | None = None) -> None:
        self.settings = settings
        self.hooks = hooks or ServiceHooks()
        self.metrics = IngestMetrics()
        self.readiness = Readiness()
        # Before anything else: a configured OCR language without its data refuses start-up.
        self.ocr = tessdata.resolve(
            enabled=settings.enable_ocr, configured=settings.ocr_languages, extra_dirs=settings.tessdata_dirs
        )
        self.limiter = anyio.CapacityLimiter(settings.ingest_concurrency)
        self.registry = ConverterRegistry(settings, observe_route=self.metrics.observe_route)
        for name, factory in self.hooks.converter_factories.items():
            self.registry.register(name, factory)
        self._owns_store = self.hooks.store is None
        self.store: ChunkStore = self.hooks.store if self.hooks.store is not None else open_store(settings)
        make_index = self.hooks.index_factory or ChunkIndex
        self.index: ChunkIndex = make_index(self.store)
        # The documents API's reads and metadata writes (the versioning protocol stays in ``index``).
        self.catalog: DocumentCatalog = (self.hooks.catalog_factory or DocumentCatalog)(self.store)
        self._owns_embedder = self.hooks.embedder is None
        self.embedder: ContractEmbedder = self.hooks.embedder or ContractEmbedder(settings)
        self._owns_s3 = self.hooks.s3_source is None
        self.s3: S3Source = self.hooks.s3_source or S3Source(build_s3_client(settings))
        self._originals_client: S3Client | None = None
        self.originals: Originals | None = (
            Originals(self._originals_store(), self.index, max_bytes=settings.originals_max_bytes, metrics=self.metrics)
            if settings.keep_originals
            else None
        )
        # Holds no connection: each fetch opens its own client (adapters/url_fetcher.py).
        self.urls = UrlFetcher(settings)
        self.runner: IndexingRunner | None = None
        self.scratch = ScratchSpace(
            settings.scratch_dir if settings.scratch_dir is not None else default_root(),
            max_bytes=settings.scratch_max_bytes,
        )
        self._bootstrap_lock = anyio.Lock()
        # One warm-up retry at a time; probes arriving meanwhile report the last failure.
        self._warm_up_lock = anyio.Lock()
        # Set from the collection's manifest at bootstrap.
        self.multilingual_active = False

    def _originals_store(self) -> OriginalStore:
        if self.hooks.originals_store is not None:
            return self.hooks.originals_store
        bucket = self.settings.originals_bucket
        if bucket is None:
            return LocalOriginals(self.settings.originals_dir)
        self._originals_client = build_s3_client(self.settings)
        return S3Originals(self._originals_client, bucket, self.settings.originals_prefix)

    # -- start-up --------------------------------------------------------------------------

    def warm_up(self, *, retry: bool = False) -> None:
        """Load models and assemble the pipeline (blocking: runs in a worker thread).

        A failure is recorded for /health/ready; ``retry`` logs it in one line (probes retry often).
        """
        try:
            self.embedder.warm_up()
            language_identifier().warm_up()
            counter = load_token_counter(self.settings, self.embedder)
            embed_text = EmbedTextBuilder(
                counter,
                max_tokens=self.embedder.max_tokens,
                chunk_size=self.settings.chunk_size,
                prefix=self.settings.embedding_prefix_doc,
                use_breadcrumb=self.settings.embed_headers_breadcrumb,
                use_title=self.settings.embed_document_title,
                sparse_window=self.embedder.sparse_window,
            )
            parts = build_parts(
                self.settings,
                registry=self.registry,
                embedder=self.embedder,
                embed_text=embed_text,
                index=self.index,
                observer=self.metrics.observe_stage,
                multilingual_active=lambda: self.multilingual_active,
            )
            if self.settings.vision_configured and self.settings.extraction_engine in VISION_ENGINES:
                # The vision engine imports LiteLLM (seconds); pay that at start-up, not on a request.
                self.registry.get("vision-llm")
            if self.hooks.customize_parts is not None:
                parts = self.hooks.customize_parts(parts)
            self.runner = IndexingRunner(
                assemble(parts),
                self.index,
                default_engine=self.settings.extraction_engine,
                timeout_seconds=self.settings.ingest_timeout_seconds,
                metrics=self.metrics,
                before_commit=self.hooks.before_commit,
                originals=self.originals,
            )
        except Exception as exc:  # recorded for /health/ready and logged; the service stays up, unready
            if retry:
                logger.warning("pipeline warm-up failed again: %s", exc)
            else:
                logger.exception("pipeline warm-up failed")
            self.readiness.pipeline_error = f"pipeline warm-up failed: {exc}"
            return
        if retry:
            logger.info("pipeline warm-up succeeded on retry; the service is ready")
        self.readiness.pipeline_ready = True
        self.readiness.pipeline_error = None

    async def ensure_pipeline(self) -> bool:
        """Whether the pipeline is warm; after a failed warm-up, retry it first (an embedding
        endpoint that came up later makes the service ready without a restart).

        The retry runs in a worker thread, one at a time: a caller arriving while one runs does
        not wait for it and gets the last failure. While the first warm-up runs nothing is retried.
        """
        if self.readiness.pipeline_ready:
            return True
        if self.readiness.pipeline_error is None or self._warm_up_lock.locked():
            return False
        async with self._warm_up_lock:
            # The worker thread is not abandoned on cancellation, so the lock covers the whole retry.
            await anyio.to_thread.run_sync(lambda: self.warm_up(retry=True))
        return self.readiness.pipeline_ready

    async def ensure_collection(self) -> bool:
        """Bootstrap the collection if that has not succeeded yet, else verify it.

        The first success also runs start-up recovery (``versioning.recover``) before any ingest
        can start, so a run killed earlier never leaves visible leftovers.
        """
        async with self._bootstrap_lock:
            try:
                if self.readiness.collection_ready:
                    manifest = await verify_collection(
                        self.store, self.settings, require_sparse=self.settings.enable_sparse_embeddings
                    )
                else:
                    manifest = await bootstrap_collection(self.store, self.settings)
                    self._note_multilingual(manifest)
                    if not self.readiness.recovered:
                        await self._recover()
            except ContractError as exc:
                self.readiness.collection_ready = False
                self.readiness.collection_error = str(exc)
                return False
            self.readiness.collection_ready = True
            self.readiness.collection_error = None
            return True

    def _note_multilingual(self, manifest: CollectionManifest) -> None:
        """Write ``text-dense-multilingual`` only when the collection has it; say so when it lacks it."""
        self.multilingual_active = manifest.multilingual_model is not None
        if self.settings.multilingual_model is not None and not self.multilingual_active:
            logger.warning(
                "collection %r was built without %s, so chunks outside %s's languages get no dense "
                "vector of their own; to add it, set QDRANT_INDEX to a new collection and reindex into it "
                "(POST /api/v1/collections/{name}/reindex with source_index; docs/models.md)",
                self.settings.qdrant_index,
                MULTILINGUAL_VECTOR,
                self.settings.embedding_model,
            )

    async def _recover(self) -> None:
        # One process owns an embedded store, so every pending point there is dead; on a server
        # other replicas may still be writing theirs.
        timeout = None if self.store.kind == "embedded" else self.settings.ingest_pending_timeout_seconds
        report = await versioning.recover(self.index, pending_timeout_seconds=timeout)
        self.metrics.recovered_points.labels(kind="pending").inc(report.pending_runs_removed)
        self.metrics.recovered_points.labels(kind="superseded").inc(report.stale_versions_removed)
        self.readiness.recovered = True

    async def start(self) -> None:
        """The lifespan's background start-up: staging leftovers, bootstrap (and recovery), warm-up."""
        await self.scratch.sweep()
        await self.ensure_collection()
        await anyio.to_thread.run_sync(self.warm_up)

    async def close(self) -> None:
        """Abort running ingests, then release the staging area, HTTP clients and store (unless handed in).

        The server has already waited SHUTDOWN_GRACE_SECONDS for running requests, and the lifespan
        as long for the background jobs (``jobs``); what is left is aborted (pending points removed,
        previous versions kept) within ABORT_WAIT_SECONDS.
        """
        # A request still downloading from S3 is a worker thread the server's cancellation cannot end.
        self.s3.abort()
        if self.runner is not None and self.runner.abort_all():
            logger.warning("shutting down: aborting running ingests; their previous versions are kept")
            if not await self.runner.wait_idle(ABORT_WAIT_SECONDS):
                logger.warning("ingests still running at shutdown; start-up recovery removes their pending points")
        await self.scratch.release()
        try:
            # The HTTP engines' and S3's connection pools; closing sockets may block, so in a thread.
            await anyio.to_thread.run_sync(self.registry.close)
            if self._owns_s3:
                await anyio.to_thread.run_sync(self.s3.close)
            if self._originals_client is not None:
                await anyio.to_thread.run_sync(self._originals_client.close)
            if self._owns_embedder:
                await anyio.to_thread.run_sync(self.embedder.close)
        finally:
            if self._owns_store:
                await close_store(self.store)

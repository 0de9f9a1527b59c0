"""Everything the app holds for its lifetime, and the readiness state the probes report."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import anyio
import anyio.to_thread
from qdrant_client import QdrantClient

from ingestion_service.adapters.extractors import ConverterFactory, ConverterRegistry
from ingestion_service.adapters.qdrant_store import ChunkIndex, SharedClientDocumentStore
from ingestion_service.adapters.s3 import S3Source, build_s3_client
from ingestion_service.adapters.tokenizer import load_token_counter
from ingestion_service.metrics import IngestMetrics
from ingestion_service.pipeline.embed_text import EmbedTextBuilder
from ingestion_service.pipeline.indexing import (
    BeforeCommitHook,
    IndexingRunner,
    PipelineParts,
    assemble,
    build_parts,
)
from ingestion_service.settings import Settings
from shared_contract import (
    ContractEmbedder,
    ContractError,
    bootstrap_collection,
    close_qdrant,
    open_qdrant,
    verify_collection,
)

logger = logging.getLogger(__name__)


@dataclass
class ServiceHooks:
    """Constructor injection for tests and embedding hosts (``rag dev``); all optional.

    ``embedder``: an already-built (possibly warm) embedder to share. ``converter_factories``:
    engines to register or replace. ``customize_parts``: swap pipeline stages before assembly
    (fault injection). ``before_commit``: called between write and commit (interleaving tests).
    ``index_factory``: wrap the chunk index (Qdrant faults in commit/cleanup/delete).
    """

    embedder: ContractEmbedder | None = None
    s3_source: S3Source | None = None
    converter_factories: Mapping[str, ConverterFactory] = field(default_factory=lambda: dict[str, ConverterFactory]())
    customize_parts: Callable[[PipelineParts], PipelineParts] | None = None
    before_commit: BeforeCommitHook | None = None
    index_factory: Callable[[QdrantClient, str], ChunkIndex] | None = None


@dataclass
class Readiness:
    """What /health/ready reports."""

    pipeline_ready: bool = False
    pipeline_error: str | None = None
    collection_ready: bool = False
    collection_error: str | None = None


class ServiceRuntime:
    """Owns the Qdrant client, embedder, registry, pipeline runner and S3 source."""

    def __init__(self, settings: Settings, hooks: ServiceHooks | None = None) -> None:
        self.settings = settings
        self.hooks = hooks or ServiceHooks()
        self.metrics = IngestMetrics()
        self.readiness = Readiness()
        self.limiter = anyio.CapacityLimiter(settings.ingest_concurrency)
        self.registry = ConverterRegistry(settings)
        for name, factory in self.hooks.converter_factories.items():
            self.registry.register(name, factory)
        self.client: QdrantClient = open_qdrant(settings)
        make_index = self.hooks.index_factory or ChunkIndex
        self.index: ChunkIndex = make_index(self.client, settings.qdrant_index)
        self.embedder: ContractEmbedder = self.hooks.embedder or ContractEmbedder(settings)
        self.s3: S3Source = self.hooks.s3_source or S3Source(build_s3_client(settings))
        self.runner: IndexingRunner | None = None
        self._bootstrap_lock = threading.Lock()

    # -- start-up --------------------------------------------------------------------------

    def warm_up(self) -> None:
        """Load models and assemble the pipeline (blocking: runs in a worker thread)."""
        try:
            self.embedder.warm_up()
            counter = load_token_counter(self.settings, self.embedder)
            embed_text = EmbedTextBuilder(
                counter,
                max_tokens=self.embedder.max_tokens,
                chunk_size=self.settings.chunk_size,
                prefix=self.settings.embedding_prefix_doc,
                use_breadcrumb=self.settings.embed_headers_breadcrumb,
            )
            parts = build_parts(
                self.settings,
                registry=self.registry,
                embedder=self.embedder,
                embed_text=embed_text,
                store=SharedClientDocumentStore(self.client, self.settings),
                observer=self.metrics.observe_stage,
            )
            if self.hooks.customize_parts is not None:
                parts = self.hooks.customize_parts(parts)
            self.runner = IndexingRunner(
                assemble(parts),
                self.index,
                default_engine=self.settings.extraction_engine,
                metrics=self.metrics,
                before_commit=self.hooks.before_commit,
            )
        except Exception as exc:  # recorded for /health/ready and logged; the service stays up, unready
            logger.exception("pipeline warm-up failed")
            self.readiness.pipeline_error = f"pipeline warm-up failed: {exc}"
            return
        self.readiness.pipeline_ready = True
        self.readiness.pipeline_error = None

    def ensure_collection(self) -> bool:
        """Bootstrap the collection if that has not succeeded yet, else verify it (blocking)."""
        with self._bootstrap_lock:
            try:
                if self.readiness.collection_ready:
                    verify_collection(self.client, self.settings, require_sparse=self.settings.enable_sparse_embeddings)
                else:
                    bootstrap_collection(self.client, self.settings)
            except ContractError as exc:
                self.readiness.collection_ready = False
                self.readiness.collection_error = str(exc)
                return False
            self.readiness.collection_ready = True
            self.readiness.collection_error = None
            return True

    async def start(self) -> None:
        """The lifespan's background start-up: bootstrap, then warm up."""
        await anyio.to_thread.run_sync(self.ensure_collection)
        await anyio.to_thread.run_sync(self.warm_up)

    def close(self) -> None:
        """Release the shared Qdrant client."""
        close_qdrant(self.client)

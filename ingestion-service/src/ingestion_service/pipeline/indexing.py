"""Assembly of the indexing pipeline (built once at start-up) and the per-request runner."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.to_thread
from haystack import Pipeline
from haystack.core.errors import PipelineRuntimeError

from ingestion_service import run_control
from ingestion_service.adapters.chunk_index import ChunkIndex
from ingestion_service.documents import ConverterRegistry, SourceFile
from ingestion_service.errors import (
    EmbeddingFailedError,
    ExtractionError,
    IngestionError,
    NoExtractableTextError,
    PipelineFailedError,
    QdrantWriteError,
    ShuttingDownError,
    SparseEmbeddingFailedError,
)
from ingestion_service.metrics import IngestMetrics
from ingestion_service.pipeline import versioning
from ingestion_service.pipeline.components.chunk_finalizer import ChunkFinalizer, chunk_id
from ingestion_service.pipeline.components.chunk_writer import ChunkWriter, WriteBatch
from ingestion_service.pipeline.components.dense_embedder import ContractDenseEmbedder
from ingestion_service.pipeline.components.embedding_guard import EmbeddingGuard
from ingestion_service.pipeline.components.file_converter import EXTRACTOR_KEY, FileConverter
from ingestion_service.pipeline.components.language_tagger import LanguageTagger
from ingestion_service.pipeline.components.markdown_splitter import MarkdownSplitter
from ingestion_service.pipeline.components.multilingual_embedder import MultilingualDenseEmbedder
from ingestion_service.pipeline.components.sparse_embedder import ContractSparseEmbedder
from ingestion_service.pipeline.components.token_splitter import TokenSplitter
from ingestion_service.pipeline.components.unit_splitter import UnitSplitter
from ingestion_service.pipeline.embed_text import EmbedTextBuilder
from ingestion_service.pipeline.observe import StageObserver
from ingestion_service.pipeline.versioning import RunVersion
from ingestion_service.run_control import RunControl
from ingestion_service.settings import Settings
from rag_runtime.embedding import ContractEmbedder, SparseVectorData
from rag_runtime.language_id import language_identifier
from rag_runtime.store import ChunkPoint, PointRecord, point_id_for
from rag_runtime.store.points import PAYLOAD_ID
from shared_contract import (
    DENSE_VECTOR,
    MULTILINGUAL_VECTOR,
    PAYLOAD_META,
    PENDING_STATE,
    SPARSE_VECTOR,
    ContractError,
    EmbeddingError,
    MetaKey,
    SparseEmbeddingError,
)

logger = logging.getLogger(__name__)


@dataclass
class PipelineParts:
    """The components, by stage. Tests swap single parts (e.g. a failing embedder) before assembly."""

    converter: Any
    splitter: Any
    finalizer: Any
    dense_embedder: Any
    sparse_embedder: Any | None
    guard: Any
    writer: Any
    multilingual_embedder: Any | None = None
    language_tagger: Any | None = None


def checked_write(write: WriteBatch) -> WriteBatch:
    """``write`` that first stops an aborted or late run (the writer itself is not run-aware)."""

    async def write_batch(points: Sequence[ChunkPoint]) -> None:
        run_control.checkpoint()
        await write(points)

    return write_batch


def build_parts(
    settings: Settings,
    *,
    registry: ConverterRegistry,
    embedder: ContractEmbedder,
    embed_text: EmbedTextBuilder,
    index: ChunkIndex,
    observer: StageObserver | None = None,
    multilingual_active: Callable[[], bool] = lambda: False,
) -> PipelineParts:
    """The standard components for ``settings``.

    ``multilingual_active``: whether the collection has ``text-dense-multilingual`` (its manifest).
    """
    overlap = settings.chunk_overlap
    splitter: Any
    if settings.chunk_split_by == "markdown":
        splitter = MarkdownSplitter(
            embed_text,
            overlap=overlap,
            min_tokens=settings.chunk_min_size,
            keyed_tables=settings.chunk_table_rows == "pairs",
            observer=observer,
        )
    elif settings.chunk_split_by == "token":
        splitter = TokenSplitter(embed_text, overlap=overlap, observer=observer)
    else:
        splitter = UnitSplitter(settings.chunk_split_by, size=settings.chunk_size, overlap=overlap, observer=observer)
    sparse_on = settings.enable_sparse_embeddings
    return PipelineParts(
        converter=FileConverter(
            registry, settings.extraction_engine, observer=observer, max_chars=settings.max_extracted_chars
        ),
        splitter=splitter,
        finalizer=ChunkFinalizer(
            embed_text, overlap=overlap, observer=observer, max_chunks=settings.max_chunks_per_document
        ),
        language_tagger=LanguageTagger(language_identifier(), observer=observer),
        dense_embedder=ContractDenseEmbedder(embedder, embed_text, sparse_enabled=sparse_on, observer=observer),
        sparse_embedder=ContractSparseEmbedder(embedder, embed_text, observer=observer) if sparse_on else None,
        guard=EmbeddingGuard(dim=embedder.dim, require_sparse=sparse_on, observer=observer),
        writer=ChunkWriter(
            checked_write(index.write), embed_text, lexical_window=settings.lexical_window_chunks, observer=observer
        ),
        multilingual_embedder=None
        if embedder.multilingual is None
        else MultilingualDenseEmbedder(
            embedder.multilingual, embed_text, active=multilingual_active, observer=observer
        ),
    )


def assemble(parts: PipelineParts) -> Pipeline:
    """converter -> splitter -> finalizer -> [languages] -> dense -> [sparse] -> guard -> [multilingual] -> writer."""
    pipeline = Pipeline()
    pipeline.add_component("converter", parts.converter)
    pipeline.add_component("splitter", parts.splitter)
    pipeline.add_component("finalizer", parts.finalizer)
    pipeline.add_component("dense_embedder", parts.dense_embedder)
    pipeline.add_component("guard", parts.guard)
    pipeline.add_component("writer", parts.writer)
    pipeline.connect("converter.documents", "splitter.documents")
    pipeline.connect("splitter.documents", "finalizer.documents")
    if parts.language_tagger is not None:
        pipeline.add_component("language_tagger", parts.language_tagger)
        pipeline.connect("finalizer.documents", "language_tagger.documents")
        pipeline.connect("language_tagger.documents", "dense_embedder.documents")
    else:
        pipeline.connect("finalizer.documents", "dense_embedder.documents")
    if parts.sparse_embedder is not None:
        pipeline.add_component("sparse_embedder", parts.sparse_embedder)
        pipeline.connect("dense_embedder.documents", "sparse_embedder.documents")
        pipeline.connect("sparse_embedder.documents", "guard.documents")
    else:
        pipeline.connect("dense_embedder.documents", "guard.documents")
    if parts.multilingual_embedder is not None:
        pipeline.add_component("multilingual_embedder", parts.multilingual_embedder)
        pipeline.connect("guard.documents", "multilingual_embedder.documents")
        pipeline.connect("multilingual_embedder.documents", "writer.documents")
        pipeline.connect("multilingual_embedder.multilingual", "writer.multilingual")
    else:
        pipeline.connect("guard.documents", "writer.documents")
    return pipeline


@dataclass(frozen=True)
class DocumentLabels:
    """The caller's labels for a document; None means "keep what the stored version has"."""

    tags: list[str] | None = None
    category: str | None = None
    attributes: dict[str, Any] | None = None

    def filled_from(self, stored: dict[str, Any] | None) -> DocumentLabels:
        """Labels not given in the request carry over from the stored version (a PATCH survives a re-upload)."""
        if stored is None:
            return self
        tags = stored.get(MetaKey.TAGS)
        category = stored.get(MetaKey.CATEGORY)
        attributes = stored.get(MetaKey.ATTRIBUTES)
        return DocumentLabels(
            tags=self.tags if self.tags is not None else (list(tags) if isinstance(tags, list) else None),
            category=self.category if self.category is not None else (category if isinstance(category, str) else None),
            attributes=self.attributes
            if self.attributes is not None
            else (dict(attributes) if isinstance(attributes, dict) else None),
        )


@dataclass(frozen=True)
class SourceIdentity:
    """What identifies the bytes and where they came from."""

    sha256: str
    size: int
    format: str
    s3_bucket: str | None = None
    s3_key: str | None = None
    s3_etag: str | None = None


@dataclass(frozen=True)
class IngestJob:
    """One ingest request, ready to run."""

    source: SourceFile
    file_id: str
    collection_name: str
    collection_type: str
    user_id: str
    overwrite: bool
    run: RunVersion
    engine: str | None = None
    identity: SourceIdentity | None = None
    labels: DocumentLabels = field(default_factory=DocumentLabels)
    # INGEST_FINGERPRINT of the settings this run uses; with ``identity`` it enables the unchanged fast path.
    fingerprint: str | None = None
    force: bool = False

    def document_meta(self) -> dict[str, Any]:
        """The document-level keys (every chunk of the file carries the same values)."""
        meta: dict[str, Any] = {
            MetaKey.COLLECTION_TYPE: self.collection_type,
            MetaKey.USER_ID: self.user_id,
            MetaKey.NAME: self.source.filename,
            MetaKey.SOURCE: self.source.filename,
            MetaKey.TAGS: self.labels.tags,
            MetaKey.CATEGORY: self.labels.category,
            MetaKey.ATTRIBUTES: self.labels.attributes,
        }
        if self.identity is not None:
            meta |= {
                MetaKey.SOURCE_HASH: self.identity.sha256,
                MetaKey.SOURCE_BYTES: self.identity.size,
                MetaKey.FORMAT: self.identity.format,
                MetaKey.S3_BUCKET: self.identity.s3_bucket,
                MetaKey.S3_KEY: self.identity.s3_key,
                MetaKey.S3_ETAG: self.identity.s3_etag,
            }
        if self.fingerprint is not None:
            meta[MetaKey.INGEST_FINGERPRINT] = self.fingerprint
        return meta

    def meta(self) -> dict[str, Any]:
        """Request metadata every chunk carries (it wins over extractor metadata)."""
        return {
            MetaKey.FILE_ID: self.file_id,
            MetaKey.COLLECTION_NAME: self.collection_name,
            **self.document_meta(),
            MetaKey.INGEST_VERSION: self.run.version,
            MetaKey.INGEST_SEQ: self.run.seq,
            MetaKey.INGEST_STATE: PENDING_STATE,
        }

    def stored_as(self, stored: dict[str, Any]) -> bool:
        """Whether ``stored`` (a committed head's meta) holds these bytes under the same fingerprint."""
        return (
            self.identity is not None
            and self.fingerprint is not None
            and stored.get(MetaKey.SOURCE_HASH) == self.identity.sha256
            and stored.get(MetaKey.INGEST_FINGERPRINT) == self.fingerprint
        )


@dataclass(frozen=True)
class IngestOutcome:
    """What a finished run did."""

    chunks_count: int
    engine: str
    superseded: bool = False
    kept_existing: bool = False
    # The same bytes were stored under the same settings: nothing was written but changed metadata.
    unchanged: bool = False
    # The points were copied from the file's identical copy in another tenant (no extraction, no embedding).
    reused_vectors: bool = False
    # The version readers now see when it is not this run's (unchanged, kept_existing).
    live_version: str | None = None
    # kept_existing: the sha256 of the stored version's source, which the caller's file did not replace.
    stored_hash: str | None = None


# An untyped error inside a stage still fails that stage: its code follows the component.
_STAGE_ERRORS: dict[str, Callable[[str], IngestionError]] = {
    "converter": ExtractionError,
    "dense_embedder": EmbeddingFailedError,
    "multilingual_embedder": EmbeddingFailedError,
    "guard": EmbeddingFailedError,
    "sparse_embedder": SparseEmbeddingFailedError,
    "writer": QdrantWriteError,
}


def classify(exc: Exception) -> IngestionError:
    """The typed error behind ``exc`` (Haystack wraps component errors in PipelineRuntimeError)."""
    seen: set[int] = set()
    stage: str | None = None
    current: BaseException | None = exc
    innermost: BaseException = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        innermost = current
        if isinstance(current, PipelineRuntimeError) and stage is None:
            stage = current.component_name
        if isinstance(current, IngestionError):
            return current
        if isinstance(current, SparseEmbeddingError):
            return SparseEmbeddingFailedError(str(current))
        if isinstance(current, EmbeddingError):
            return EmbeddingFailedError(str(current))
        if isinstance(current, ContractError):
            return PipelineFailedError(str(current))
        current = current.__cause__ or current.__context__
    make = _STAGE_ERRORS.get(stage or "", PipelineFailedError)
    return make(f"{stage or 'pipeline'}: {type(innermost).__name__}: {innermost}")


BeforeCommitHook = Callable[[IngestJob], None]
COPY_BATCH_SIZE = 64


def copied_point(record: PointRecord, job: IngestJob, *, indexed_at: str) -> ChunkPoint:
    """A stored point of another tenant as a pending point of ``job``: same text, vectors and lexical entry."""
    meta = dict(record.payload.get(PAYLOAD_META) or {})
    meta |= job.meta()
    meta[MetaKey.INDEXED_AT] = indexed_at
    split_id = meta.get(MetaKey.SPLIT_ID)
    new_id = chunk_id(meta, split_id if isinstance(split_id, int) else 0)
    vectors = record.vectors or {}
    dense = vectors.get(DENSE_VECTOR)
    sparse = vectors.get(SPARSE_VECTOR)
    if not isinstance(dense, list):
        raise QdrantWriteError(f"point {record.point_id} of the identical copy has no dense vector")
    multilingual = vectors.get(MULTILINGUAL_VECTOR)
    payload = {**record.payload, PAYLOAD_ID: new_id, PAYLOAD_META: meta}
    return ChunkPoint(
        point_id=point_id_for(new_id),
        dense=dense,
        sparse=sparse if isinstance(sparse, SparseVectorData) else None,
        payload=payload,
        multilingual=multilingual if isinstance(multilingual, list) else None,
    )


class IndexingRunner:
    """Runs the pipeline for one job (in a worker thread) and applies the versioning protocol."""

    def __init__(
        self,
        pipeline: Pipeline,
        index: ChunkIndex,
        *,
        default_engine: str,
        timeout_seconds: float,
        metrics: IngestMetrics | None = None,
        before_commit: BeforeCommitHook | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.index = index
        self.default_engine = default_engine
        self.timeout_seconds = timeout_seconds
        self.metrics = metrics
        self.before_commit = before_commit
        self._active: set[RunControl] = set()

    def new_control(self) -> RunControl:
        """A control with this runner's INGEST_TIMEOUT_SECONDS."""
        return RunControl(timeout_seconds=self.timeout_seconds)

    async def ingest(
        self,
        job: IngestJob,
        *,
        limiter: anyio.CapacityLimiter | None = None,
        control: RunControl | None = None,
    ) -> IngestOutcome:
        """Index ``job``; on failure its own points are removed and a typed error is raised.

        ``limiter`` bounds how many pipelines run at once (INGEST_CONCURRENCY). ``control`` lets
        the caller abort the run (client gone); it also carries the run's deadline. A cancelled
        caller (server shutdown) aborts the run, waits for its worker and removes its points
        before the cancellation propagates, unless the commit had begun, which is then finished.
        """
        control = control if control is not None else self.new_control()
        engine = job.engine or self.default_engine
        if not job.overwrite:
            existing = await self._existing(job)
            if existing:
                return await self._kept(job, existing, engine)
        stored = await self._stored_head(job)
        requested = job.labels
        job = replace(job, labels=requested.filled_from(stored))
        if stored is not None and not job.force and job.stored_as(stored):
            unchanged = await self._unchanged(job, stored)
            if unchanged is not None:
                return unchanged
        self._active.add(control)
        try:
            if not job.force and job.identity is not None and job.fingerprint is not None:
                twin = await self._identical_copy(job, job.identity.sha256, job.fingerprint)
                if twin is not None:
                    return await self._copy(job, twin, control, limiter, requested)
            return await self._ingest(job, control, limiter, engine, requested)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._after_cancel(job, control)
            raise
        finally:
            self._active.discard(control)

    async def _ingest(
        self,
        job: IngestJob,
        control: RunControl,
        limiter: anyio.CapacityLimiter | None,
        engine: str,
        requested: DocumentLabels,
    ) -> IngestOutcome:
        try:
            result = await self._run_worker(job, control, limiter)
            chunks = result["finalizer"]["documents"]
            written = int(result["writer"]["documents_written"])
            if chunks:
                engine = str(chunks[0].meta.get(EXTRACTOR_KEY, engine))
            if self.before_commit is not None:
                await anyio.to_thread.run_sync(self.before_commit, job)
            # Last chance to stop: an aborted or late run never publishes.
            control.check()
            try:
                labels = await self._labels_now(job, requested)
                control.commit_started = True
                committed = await versioning.commit(
                    self.index, job.file_id, job.collection_name, job.run, meta=labels, written=written
                )
            except ContractError as exc:
                raise QdrantWriteError(f"commit failed: {exc}") from exc
        except Exception as exc:
            error = classify(exc)
            if isinstance(error, NoExtractableTextError) and self.metrics is not None:
                self.metrics.ingest_empty.inc()
            await self._discard(job, error)
            if error is exc:
                raise
            raise error from exc
        if committed.superseded and self.metrics is not None:
            self.metrics.ingest_superseded.inc()
        return IngestOutcome(chunks_count=written, engine=engine, superseded=committed.superseded)

    async def _run_worker(
        self, job: IngestJob, control: RunControl, limiter: anyio.CapacityLimiter | None
    ) -> dict[str, Any]:
        def run_pipeline() -> dict[str, Any]:
            result: dict[str, Any] = self.pipeline.run(
                {"converter": {"source": job.source, "meta": job.meta(), "engine": job.engine}},
                include_outputs_from={"finalizer"},
            )
            return result

        return await run_control.run_in_worker(control, run_pipeline, limiter=limiter)

    async def _after_cancel(self, job: IngestJob, control: RunControl) -> None:
        if control.commit_started:
            # Cancelled inside the commit: publish and sweep are idempotent, so finish it rather
            # than delete a version that may already be live.
            try:
                await versioning.commit(self.index, job.file_id, job.collection_name, job.run)
            except ContractError:
                logger.exception(
                    "finishing a cancelled commit failed; start-up recovery completes it",
                    extra={"file_id": job.file_id, "ingest_version": job.run.version},
                )
            return
        await self._discard(job, ShuttingDownError("request cancelled"))
        logger.warning(
            "ingest cancelled (server shutting down); the run was aborted and the previous version kept",
            extra={"file_id": job.file_id, "collection_name": job.collection_name, "ingest_version": job.run.version},
        )

    def abort_all(self) -> int:
        """Abort every running ingest (shutdown); returns how many there were."""
        for control in self._active:
            control.abort(ShuttingDownError("service shutting down"))
        return len(self._active)

    async def wait_idle(self, timeout_seconds: float) -> bool:
        """Wait until no ingest runs, at most ``timeout_seconds``; False if some still run."""
        with anyio.move_on_after(timeout_seconds):
            while self._active:
                await anyio.sleep(0.05)
        return not self._active

    async def _labels_now(self, job: IngestJob, requested: DocumentLabels) -> dict[str, Any]:
        """The labels to publish with: the request's, else the stored version's as they are NOW.

        A PATCH during the run changed the stored version (and the points this run had written by
        then); reading it again at commit keeps the published version's labels whole and current.
        """
        labels = requested.filled_from(await self.index.head(job.file_id, job.collection_name))
        return {MetaKey.TAGS: labels.tags, MetaKey.CATEGORY: labels.category, MetaKey.ATTRIBUTES: labels.attributes}

    async def _stored_head(self, job: IngestJob) -> dict[str, Any] | None:
        try:
            return await self.index.head(job.file_id, job.collection_name)
        except ContractError as exc:
            raise QdrantWriteError(f"reading the stored version failed: {exc}") from exc

    async def _identical_copy(self, job: IngestJob, source_hash: str, fingerprint: str) -> str | None:
        try:
            return await self.index.identical_copy(job.file_id, source_hash, fingerprint, exclude=job.collection_name)
        except ContractError as exc:
            raise QdrantWriteError(f"looking for an identical copy failed: {exc}") from exc

    async def _kept(self, job: IngestJob, existing: int, engine: str) -> IngestOutcome:
        """``overwrite=false`` over a stored version: the answer describes that version, not the caller's file."""
        stored = await self._stored_head(job) or {}
        source_hash = stored.get(MetaKey.SOURCE_HASH)
        return IngestOutcome(
            chunks_count=existing,
            engine=str(stored.get(EXTRACTOR_KEY) or engine),
            kept_existing=True,
            live_version=str(stored.get(MetaKey.INGEST_VERSION) or "") or None,
            stored_hash=source_hash if isinstance(source_hash, str) else None,
        )

    async def _unchanged(self, job: IngestJob, stored: dict[str, Any]) -> IngestOutcome | None:
        """Same bytes, same settings: the live version is adopted as this run's, its differing metadata
        updated in place (``versioning.adopt``). None when that version was replaced meanwhile."""
        changes = {key: value for key, value in job.document_meta().items() if stored.get(key) != value}
        live_version = str(stored.get(MetaKey.INGEST_VERSION) or "")
        try:
            adopted = await versioning.adopt(
                self.index, job.file_id, job.collection_name, job.run, live_version=live_version, meta=changes
            )
        except ContractError as exc:
            raise QdrantWriteError(f"adopting the stored version failed: {exc}") from exc
        if not adopted:
            return None
        chunks = stored.get(MetaKey.CHUNK_COUNT)
        if not isinstance(chunks, int):
            chunks = await self._existing(job)
        if self.metrics is not None:
            self.metrics.ingest_unchanged.inc()
        return IngestOutcome(
            chunks_count=chunks,
            engine=str(stored.get(EXTRACTOR_KEY) or job.engine or self.default_engine),
            unchanged=True,
            live_version=live_version or None,
        )

    async def _copy(
        self,
        job: IngestJob,
        twin: str,
        control: RunControl,
        limiter: anyio.CapacityLimiter | None,
        requested: DocumentLabels,
    ) -> IngestOutcome:
        """The file's points from tenant ``twin``, re-labelled for this tenant and committed as this run's version."""
        try:
            records = await self.index.read_version(job.file_id, twin)
            if not records:
                # The twin was replaced or deleted since it was found: embed as usual.
                return await self._ingest(job, control, limiter, job.engine or self.default_engine, requested)
            now = datetime.now(UTC).isoformat()
            points = await anyio.to_thread.run_sync(
                lambda: [copied_point(record, job, indexed_at=now) for record in records]
            )
            for start in range(0, len(points), COPY_BATCH_SIZE):
                control.check()
                await self.index.write(points[start : start + COPY_BATCH_SIZE])
            control.check()
            labels = await self._labels_now(job, requested)
            control.commit_started = True
            committed = await versioning.commit(
                self.index, job.file_id, job.collection_name, job.run, meta=labels, written=len(points)
            )
        except Exception as exc:
            error = classify(exc)
            await self._discard(job, error)
            if error is exc:
                raise
            raise error from exc
        if self.metrics is not None:
            self.metrics.ingest_reused.inc()
        engine = str((records[0].payload.get("meta") or {}).get(EXTRACTOR_KEY) or self.default_engine)
        return IngestOutcome(
            chunks_count=len(points), engine=engine, superseded=committed.superseded, reused_vectors=True
        )

    async def _existing(self, job: IngestJob) -> int:
        try:
            return await self.index.count(job.file_id, job.collection_name)
        except ContractError as exc:
            raise QdrantWriteError(f"reading existing chunks failed: {exc}") from exc

    async def _discard(self, job: IngestJob, error: IngestionError) -> None:
        try:
            # Shielded: a cancelled request (client gone) must still remove its pending points.
            with anyio.CancelScope(shield=True):
                await versioning.discard(self.index, job.file_id, job.collection_name, job.run)
        except Exception:
            # Loud, counted and reported to the caller; the pending points stay invisible to
            # readers and are removed by the next ingest of this file or by start-up recovery.
            logger.exception(
                "cleanup of a failed ingest run failed; its pending chunks remain until the next ingest or restart",
                extra={
                    "file_id": job.file_id,
                    "collection_name": job.collection_name,
                    "ingest_version": job.run.version,
                },
            )
            error.cleanup_failed = True
            if self.metrics is not None:
                self.metrics.cleanup_failures.inc()

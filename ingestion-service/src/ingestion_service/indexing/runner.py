"""The per-request runner: the pipeline for one job in a worker thread, and the versioning protocol around it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.to_thread
from haystack import Pipeline
from haystack.core.errors import PipelineRuntimeError

from ingestion_service import run_control
from ingestion_service.adapters.chunk_index import ChunkIndex
from ingestion_service.documents.front_matter import FRONT_MATTER_ERROR_KEY
from ingestion_service.errors import (
    EmbeddingFailedError,
    ExtractionError,
    IngestionError,
    NoExtractableTextError,
    OriginalStoreError,
    PipelineFailedError,
    QdrantWriteError,
    ShuttingDownError,
    SparseEmbeddingFailedError,
)
from ingestion_service.indexing import versioning
from ingestion_service.indexing.heap import release_free_heap
from ingestion_service.indexing.job import (
    DocumentLabels,
    IngestJob,
    IngestOutcome,
    front_matter_labels,
    publish_labels,
)
from ingestion_service.indexing.originals import Originals
from ingestion_service.metrics import IngestMetrics
from ingestion_service.pipeline.components.file_converter import EXTRACTOR_KEY
from ingestion_service.run_control import RunControl
from rag_runtime.embedding import SparseVectorData
from rag_runtime.store import ChunkPoint, PointRecord, point_id_for
from rag_runtime.store.points import PAYLOAD_ID
from shared_contract import (
    DENSE_VECTOR,
    MULTILINGUAL_VECTOR,
    PAYLOAD_META,
    SPARSE_VECTOR,
    ContractError,
    EmbeddingError,
    MetaKey,
    SparseEmbeddingError,
)
from shared_contract.schema import chunk_id

logger = logging.getLogger(__name__)
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
        originals: Originals | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.originals = originals
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
        # The stored front matter is the file's own when the bytes turn out unchanged.
        job = replace(job, labels=publish_labels(requested, front_matter_labels(stored), stored))
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
                if FRONT_MATTER_ERROR_KEY in chunks[0].meta and self.metrics is not None:
                    self.metrics.ingest_front_matter_unread.inc()
            if self.before_commit is not None:
                await anyio.to_thread.run_sync(self.before_commit, job)
            kept = await self._keep_original(job)
            # Last chance to stop: an aborted or late run never publishes.
            control.check()
            try:
                labels = await self._labels_now(job, requested, chunks[0].meta if chunks else None)
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
        await self._settle_original(job, keep=kept and not committed.superseded)
        return IngestOutcome(chunks_count=written, engine=engine, superseded=committed.superseded)

    async def _run_worker(
        self, job: IngestJob, control: RunControl, limiter: anyio.CapacityLimiter | None
    ) -> dict[str, Any]:
        inputs: dict[str, Any] = {"source": job.source, "meta": job.meta(), "engine": job.engine}
        if job.extracted is not None:
            inputs["extracted"] = list(job.extracted)

        def run_pipeline() -> dict[str, Any]:
            try:
                result: dict[str, Any] = self.pipeline.run({"converter": inputs}, include_outputs_from={"finalizer"})
            finally:
                # What extraction and embedding freed goes back to the system, not kept at the peak.
                release_free_heap()
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

    async def _labels_now(
        self, job: IngestJob, requested: DocumentLabels, chunk_meta: dict[str, Any] | None
    ) -> dict[str, Any]:
        """The labels to publish with: the request's, else the file's front matter's (``chunk_meta``:
        a written chunk's), else the stored version's as they are NOW (``publish_labels``).

        A PATCH during the run changed the stored version (and the points this run had written by
        then); reading it again at commit keeps the published version's labels whole and current.
        """
        stored = await self.index.head(job.file_id, job.collection_name)
        labels = publish_labels(requested, front_matter_labels(chunk_meta), stored)
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
        # A version stored before originals were kept gets its original now.
        await self._settle_original(job, keep=True)
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
            kept = await self._keep_original(job)
            control.check()
            labels = await self._labels_now(job, requested, records[0].payload.get(PAYLOAD_META))
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
        await self._settle_original(job, keep=kept and not committed.superseded)
        if self.metrics is not None:
            self.metrics.ingest_reused.inc()
        engine = str((records[0].payload.get("meta") or {}).get(EXTRACTOR_KEY) or self.default_engine)
        return IngestOutcome(
            chunks_count=len(points), engine=engine, superseded=committed.superseded, reused_vectors=True
        )

    async def _keep_original(self, job: IngestJob) -> bool:
        """Before a commit: the run's original stored, False when it is not kept (ORIGINAL_STORE_FAILED
        fails the run, which keeps the previous version)."""
        return self.originals is not None and await self.originals.keep(job)

    async def _settle_original(self, job: IngestJob, *, keep: bool) -> None:
        """After a commit (``keep``: the run's original kept again if a concurrent run removed it) or a
        failed run: the live version's original, no other.

        The outcome is decided by now, so a failing store is logged, not reported; the file's next
        ingest or delete settles its originals again.
        """
        if self.originals is None:
            return
        try:
            if keep:
                await self.originals.keep(job)
            await self.originals.settle(job.collection_name, job.file_id)
        except (OriginalStoreError, ContractError):
            logger.exception(
                "settling the originals after a commit failed; the file's next ingest or delete settles them",
                extra={"file_id": job.file_id, "collection_name": job.collection_name},
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
                await self._settle_original(job, keep=False)
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

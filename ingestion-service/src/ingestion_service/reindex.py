"""Reindex jobs: rebuild every document of one collection (tenant) from its source, in the background.

After a change of extraction or chunking settings, or of the embedding model, a knowledge base is
rebuilt without anyone uploading files again. A job lists the tenant's committed documents (their
heads, ``split_id`` 0), then re-ingests them one after another through the ordinary runner
(blue/green versions, INGEST_CONCURRENCY, INGEST_TIMEOUT_SECONDS). One document at a time, so a
reindex holds at most one pipeline slot and uploads and searches go on beside it.

Where a document's source comes from:

* stored with ``s3_bucket``/``s3_key``: the object is read from S3 again (changed bytes are taken
  as they are now; a deleted object fails that document only);
* otherwise (uploads, whose bytes were never kept): the extracted text, rebuilt from the committed
  chunks, is re-chunked and re-embedded under the stored source identity.

``source_index``: the QDRANT_INDEX the tenant lived in before (an embedding-model change needs a
new index). Documents and chunk text are then read from that collection and written into this
service's own; S3 sources still come from S3.

States: ``queued`` (until the service is ready) -> ``running`` -> ``succeeded`` once every document
was tried (documents that failed are counted and listed in ``failures``), ``failed`` when the job
itself could not go on (the collection could not be read, the source index is gone), or
``cancelled`` (DELETE; the document being indexed keeps its previous version). One unfinished job
per collection at a time.

Resumable: a job is a JSON file in INGEST_STATE_DIR, replaced atomically at every change of state
and after documents (at most once a second). Documents go in ``file_id`` order and the file records
the last one finished, so a job stopped by a shutdown or a crash resumes at the next start-up right
after it. The document that was running then is done again (its run was aborted, its previous
version kept); a document done twice costs little anyway: the runner answers ``unchanged`` for
bytes already built under the same settings.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
from pydantic import BaseModel, Field, ValidationError
from qdrant_client import models

from ingestion_service.adapters.chunk_index import ChunkIndex
from ingestion_service.adapters.document_catalog import DocumentCatalog
from ingestion_service.documents import SourceFile
from ingestion_service.errors import (
    IngestAbortedError,
    IngestionError,
    JobCancelledError,
    NotReadyError,
    PipelineFailedError,
    ReindexJobNotFoundError,
    ReindexRunningError,
    ShuttingDownError,
    SourceIndexNotFoundError,
)
from ingestion_service.intake import (
    check_bucket,
    fetch_from_s3,
    identify_source,
    make_workdir,
    prepare_source,
    ready_runner,
    remove_workdir,
    upload_path,
)
from ingestion_service.jobs import ReindexState
from ingestion_service.pipeline.fingerprint import ingest_fingerprint
from ingestion_service.pipeline.indexing import DocumentLabels, IndexingRunner, IngestJob, SourceIdentity
from ingestion_service.pipeline.versioning import RunVersion
from ingestion_service.run_control import RunControl
from ingestion_service.runtime import ABORT_WAIT_SECONDS, ServiceRuntime
from rag_runtime.store import (
    ChunkStore,
    PointRecord,
    close_store,
    match,
    open_store,
    pending_condition,
    scroll_pages,
    tenant_condition,
)
from shared_contract import PAYLOAD_META, ContractError, MetaKey, meta_path

logger = logging.getLogger(__name__)

FINAL_STATES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
DocumentOutcome = Literal["reingested", "unchanged", "failed", "skipped"]

# Failed documents listed by file_id in a job (all are counted in ``failed``).
MAX_LISTED_FAILURES = 100
# Finished jobs kept readable (and their state files); the oldest go first.
KEEP_FINISHED_JOBS = 100
# Progress reaches the state file at most this often; state changes are written at once.
SAVE_INTERVAL_SECONDS = 1.0
# A resumed job waits for the collection and the pipeline, polling this often.
READY_POLL_SECONDS = 1.0
STATE_FORMAT = 1
STATE_SUBDIR = "reindex"
_PAGE = 1024
READ_FAILED = "Reading the collection failed (check that Qdrant is up); start the reindex again."


class DocumentFailure(BaseModel):
    """One document a job could not re-ingest (it keeps its previous version)."""

    file_id: str
    name: str | None
    code: str
    error: str


class CurrentDocument(BaseModel):
    """The document a running job is indexing."""

    file_id: str
    name: str | None


class JobFailure(BaseModel):
    """Why a job ended ``failed``."""

    code: str
    error: str


class ReindexRecord(BaseModel):
    """A reindex job, as its state file holds it; readers get copies."""

    format: int = STATE_FORMAT
    job_id: str
    collection_name: str
    # The QDRANT_INDEX the job writes into: a state file of another index is never resumed here.
    target_index: str
    source_index: str | None
    force: bool
    state: ReindexState
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    # None until the documents are listed; done = reingested + unchanged + failed + skipped.
    total: int | None = None
    done: int = 0
    reingested: int = 0
    unchanged: int = 0
    failed: int = 0
    # Listed, then deleted before their turn.
    skipped: int = 0
    failures: list[DocumentFailure] = Field(default_factory=lambda: list[DocumentFailure]())
    current: CurrentDocument | None = None
    # The last file_id finished (documents go in file_id order): a resumed job starts after it.
    cursor: str | None = None
    error: JobFailure | None = None

    @property
    def finished(self) -> bool:
        """Whether the job reached a final state."""
        return self.state in FINAL_STATES


@dataclass(eq=False)
class _Job:
    """A record and the task that runs it; touched only on the event loop."""

    record: ReindexRecord
    # Cancelled by DELETE (``cancel_requested``) and by the shutdown (the job then resumes).
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    # The current document's run, aborted with the scope: a run past its last await (held before
    # its commit) would otherwise commit before the cancellation reaches it.
    control: RunControl | None = None
    task: asyncio.Task[None] | None = None
    cancel_requested: bool = False
    saved_at: float = float("-inf")
    save_failed: bool = False


def _meta(record: PointRecord) -> dict[str, Any]:
    meta = record.payload.get(PAYLOAD_META)
    return meta if isinstance(meta, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def document_ids(store: ChunkStore, collection_name: str) -> list[str]:
    """The file_ids of the tenant's committed documents, in the order a job takes them."""
    selector = models.Filter(
        must=[tenant_condition([collection_name]), match(MetaKey.SPLIT_ID, 0)], must_not=[pending_condition()]
    )
    found: set[str] = set()
    async for page in scroll_pages(store, selector, page_size=_PAGE, with_payload=[meta_path(MetaKey.FILE_ID)]):
        for record in page:
            file_id = _meta(record).get(MetaKey.FILE_ID)
            if isinstance(file_id, str):
                found.add(file_id)
    return sorted(found)


def _stored_identity(head: dict[str, Any]) -> SourceIdentity | None:
    """The stored source's identity; None for data from before contract 2.1 (re-embedded by every reindex)."""
    sha256 = _text(head.get(MetaKey.SOURCE_HASH))
    if sha256 is None:
        return None
    return SourceIdentity(
        sha256=sha256,
        size=_int(head.get(MetaKey.SOURCE_BYTES)) or 0,
        format=_text(head.get(MetaKey.FORMAT)) or "unknown",
    )


def _s3_origin(head: dict[str, Any]) -> tuple[str, str] | None:
    bucket, key = _text(head.get(MetaKey.S3_BUCKET)), _text(head.get(MetaKey.S3_KEY))
    return (bucket, key) if bucket is not None and key is not None else None


def _write_atomically(path: Path, text: str) -> None:
    """Temp file, fsync, rename: a reader (or a restart after a crash) sees the old file or the new one."""
    # Private: the files name collections and documents.
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    staging = path.with_name(f".{path.name}.tmp")
    with staging.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staging, path)


def _remove_files(paths: Sequence[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


class ReindexManager:
    """The process's reindex jobs: started by the API, resumed at start-up, stopped at shutdown."""

    def __init__(self, runtime: ServiceRuntime) -> None:
        self._runtime = runtime
        self._settings = runtime.settings
        self._dir = runtime.settings.ingest_state_dir / STATE_SUBDIR
        self._jobs: dict[str, _Job] = {}
        self._closing = False

    # -- the API ----------------------------------------------------------------------------

    async def start(self, collection_name: str, *, source_index: str | None, force: bool) -> ReindexRecord:
        """Create a job and start it; 503 when not ready, 404 for an unknown source index, 409 when one runs."""
        if self._closing:
            raise ShuttingDownError("service shutting down")
        await ready_runner(self._runtime)
        if source_index == self._settings.qdrant_index:
            source_index = None
        if source_index is not None:
            await self._check_source(source_index)
        # After the awaits, with no await up to the registration: two requests cannot both pass.
        if self._closing:
            raise ShuttingDownError("service shutting down")
        running = next(
            (
                job
                for job in self._jobs.values()
                if job.record.collection_name == collection_name and not job.record.finished
            ),
            None,
        )
        if running is not None:
            raise ReindexRunningError(running.record.job_id)
        record = ReindexRecord(
            job_id=uuid.uuid4().hex,
            collection_name=collection_name,
            target_index=self._settings.qdrant_index,
            source_index=source_index,
            force=force,
            state="queued",
            created_at=datetime.now(UTC),
        )
        job = _Job(record)
        self._jobs[record.job_id] = job
        self._launch(job)
        logger.info(
            "reindex job %s queued for collection %s",
            record.job_id,
            collection_name,
            extra={"job_id": record.job_id, "collection_name": collection_name, "source_index": source_index},
        )
        return record.model_copy(deep=True)

    def get(self, job_id: str) -> ReindexRecord:
        """A copy of the job (REINDEX_JOB_NOT_FOUND when unknown)."""
        return self._find(job_id).record.model_copy(deep=True)

    def cancel(self, job_id: str) -> tuple[ReindexRecord, bool]:
        """Ask an unfinished job to stop (it ends ``cancelled``); False when it had already finished."""
        job = self._find(job_id)
        if job.record.finished:
            return job.record.model_copy(deep=True), False
        job.cancel_requested = True
        self._stop(job, JobCancelledError("reindex cancelled with DELETE"))
        return job.record.model_copy(deep=True), True

    def _find(self, job_id: str) -> _Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise ReindexJobNotFoundError(f"no reindex job {job_id!r}")
        return job

    async def _check_source(self, source_index: str) -> None:
        store = self._open_source(source_index)
        try:
            exists = await store.collection_exists()
        except ContractError as exc:
            raise PipelineFailedError(f"checking source_index {source_index!r} failed: {exc}") from exc
        finally:
            await close_store(store)
        if not exists:
            raise SourceIndexNotFoundError(f"no collection {source_index!r}")

    def _open_source(self, source_index: str) -> ChunkStore:
        # Only payloads are read from there, so its manifest (another embedding model) is not checked.
        return open_store(self._settings.model_copy(update={"qdrant_index": source_index}))

    # -- start-up and shutdown --------------------------------------------------------------

    async def resume(self) -> int:
        """Load this index's state files; unfinished jobs start again (each waits until the service is ready)."""
        records = await anyio.to_thread.run_sync(self._load)
        resumed = 0
        for record in records:
            if record.job_id in self._jobs:
                continue
            job = _Job(record)
            self._jobs[record.job_id] = job
            if not record.finished:
                self._launch(job)
                resumed += 1
                logger.info(
                    "reindex job %s resumes after %d of its documents",
                    record.job_id,
                    record.done,
                    extra={"job_id": record.job_id, "collection_name": record.collection_name},
                )
        await self._prune()
        return resumed

    def _load(self) -> list[ReindexRecord]:
        try:
            paths = sorted(self._dir.iterdir()) if self._dir.is_dir() else []
        except OSError as exc:
            # The service still starts; only earlier jobs are neither shown nor resumed.
            logger.error("reading the reindex state directory %s failed (check INGEST_STATE_DIR): %s", self._dir, exc)
            return []
        records: list[ReindexRecord] = []
        for path in paths:
            if path.name.startswith(".") and path.name.endswith(".tmp"):
                with suppress(OSError):
                    path.unlink(missing_ok=True)  # a write a crash interrupted; the file before it is whole
                continue
            if path.suffix != ".json":
                continue
            try:
                record = ReindexRecord.model_validate_json(path.read_bytes())
            except (OSError, ValidationError) as exc:
                logger.warning("reindex state file %s is unreadable and was skipped: %s", path, exc)
                continue
            if record.target_index == self._settings.qdrant_index:
                records.append(record)
        return records

    def stop(self) -> None:
        """Refuse new jobs and interrupt unfinished ones; their state stays unfinished, so they resume."""
        self._closing = True
        for job in self._jobs.values():
            if not job.record.finished:
                self._stop(job, ShuttingDownError("service shutting down"))

    async def wait_stopped(self, timeout_seconds: float = ABORT_WAIT_SECONDS) -> bool:
        """Wait until the interrupted jobs' tasks ended (their runs aborted, progress saved); False on timeout."""
        tasks = {job.task for job in self._jobs.values() if job.task is not None and not job.task.done()}
        if not tasks:
            return True
        _, pending = await asyncio.wait(tasks, timeout=timeout_seconds)
        if pending:
            logger.warning("%d reindex jobs still stopping at shutdown; they resume at the next start", len(pending))
        return not pending

    async def shutdown(self) -> None:
        """``stop`` and ``wait_stopped``: the lifespan's exit, before the runtime closes the store."""
        self.stop()
        await self.wait_stopped()

    @staticmethod
    def _stop(job: _Job, reason: IngestAbortedError) -> None:
        if job.control is not None:
            job.control.abort(reason)
        job.scope.cancel()

    # -- a job's life -----------------------------------------------------------------------

    def _launch(self, job: _Job) -> None:
        job.task = asyncio.create_task(self._run(job), name=f"reindex-{job.record.job_id}")

    async def _run(self, job: _Job) -> None:
        record = job.record
        extra = {"job_id": record.job_id, "collection_name": record.collection_name}
        failure: JobFailure | None = None
        completed = False
        try:
            with job.scope:
                await self._execute(job)
                completed = True
        except IngestAbortedError:
            pass  # the document's run was aborted by DELETE or the shutdown: decided below, as for the scope
        except IngestionError as exc:
            failure = JobFailure(code=exc.code, error=exc.detail())
            logger.warning("reindex job %s failed: %s: %s", record.job_id, exc.code, exc, extra=extra)
        except ContractError as exc:
            failure = JobFailure(code=PipelineFailedError.code, error=READ_FAILED)
            logger.error(
                "reindex job %s failed: reading the collection failed", record.job_id, extra=extra, exc_info=exc
            )
        except Exception as exc:  # a fault of the job itself: recorded in the job and logged with its traceback
            failure = JobFailure(code=PipelineFailedError.code, error=PipelineFailedError.public_message)
            logger.error("reindex job %s failed", record.job_id, extra=extra, exc_info=exc)
        with anyio.CancelScope(shield=True):
            if completed:
                await self._finish(job, "succeeded")
            elif failure is not None:
                await self._finish(job, "failed", failure)
            elif job.cancel_requested:
                await self._finish(job, "cancelled")
            else:
                # Interrupted by the shutdown: the file stays queued or running and the next start resumes it.
                record.current = None
                await self._save(job, force=True)
                logger.info(
                    "reindex job %s interrupted by the shutdown; it resumes at the next start",
                    record.job_id,
                    extra=extra,
                )

    async def _execute(self, job: _Job) -> None:
        record = job.record
        await self._save(job, force=True)
        runner = await self._wait_ready()
        record.state = "running"
        record.started_at = record.started_at or datetime.now(UTC)
        await self._save(job, force=True)
        async with self._source(record.source_index) as source:
            file_ids = await document_ids(source, record.collection_name)
            remaining = [file_id for file_id in file_ids if record.cursor is None or file_id > record.cursor]
            record.total = record.done + len(remaining)
            await self._save(job, force=True)
            fingerprint = ingest_fingerprint(self._settings, self._settings.extraction_engine)
            for file_id in remaining:
                outcome, failure = await self._document(job, runner, source, file_id, fingerprint)
                self._count(record, file_id, outcome, failure)
                await self._save(job)

    async def _wait_ready(self) -> IndexingRunner:
        # A resumed job starts with the app, before the collection is bootstrapped and the models are warm.
        while True:
            try:
                return await ready_runner(self._runtime)
            except NotReadyError:
                await anyio.sleep(READY_POLL_SECONDS)

    @asynccontextmanager
    async def _source(self, source_index: str | None) -> AsyncIterator[ChunkStore]:
        if source_index is None:
            yield self._runtime.store
            return
        store = self._open_source(source_index)
        try:
            if not await store.collection_exists():
                raise SourceIndexNotFoundError(f"no collection {source_index!r}")
            yield store
        finally:
            with anyio.CancelScope(shield=True):
                await close_store(store)

    async def _document(
        self, job: _Job, runner: IndexingRunner, source: ChunkStore, file_id: str, fingerprint: str
    ) -> tuple[DocumentOutcome, DocumentFailure | None]:
        """Re-ingest one document; its own failure is returned, a failure to read the collection raised."""
        record = job.record
        head = await ChunkIndex(source).head(file_id, record.collection_name)
        if head is None:
            return "skipped", None
        name = _text(head.get(MetaKey.NAME)) or _text(head.get(MetaKey.SOURCE)) or file_id
        record.current = CurrentDocument(file_id=file_id, name=name)
        if await self._already_built(record, head, file_id, fingerprint):
            return "unchanged", None
        workdir = await make_workdir(self._runtime)
        try:
            ingest = await self._ingest_job(record, source, head, file_id, name, workdir, fingerprint)
            job.control = runner.new_control()
            if job.scope.cancel_called:  # stopped since the last await: this run must not commit either
                job.control.abort(
                    JobCancelledError("reindex cancelled")
                    if job.cancel_requested
                    else ShuttingDownError("shutting down")
                )
            outcome = await runner.ingest(ingest, limiter=self._runtime.limiter, control=job.control)
        except IngestAbortedError:
            raise  # not the document's failure: the job was stopped (a resumed job does it again)
        except IngestionError as exc:
            logger.warning(
                "reindex job %s: document %s failed: %s: %s",
                record.job_id,
                file_id,
                exc.code,
                exc,
                extra={"job_id": record.job_id, "file_id": file_id, "collection_name": record.collection_name},
            )
            return "failed", DocumentFailure(file_id=file_id, name=name, code=exc.code, error=exc.detail())
        except ContractError:
            raise
        except Exception as exc:  # a fault on one document: the others go on; logged with its traceback
            logger.error("reindex job %s: document %s failed", record.job_id, file_id, exc_info=exc)
            failure = DocumentFailure(
                file_id=file_id, name=name, code=PipelineFailedError.code, error=PipelineFailedError.public_message
            )
            return "failed", failure
        finally:
            await remove_workdir(self._runtime, workdir)
        # Superseded (an upload of the file won meanwhile) counts as reingested: it is built under these settings.
        return ("unchanged" if outcome.unchanged else "reingested"), None

    async def _already_built(self, record: ReindexRecord, head: dict[str, Any], file_id: str, fingerprint: str) -> bool:
        """A text-sourced document this index already holds under these settings (the runner would say unchanged).

        Answered from the heads, so an unchanged document costs no chunk reads; an S3 document is
        read again whatever its fingerprint, since its object may have changed.
        """
        if record.force or _s3_origin(head) is not None:
            return False
        source_hash = _text(head.get(MetaKey.SOURCE_HASH))
        if source_hash is None:
            return False
        target = (
            head if record.source_index is None else await self._runtime.index.head(file_id, record.collection_name)
        )
        return (
            target is not None
            and target.get(MetaKey.SOURCE_HASH) == source_hash
            and target.get(MetaKey.INGEST_FINGERPRINT) == fingerprint
        )

    async def _ingest_job(
        self,
        record: ReindexRecord,
        source: ChunkStore,
        head: dict[str, Any],
        file_id: str,
        name: str,
        workdir: Path,
        fingerprint: str,
    ) -> IngestJob:
        runtime = self._runtime
        origin = _s3_origin(head)
        identity: SourceIdentity | None
        if origin is not None:
            bucket, key = origin
            check_bucket(runtime.settings, bucket)
            path = upload_path(workdir, name)
            object_head = await fetch_from_s3(runtime, bucket, key, path)
            staged = await prepare_source(runtime, path, name)
            identity = await identify_source(staged, s3_bucket=bucket, s3_key=key, s3_etag=object_head.etag)
        else:
            # An upload's bytes were never kept: this re-chunks and re-embeds the EXTRACTED TEXT
            # (rebuilt from the committed chunks), not the original file, so page numbers and the
            # first engine's metadata do not carry over. The identity stays the stored one, so a
            # later upload or sync of the same original file still counts as unchanged.
            stored = await DocumentCatalog(source).read_text(file_id, record.collection_name)
            text = stored.text if stored is not None else ""
            path = workdir / "source.md"
            await anyio.to_thread.run_sync(lambda: path.write_text(text, encoding="utf-8"))
            staged = SourceFile(path=path, filename=name, media_type="text/markdown")
            identity = _stored_identity(head)
        return IngestJob(
            source=staged,
            file_id=file_id,
            collection_name=record.collection_name,
            collection_type=_text(head.get(MetaKey.COLLECTION_TYPE)) or "file",
            user_id=_text(head.get(MetaKey.USER_ID)) or "",
            overwrite=True,
            # Taken as the document starts: an upload of the same file after that wins, as for any ingest.
            run=RunVersion.new(),
            identity=identity,
            labels=DocumentLabels().filled_from(head),
            fingerprint=fingerprint,
            force=record.force,
        )

    def _count(
        self, record: ReindexRecord, file_id: str, outcome: DocumentOutcome, failure: DocumentFailure | None
    ) -> None:
        record.done += 1
        record.cursor = file_id
        record.current = None
        if outcome == "reingested":
            record.reingested += 1
        elif outcome == "unchanged":
            record.unchanged += 1
        elif outcome == "skipped":
            record.skipped += 1
        else:
            record.failed += 1
            if failure is not None and len(record.failures) < MAX_LISTED_FAILURES:
                record.failures.append(failure)
        self._runtime.metrics.reindex_documents.labels(outcome=outcome).inc()

    async def _finish(self, job: _Job, state: ReindexState, failure: JobFailure | None = None) -> None:
        record = job.record
        record.state, record.error, record.current = state, failure, None
        record.finished_at = datetime.now(UTC)
        await self._save(job, force=True)
        logger.info(
            "reindex job %s %s: %d of %s documents, %d reingested, %d unchanged, %d failed",
            record.job_id,
            state,
            record.done,
            record.total,
            record.reingested,
            record.unchanged,
            record.failed,
            extra={"job_id": record.job_id, "collection_name": record.collection_name, "state": state},
        )
        await self._prune()

    # -- the state files --------------------------------------------------------------------

    async def _save(self, job: _Job, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - job.saved_at < SAVE_INTERVAL_SECONDS:
            return
        job.saved_at = now
        # Serialized on the event loop, the only place the record changes: the file is one consistent state.
        text = job.record.model_dump_json(indent=2)
        path = self._dir / f"{job.record.job_id}.json"
        try:
            await anyio.to_thread.run_sync(_write_atomically, path, text)
        except OSError as exc:
            # The job goes on; it only cannot resume after a restart. Said once per job.
            if not job.save_failed:
                logger.error(
                    "reindex job %s: saving its state to %s failed (check INGEST_STATE_DIR); "
                    "it runs on but cannot resume after a restart: %s",
                    job.record.job_id,
                    path,
                    exc,
                    extra={"job_id": job.record.job_id},
                )
            job.save_failed = True
        else:
            job.save_failed = False

    async def _prune(self) -> None:
        finished = sorted(
            (job for job in self._jobs.values() if job.record.finished),
            key=lambda job: job.record.finished_at or job.record.created_at,
        )
        dropped = finished[: max(0, len(finished) - KEEP_FINISHED_JOBS)]
        for job in dropped:
            del self._jobs[job.record.job_id]
        if dropped:
            paths = [self._dir / f"{job.record.job_id}.json" for job in dropped]
            try:
                await anyio.to_thread.run_sync(_remove_files, paths)
            except OSError as exc:
                logger.warning("removing finished reindex state files failed: %s", exc)

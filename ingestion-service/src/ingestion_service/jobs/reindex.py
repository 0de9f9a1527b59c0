"""Reindex jobs: rebuild every document of one collection (tenant) from its source, in the background.

After a change of extraction or chunking settings, or of the embedding model, a knowledge base is
rebuilt without anyone uploading files again. A job lists the tenant's committed documents (their
heads, ``split_id`` 0), then re-ingests them one after another through the ordinary runner
(blue/green versions, INGEST_CONCURRENCY, INGEST_TIMEOUT_SECONDS). One document at a time, so a
reindex holds at most one pipeline slot and uploads and searches go on beside it.

Where a document's source comes from (S3 again, or its stored text): ``jobs.reindex_sources``.

``source_index``: the QDRANT_INDEX the tenant lived in before (an embedding-model change needs a
new index). Documents and chunk text are then read from that collection and written into this
service's own; S3 sources still come from S3.

States: ``queued`` (until the service is ready) -> ``running`` -> ``succeeded`` once every document
was tried (documents that failed are counted and listed in ``failures``), ``failed`` when the job
itself could not go on (the collection could not be read, the source index is gone), or
``cancelled`` (DELETE; the document being indexed keeps its previous version). One unfinished job
per collection at a time.

Resumable: a job is a JSON file in INGEST_STATE_DIR (``jobs.reindex_state``), replaced atomically at
every change of state and after documents (at most once a second). Documents go in ``file_id`` order and the file records
the last one finished, so a job stopped by a shutdown or a crash resumes at the next start-up right
after it. The document that was running then is done again (its run was aborted, its previous
version kept); a document done twice costs little anyway: the runner answers ``unchanged`` for
bytes already built under the same settings.

The job runs on the engine of every background job (``jobs.engine``).
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime

import anyio
import anyio.to_thread

from ingestion_service.adapters.chunk_index import ChunkIndex
from ingestion_service.errors import (
    IngestAbortedError,
    IngestionError,
    JobCancelledError,
    PipelineFailedError,
    ReindexJobNotFoundError,
    ReindexRunningError,
    ShuttingDownError,
)
from ingestion_service.indexing.fingerprint import ingest_fingerprint
from ingestion_service.indexing.runner import IndexingRunner
from ingestion_service.intake.handoff import ready_runner, wait_for_runner
from ingestion_service.intake.staging import make_workdir, remove_workdir
from ingestion_service.jobs.engine import JobEngine, JobRun
from ingestion_service.jobs.reindex_sources import (
    already_built,
    check_source_index,
    document_ids,
    document_name,
    ingest_job_for,
    source_store,
)
from ingestion_service.jobs.reindex_state import (
    STATE_SUBDIR,
    CurrentDocument,
    DocumentFailure,
    DocumentOutcome,
    JobFailure,
    ReindexRecord,
    ReindexState,
    StateFiles,
)
from ingestion_service.runtime import ABORT_WAIT_SECONDS, ServiceRuntime
from rag_runtime.store import ChunkStore
from shared_contract import ContractError

logger = logging.getLogger(__name__)

# Finished jobs kept readable (and their state files); the oldest go first.
KEEP_FINISHED_JOBS = 100
# Progress reaches the state file at most this often; state changes are written at once.
SAVE_INTERVAL_SECONDS = 1.0
# A resumed job waits for the collection and the pipeline, polling this often.
READ_FAILED = "Reading the collection failed (check that Qdrant is up); start the reindex again."


class _Job(JobRun):
    """A record and the task that runs it; touched only on the event loop.

    Stopped by DELETE (``cancel_requested``) and by the shutdown (the job then resumes): the scope is
    cancelled and the current document's run aborted with it, since a run past its last await (held
    before its commit) would otherwise commit before the cancellation reaches it.
    """

    def __init__(self, record: ReindexRecord) -> None:
        super().__init__(record.job_id)
        self.record = record
        self.cancel_requested = False
        self.saved_at = float("-inf")
        self.save_failed = False


class ReindexManager:
    """The process's reindex jobs: started by the API, resumed at start-up, stopped at shutdown."""

    def __init__(self, runtime: ServiceRuntime) -> None:
        self._runtime = runtime
        self._settings = runtime.settings
        self._files = StateFiles(runtime.settings.ingest_state_dir / STATE_SUBDIR, ReindexRecord)
        self._jobs: dict[str, _Job] = {}
        self._engine: JobEngine[_Job] = JobEngine("reindex")

    # -- the API ----------------------------------------------------------------------------

    async def start(self, collection_name: str, *, source_index: str | None, force: bool) -> ReindexRecord:
        """Create a job and start it; 503 when not ready, 404 for an unknown source index, 409 when one runs."""
        self._engine.refuse_if_closing()
        await ready_runner(self._runtime)
        if source_index == self._settings.qdrant_index:
            source_index = None
        if source_index is not None:
            await check_source_index(self._settings, source_index)
        # After the awaits, with no await up to the registration: two requests cannot both pass.
        self._engine.refuse_if_closing()
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
        job.stop(JobCancelledError("reindex cancelled with DELETE"))
        return job.record.model_copy(deep=True), True

    def _find(self, job_id: str) -> _Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise ReindexJobNotFoundError(f"no reindex job {job_id!r}")
        return job

    # -- start-up and shutdown --------------------------------------------------------------

    async def resume(self) -> int:
        """Load this index's state files; unfinished jobs start again (each waits until the service is ready)."""
        records = await anyio.to_thread.run_sync(self._files.load, self._settings.qdrant_index)
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

    def stop(self) -> None:
        """Refuse new jobs and interrupt unfinished ones; their state stays unfinished, so they resume."""
        self._engine.close()
        for job in self._jobs.values():
            if not job.record.finished:
                job.stop(ShuttingDownError("service shutting down"))

    async def wait_stopped(self, timeout_seconds: float = ABORT_WAIT_SECONDS) -> bool:
        """Wait until the interrupted jobs' tasks ended (their runs aborted, progress saved); False on timeout."""
        pending = await self._engine.wait(list(self._jobs.values()), timeout_seconds)
        if pending:
            logger.warning("%d reindex jobs still stopping at shutdown; they resume at the next start", len(pending))
        return not pending

    async def shutdown(self) -> None:
        """``stop`` and ``wait_stopped``: the lifespan's exit, before the runtime closes the store."""
        self.stop()
        await self.wait_stopped()

    # -- a job's life -----------------------------------------------------------------------

    def _launch(self, job: _Job) -> None:
        self._engine.launch(job, self._run(job))

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
        runner = await wait_for_runner(self._runtime)
        record.state = "running"
        record.started_at = record.started_at or datetime.now(UTC)
        record.pace_since = None
        await self._save(job, force=True)
        async with source_store(self._runtime, record.source_index) as source:
            file_ids = await document_ids(source, record.collection_name)
            remaining = [file_id for file_id in file_ids if record.cursor is None or file_id > record.cursor]
            record.total = record.done + len(remaining)
            record.pace_since, record.pace_done = datetime.now(UTC), record.done
            await self._save(job, force=True)
            fingerprint = ingest_fingerprint(self._settings, self._settings.extraction_engine)
            for file_id in remaining:
                outcome, failure = await self._document(job, runner, source, file_id, fingerprint)
                record.count(file_id, outcome, failure)
                self._runtime.metrics.reindex_documents.labels(outcome=outcome).inc()
                await self._save(job)

    async def _document(
        self, job: _Job, runner: IndexingRunner, source: ChunkStore, file_id: str, fingerprint: str
    ) -> tuple[DocumentOutcome, DocumentFailure | None]:
        """Re-ingest one document; its own failure is returned, a failure to read the collection raised."""
        record = job.record
        head = await ChunkIndex(source).head(file_id, record.collection_name)
        if head is None:
            return "skipped", None
        name = document_name(head, file_id)
        record.current = CurrentDocument(file_id=file_id, name=name)
        if await already_built(self._runtime, record, head, file_id, fingerprint):
            return "unchanged", None
        workdir = await make_workdir(self._runtime)
        try:
            ingest = await ingest_job_for(self._runtime, record, source, head, file_id, name, workdir, fingerprint)
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
        path = self._files.path(job.record.job_id)
        try:
            await anyio.to_thread.run_sync(self._files.write, job.record.job_id, text)
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
            job_ids = [job.record.job_id for job in dropped]
            try:
                await anyio.to_thread.run_sync(self._files.remove, job_ids)
            except OSError as exc:
                logger.warning("removing finished reindex state files failed: %s", exc)

"""Async ingest jobs (``Prefer: respond-async``): a bounded in-memory registry and the task each job runs in.

A job is one ingest whose document is already staged. It runs as a task of its own, so the
request that submitted it (and that request's connection) can end without stopping it, through
the same runner, INGEST_CONCURRENCY limiter, INGEST_TIMEOUT_SECONDS and versioning as a
synchronous ingest (the route hands in that work). Jobs live in this process only: another
replica or a restarted process does not know them (404 JOB_NOT_FOUND).

States: ``queued`` until the pipeline gets its worker (a concurrency slot), ``running``, then one
of ``succeeded``, ``failed`` or ``aborted`` (DELETE, or the shutdown after its grace period; the
previous version is kept). Finished jobs stay readable for INGEST_JOB_TTL_SECONDS; at most
INGEST_JOBS_MAX are held, the oldest finished dropped first.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from ingestion_service.errors import (
    IngestAbortedError,
    IngestionError,
    JobCancelledError,
    JobNotFoundError,
    JobQueueFullError,
    PipelineFailedError,
    ShuttingDownError,
)
from ingestion_service.jobs.engine import JobEngine, JobRun
from ingestion_service.metrics import IngestMetrics
from ingestion_service.run_control import RunControl, StageProgress

logger = logging.getLogger(__name__)

JobState = Literal["queued", "running", "succeeded", "failed", "aborted"]
FinalState = Literal["succeeded", "failed", "aborted"]
FINAL_STATES: frozenset[str] = frozenset({"succeeded", "failed", "aborted"})

# The ingest itself (runner, limiter, accounting, staging clean-up): the success body, or a raise.
JobWork = Callable[[RunControl], Awaitable[dict[str, Any]]]
# The flat error body the synchronous ingest would have answered with.
ErrorRenderer = Callable[[IngestionError], dict[str, Any]]


class JobControl(RunControl):
    """A run control that reports when the run gets its worker thread, i.e. its concurrency slot."""

    def __init__(self, *, timeout_seconds: float, on_start: Callable[[], None]) -> None:
        super().__init__(timeout_seconds=timeout_seconds)
        self._on_start = on_start

    def start(self) -> None:
        """Start the clock, then mark the job running (called in the worker thread)."""
        super().start()
        self._on_start()


@dataclass(frozen=True)
class JobSnapshot:
    """A consistent copy of a job for readers (the worker thread may change the live one)."""

    job_id: str
    state: JobState
    file_id: str
    collection_name: str
    request_id: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    # While running: the pipeline's current stage (None before its first one, and once finished).
    stage: StageProgress | None
    result: dict[str, Any] | None
    error: dict[str, Any] | None


class Job(JobRun):
    """One async ingest; mutated only under the registry's lock."""

    def __init__(
        self,
        *,
        file_id: str,
        collection_name: str,
        request_id: str,
        render_error: ErrorRenderer,
        timeout_seconds: float,
        on_start: Callable[[Job], None],
    ) -> None:
        self.job_id = uuid.uuid4().hex
        # The control is the job's one run; the scope is cancelled only while the job waits for its slot.
        self.control: JobControl = JobControl(timeout_seconds=timeout_seconds, on_start=lambda: on_start(self))
        super().__init__(self.job_id, self.control)
        self.file_id = file_id
        self.collection_name = collection_name
        self.request_id = request_id
        self.render_error = render_error
        self.created_at = datetime.now(UTC)
        self.state: JobState = "queued"
        self.started_at: datetime | None = None
        self.finished_at: datetime | None = None
        self.result: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None

    @property
    def finished(self) -> bool:
        """Whether the job reached a final state."""
        return self.state in FINAL_STATES

    def snapshot(self) -> JobSnapshot:
        """The job as readers see it (take under the registry's lock)."""
        return JobSnapshot(
            job_id=self.job_id,
            state=self.state,
            file_id=self.file_id,
            collection_name=self.collection_name,
            request_id=self.request_id,
            created_at=self.created_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            stage=self.control.stage if self.state == "running" else None,
            result=self.result,
            error=self.error,
        )


class JobRegistry:
    """Holds the process's async ingest jobs, runs each in a task, expires and bounds them.

    ``clock`` (monotonic seconds) decides expiry; tests inject one instead of sleeping.
    """

    def __init__(
        self,
        *,
        max_jobs: int,
        ttl_seconds: float,
        timeout_seconds: float,
        metrics: IngestMetrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_jobs = max_jobs
        self.ttl_seconds = ttl_seconds
        self.timeout_seconds = timeout_seconds
        self.metrics = metrics
        self.clock = clock
        self._jobs: dict[str, Job] = {}
        # Finished jobs in the order they finished, with the clock's reading then (expiry order).
        self._finished: OrderedDict[str, float] = OrderedDict()
        # A threading lock: the worker thread marks its job running.
        self._lock = threading.Lock()
        self._engine: JobEngine[Job] = JobEngine("ingest-job")

    # -- submitting and reading -------------------------------------------------------------

    def submit(
        self,
        *,
        file_id: str,
        collection_name: str,
        request_id: str,
        work: JobWork,
        render_error: ErrorRenderer,
    ) -> JobSnapshot:
        """Register a job and start its task (on the running event loop); 503 when full or stopping."""
        self._engine.refuse_if_closing()
        job = Job(
            file_id=file_id,
            collection_name=collection_name,
            request_id=request_id,
            render_error=render_error,
            timeout_seconds=self.timeout_seconds,
            on_start=self._mark_running,
        )
        with self._lock:
            self._expire()
            if len(self._jobs) >= self.max_jobs and self._finished:
                dropped, _ = self._finished.popitem(last=False)
                del self._jobs[dropped]
            if len(self._jobs) >= self.max_jobs:
                logger.warning("ingest job refused: %d jobs are queued or running (INGEST_JOBS_MAX)", self.max_jobs)
                raise JobQueueFullError(self.max_jobs)
            self._jobs[job.job_id] = job
            self.metrics.ingest_jobs_active.labels(state="queued").inc()
            snapshot = job.snapshot()
        self._engine.launch(job, self._run(job, work))
        return snapshot

    def get(self, job_id: str) -> JobSnapshot:
        """The job, or JOB_NOT_FOUND (unknown, expired or dropped)."""
        with self._lock:
            return self._find(job_id).snapshot()

    def cancel(self, job_id: str) -> tuple[JobSnapshot, bool]:
        """Ask an unfinished job to stop (its previous version is kept); False when it had already finished.

        A running job stops at its next checkpoint; one already committing finishes and succeeds.
        """
        with self._lock:
            job = self._find(job_id)
            if job.finished:
                return job.snapshot(), False
            snapshot = job.snapshot()
        self._stop(job, JobCancelledError("cancelled with DELETE"))
        return snapshot, True

    def _find(self, job_id: str) -> Job:
        self._expire()
        job = self._jobs.get(job_id)
        if job is None:
            raise JobNotFoundError(f"no job {job_id!r}")
        return job

    def _expire(self) -> None:
        now = self.clock()
        while self._finished:
            job_id, finished = next(iter(self._finished.items()))
            if now - finished < self.ttl_seconds:
                return
            del self._finished[job_id]
            del self._jobs[job_id]

    # -- the job's life ---------------------------------------------------------------------

    def _mark_running(self, job: Job) -> None:
        with self._lock:
            if job.state != "queued":
                return
            job.state = "running"
            job.started_at = datetime.now(UTC)
            self.metrics.ingest_jobs_active.labels(state="queued").dec()
            self.metrics.ingest_jobs_active.labels(state="running").inc()

    def _stop(self, job: Job, reason: IngestAbortedError) -> None:
        with self._lock:
            queued = job.state == "queued"
        # A queued job leaves the queue now rather than take a slot to stop; a running one stops at its
        # next checkpoint (cancelling it could mark a run that is committing aborted).
        job.stop(reason, cancel_work=queued)

    async def _run(self, job: Job, work: JobWork) -> None:
        result: dict[str, Any] | None = None
        error: IngestionError | None = None
        try:
            with job.scope:
                result = await work(job.control)
        except IngestionError as exc:
            error = exc
        except Exception as exc:  # what the sync route's catch-all handler answers
            error = PipelineFailedError(f"{type(exc).__name__}: {exc}")
            error.__cause__ = exc
        if result is None and error is None:
            # The scope caught its own cancellation: stopped while queued (DELETE or shutdown).
            error = job.control.aborted or ShuttingDownError("service shutting down")
        self._finish(job, result, error)

    def _finish(self, job: Job, result: dict[str, Any] | None, error: IngestionError | None) -> None:
        state: FinalState = (
            "succeeded" if error is None else "aborted" if isinstance(error, IngestAbortedError) else "failed"
        )
        body = None if error is None else job.render_error(error)
        now = datetime.now(UTC)
        with self._lock:
            if job.finished:
                return  # already given up on at shutdown
            previous = job.state
            job.state, job.result, job.error, job.finished_at = state, result, body, now
            self._finished[job.job_id] = self.clock()
            self.metrics.ingest_jobs_active.labels(state=previous).dec()
            self.metrics.ingest_jobs.labels(state=state).inc()
        self._log_end(job, state, error)

    @staticmethod
    def _log_end(job: Job, state: FinalState, error: IngestionError | None) -> None:
        code = "OK" if error is None else error.code
        extra = {
            "job_id": job.job_id,
            "file_id": job.file_id,
            "collection_name": job.collection_name,
            "state": state,
            "code": code,
            "request_id": job.request_id,
        }
        if error is None:
            logger.info("ingest job %s succeeded", job.job_id, extra=extra)
        elif error.status_code >= 500 and error.server_fault:
            # The one line a failed job leaves; like the sync route's handler, with the traceback.
            cause = error.__cause__ if isinstance(error, PipelineFailedError) and error.__cause__ else error
            logger.error("ingest job %s failed: %s: %s", job.job_id, code, error, extra=extra, exc_info=cause)
        else:
            logger.warning("ingest job %s %s: %s; the previous version is kept", job.job_id, state, code, extra=extra)

    # -- shutdown ---------------------------------------------------------------------------

    def _unfinished(self) -> list[Job]:
        with self._lock:
            return [job for job in self._jobs.values() if not job.finished]

    async def shutdown(self, *, grace_seconds: float, abort_wait_seconds: float) -> None:
        """Refuse new jobs, give unfinished ones ``grace_seconds``, then abort them (previous versions kept).

        Aborted runs get ``abort_wait_seconds`` to stop and remove their points; a job still busy
        after that (one native engine call) is marked aborted anyway, and start-up recovery
        removes whatever it leaves pending.
        """

        def abort(job: Job) -> None:
            self._stop(job, ShuttingDownError("service shutting down"))

        still_running = await self._engine.shut_down(
            self._unfinished, abort, grace_seconds=grace_seconds, abort_wait_seconds=abort_wait_seconds
        )
        for job in still_running:
            logger.warning(
                "ingest job %s still running at shutdown; start-up recovery removes its pending points",
                job.job_id,
                extra={"job_id": job.job_id, "file_id": job.file_id},
            )
            self._finish(job, None, ShuttingDownError("service shutting down"))

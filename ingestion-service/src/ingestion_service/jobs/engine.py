"""The one engine both kinds of background job run on: async ingests (``jobs.ingest``) and reindexes
(``jobs.reindex``).

A job runs as a task of its own on the event loop, so the request that started it can end. The engine
refuses new jobs once the service is closing, stops a job (the ingest it is running is aborted through
its run control, and the work waiting for a slot or between documents is cancelled through its scope)
and, at shutdown, gives unfinished jobs their grace, stops them and waits for them to end. What the
two kinds keep of a job differs and stays with them: an async ingest is held in memory and expires; a
reindex is persisted and resumes after a restart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Coroutine
from typing import Any, Generic, TypeVar

import anyio

from ingestion_service.errors import IngestAbortedError, ShuttingDownError
from ingestion_service.run_control import RunControl

logger = logging.getLogger(__name__)


class JobRun:
    """The engine's handle on one job: its task, the cancel scope around its work, and the run control
    of the ingest it is doing (None while it does none)."""

    def __init__(self, name: str, control: RunControl | None = None) -> None:
        self.run_name = name
        self.scope = anyio.CancelScope()
        self.control = control
        self.task: asyncio.Task[None] | None = None

    def stop(self, reason: IngestAbortedError, *, cancel_work: bool = True) -> None:
        """Abort the job's ingest with ``reason`` (it stops at its next checkpoint, its previous version
        kept) and, with ``cancel_work``, cancel the work around it (a wait for a slot, the next document)."""
        if self.control is not None:
            self.control.abort(reason)
        if cancel_work:
            self.scope.cancel()


Job = TypeVar("Job", bound=JobRun)


class JobEngine(Generic[Job]):
    """Starts, refuses and shuts down the jobs of one kind (``kind`` names their tasks and log lines)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.closing = False

    def close(self) -> None:
        """From now on, new jobs are refused."""
        self.closing = True

    def refuse_if_closing(self) -> None:
        """503 SHUTTING_DOWN once the shutdown began."""
        if self.closing:
            raise ShuttingDownError("service shutting down")

    def launch(self, job: Job, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` as the job's task (it copies the caller's context: log lines keep its request id)."""
        job.task = asyncio.create_task(work, name=f"{self.kind}-{job.run_name}")

    @staticmethod
    async def wait(jobs: Collection[Job], timeout_seconds: float) -> list[Job]:
        """Wait at most ``timeout_seconds`` for the jobs' tasks; the jobs whose task still runs."""
        running = {job.task: job for job in jobs if job.task is not None and not job.task.done()}
        if running:
            await asyncio.wait(running, timeout=timeout_seconds)
        return [job for task, job in running.items() if not task.done()]

    async def shut_down(
        self,
        unfinished: Callable[[], Collection[Job]],
        stop: Callable[[Job], None],
        *,
        grace_seconds: float,
        abort_wait_seconds: float,
    ) -> list[Job]:
        """Refuse new jobs, give the unfinished ones ``grace_seconds``, ``stop`` those left, and wait
        ``abort_wait_seconds`` for them to end; the jobs still running after that (one native engine
        call can outlast it)."""
        self.close()
        left = unfinished()
        if left and grace_seconds > 0:
            logger.info("shutting down: %d jobs (%s) get up to %g s to finish", len(left), self.kind, grace_seconds)
            await self.wait(left, grace_seconds)
            left = unfinished()
        if not left:
            return []
        logger.warning("shutting down: stopping %d jobs (%s)", len(left), self.kind)
        for job in left:
            stop(job)
        return await self.wait(left, abort_wait_seconds)

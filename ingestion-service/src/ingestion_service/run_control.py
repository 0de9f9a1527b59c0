"""Cooperative stopping of one pipeline run: its deadline, and aborts from outside.

The pipeline runs in a worker thread that cannot be interrupted, so stages call
:func:`checkpoint` between units of work (a document, a section, an embedding slice, a write
batch). The runner makes the run's control current in that thread (a context variable, so
swapped or test components reach it without new pipeline inputs); the event loop aborts it on a
client disconnect or at shutdown. One engine call (native code) still runs to its end; the size
limits bound how long that can be.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import anyio

from ingestion_service.errors import IngestAbortedError, IngestTimeoutError, ShuttingDownError

T = TypeVar("T")

# A run's stages in order, as progress names them (units: files, then chunks; each embedding pass
# and the write count the chunks they are given).
Stage = Literal["converting", "embedding", "embedding_sparse", "embedding_multilingual", "writing"]


@dataclass(frozen=True, slots=True)
class StageProgress:
    """How far a run is through its current stage."""

    stage: Stage
    done: int
    total: int
    started: float  # time.monotonic() when the stage began

    def eta_seconds(self, now: float) -> float | None:
        """The stage's time left at its pace so far; None before its first unit is done."""
        if self.done <= 0:
            return None
        return round(max(0.0, now - self.started) / self.done * max(0, self.total - self.done), 1)


class RunControl:
    """Deadline and abort flag of one run; thread-safe, checked by :func:`checkpoint`."""

    def __init__(self, *, timeout_seconds: float) -> None:
        self.timeout_seconds = timeout_seconds
        self._deadline: float | None = None
        self._abort: IngestAbortedError | None = None
        self._lock = threading.Lock()
        # Set when the worker thread has left the pipeline (normally or not).
        self.finished = threading.Event()
        # Past this point the run is finished rather than discarded (see IndexingRunner).
        self.commit_started = False
        self._stage: StageProgress | None = None

    def start(self) -> None:
        """Start the clock (when the run gets its worker, so queueing does not count)."""
        self._deadline = time.monotonic() + self.timeout_seconds

    def abort(self, error: IngestAbortedError) -> None:
        """Ask the run to stop at its next checkpoint; the first reason wins."""
        with self._lock:
            if self._abort is None:
                self._abort = error

    def advance(self, stage: Stage, done: int, total: int) -> None:
        """Record that ``done`` of the stage's ``total`` units are done (a new stage starts its clock)."""
        with self._lock:
            current = self._stage
            started = current.started if current is not None and current.stage == stage else time.monotonic()
            self._stage = StageProgress(stage, done, total, started)

    @property
    def stage(self) -> StageProgress | None:
        """The stage the run is in and how far through it, once a stage reported; None before."""
        return self._stage

    @property
    def aborted(self) -> IngestAbortedError | None:
        """Why the run was aborted, if it was."""
        return self._abort

    def check(self) -> None:
        """Raise the abort reason, or IngestTimeoutError past the deadline."""
        if self._abort is not None:
            raise self._abort
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise IngestTimeoutError(self.timeout_seconds)


_current: ContextVar[RunControl | None] = ContextVar("ingestion_run_control", default=None)


@contextmanager
def active(control: RunControl) -> Iterator[RunControl]:
    """Make ``control`` the one :func:`checkpoint` consults in this context."""
    token = _current.set(control)
    try:
        yield control
    finally:
        _current.reset(token)


def checkpoint() -> None:
    """Stop here if the current run was aborted or is past its deadline (no-op outside a run)."""
    control = _current.get()
    if control is not None:
        control.check()


def report_progress(stage: Stage, done: int, total: int) -> None:
    """Tell the current run how far it is through ``stage`` (no-op outside a run)."""
    control = _current.get()
    if control is not None:
        control.advance(stage, done, total)


async def run_in_worker(
    control: RunControl, work: Callable[[], T], *, limiter: anyio.CapacityLimiter | None = None
) -> T:
    """``work`` in a worker thread (holding ``limiter``) as the run ``control`` governs: its clock
    starts when the run gets the thread, and its checkpoints stop it. A cancelled caller aborts the
    run and waits for the thread, so the slot is held until the thread has really ended (it cannot
    be interrupted; it stops at its next checkpoint)."""

    def governed() -> T:
        try:
            control.start()
            with active(control):
                return work()
        finally:
            control.finished.set()

    slot: AbstractAsyncContextManager[Any] = limiter if limiter is not None else nullcontext()
    async with slot:
        try:
            return await anyio.to_thread.run_sync(governed, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            control.abort(ShuttingDownError("request cancelled"))
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(control.finished.wait)
            raise


async def run_bounded(
    work: Callable[[], T], *, timeout_seconds: float, limiter: anyio.CapacityLimiter | None = None
) -> T:
    """``work`` as a run of its own, stopped past ``timeout_seconds`` or when the caller is cancelled
    (:func:`run_in_worker`). For extraction outside the pipeline (``/api/v1/extract``, the loader),
    bounded like an ingest's."""
    return await run_in_worker(RunControl(timeout_seconds=timeout_seconds), work, limiter=limiter)

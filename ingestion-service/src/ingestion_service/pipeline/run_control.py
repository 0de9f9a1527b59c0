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
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ingestion_service.errors import IngestAbortedError, IngestTimeoutError


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

    def start(self) -> None:
        """Start the clock (when the run gets its worker, so queueing does not count)."""
        self._deadline = time.monotonic() + self.timeout_seconds

    def abort(self, error: IngestAbortedError) -> None:
        """Ask the run to stop at its next checkpoint; the first reason wins."""
        with self._lock:
            if self._abort is None:
                self._abort = error

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

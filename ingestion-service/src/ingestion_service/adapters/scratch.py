"""Where uploads are staged: one directory per process, one sub-directory per request.

A request's directory is removed when the request ends, whatever the outcome. A process that
dies (kill -9, OOM) cannot do that, so each process holds an exclusive ``flock`` on its own
directory for its lifetime (the kernel drops it when the process dies) and at start-up removes
every sibling directory whose lock it can take: those belong to dead processes. Creating a
directory and sweeping are serialized by a lock on the root, so a sweep never sees a live
process's directory before it is locked. Works for several processes (or apps) sharing a root.

A request reserves the bytes it will stage (``reserve``) before it reads them; the reservations of
all live directories stay within SCRATCH_MAX_BYTES, so ingests waiting for a pipeline slot or
queued as jobs cannot fill the disk.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio.to_thread

from ingestion_service.errors import StagingFullError
from shared_contract import ContractConfigError

logger = logging.getLogger(__name__)

_ROOT_LOCK = ".lock"
_PROCESS_PREFIX = "proc-"


def default_root() -> Path:
    """``<system temp>/ingestion-service``."""
    return Path(tempfile.gettempdir()) / "ingestion-service"


@contextmanager
def _root_locked(root: Path) -> Iterator[None]:
    fd = os.open(root / _ROOT_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _try_lock(path: Path) -> int | None:
    """An fd holding ``path``'s exclusive lock, or None when another process (or app) holds it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


class ScratchSpace:
    """The staging area of one app. ``claim`` before serving, ``sweep`` at start-up, ``release`` at exit."""

    def __init__(self, root: Path, *, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._own: Path | None = None
        self._own_fd: int | None = None
        # Bytes each live request directory may stage (touched on the event loop only).
        self._reserved: dict[Path, int] = {}

    @property
    def reserved_bytes(self) -> int:
        """Bytes reserved by the live request directories."""
        return sum(self._reserved.values())

    def reserve(self, workdir: Path, size: int) -> None:
        """Let ``workdir`` stage up to ``size`` bytes (its largest reservation counts), or
        STAGING_FULL when the directories' reservations would pass SCRATCH_MAX_BYTES."""
        held = self._reserved.get(workdir, 0)
        if size <= held:
            return
        others = self.reserved_bytes - held
        if others + size > self.max_bytes:
            logger.warning(
                "ingest refused: staging %d bytes would pass SCRATCH_MAX_BYTES (%d; %d staged)",
                size,
                self.max_bytes,
                others,
            )
            raise StagingFullError(wanted=size, reserved=others, limit=self.max_bytes)
        self._reserved[workdir] = size

    def _claim(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            with _root_locked(self.root):
                own = Path(tempfile.mkdtemp(prefix=_PROCESS_PREFIX, dir=self.root))
                fd = _try_lock(own)
        except OSError as exc:
            # A file in the way, no permission, a read-only mount: the operator's setting to fix.
            raise ContractConfigError(
                "SCRATCH_DIR", f"cannot use {self.root} as the staging directory ({exc.strerror or exc})"
            ) from exc
        if fd is None:  # pragma: no cover - a fresh mkdtemp directory is never locked by anyone else
            raise RuntimeError(f"could not lock the new scratch directory {own}")
        self._own, self._own_fd = own, fd

    def _sweep(self) -> int:
        removed = 0
        with _root_locked(self.root):
            for entry in self.root.iterdir():
                if entry == self._own or not entry.name.startswith(_PROCESS_PREFIX) or not entry.is_dir():
                    continue
                fd = _try_lock(entry)
                if fd is None:
                    continue  # a live process's directory
                try:
                    shutil.rmtree(entry, ignore_errors=True)
                finally:
                    os.close(fd)
                removed += 1
        return removed

    def _release(self) -> None:
        if self._own is not None:
            shutil.rmtree(self._own, ignore_errors=True)
        if self._own_fd is not None:
            os.close(self._own_fd)
        self._own, self._own_fd = None, None

    async def claim(self) -> None:
        """Create and lock this app's directory (in a thread: file-system calls); ContractConfigError
        naming SCRATCH_DIR when the root cannot hold it."""
        await anyio.to_thread.run_sync(self._claim)

    async def sweep(self) -> int:
        """Remove the directories of dead processes (uploads a crash left behind); returns how many."""
        removed = await anyio.to_thread.run_sync(self._sweep)
        if removed:
            logger.warning("removed %d staging directories left by processes that did not exit cleanly", removed)
        return removed

    async def release(self) -> None:
        """Remove this app's directory and drop its lock."""
        await anyio.to_thread.run_sync(self._release)

    async def new_workdir(self) -> Path:
        """A private directory for one request."""
        if self._own is None:
            raise RuntimeError("scratch space used before claim()")
        own = self._own
        return Path(await anyio.to_thread.run_sync(lambda: tempfile.mkdtemp(prefix="ingest-", dir=own)))

    async def remove_workdir(self, workdir: Path) -> None:
        """Always called when a request ends; shielded so a cancelled request still cleans up."""
        with anyio.CancelScope(shield=True):
            try:
                await anyio.to_thread.run_sync(lambda: shutil.rmtree(workdir, ignore_errors=True))
            finally:
                self._reserved.pop(workdir, None)

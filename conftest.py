"""What every test root shares: the ``models`` marker on each test that loads the offline models,
the removal of ':memory:' stores a test left open, and of test stores a killed run left on tmpfs.

A test that uses a root's ``embedder`` fixture (directly or through an app or a seeded store) is
marked here; one that builds a model-loading app or embedder itself carries ``pytest.mark.models``
in its module. ``make test-fast`` runs ``-m "not models"``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# The session fixture each test root loads its models in; every app and seeded store depends on it.
MODEL_FIXTURES = frozenset({"embedder"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if MODEL_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.models)


# The tmpfs roots the test sessions keep their stores in, named ``<root>-<pid>-<random>``.
_STORE_ROOT = re.compile(r"(?:ingestion|retrieval-agent|rag-runtime)-tests-(\d+)-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def pytest_sessionstart() -> None:
    """A session removes its stores when it ends; one that was killed could not, so the next one does."""
    shm = Path("/dev/shm")  # noqa: S108 - only entries this suite names, of processes no longer running
    if not shm.is_dir():
        return
    for entry in shm.iterdir():
        match = _STORE_ROOT.match(entry.name)
        if match is not None and not _alive(int(match.group(1))):
            shutil.rmtree(entry, ignore_errors=True)


def _memory_stores() -> set[Path]:
    """The ':memory:' stores' directories (``EdgeStore.in_memory``) under the temporary root."""
    return set(Path(tempfile.gettempdir()).glob("qdrant-edge-*"))


@pytest.fixture(autouse=True)
def _drop_unclosed_memory_stores() -> Iterator[None]:
    """A ':memory:' store removes itself on close; one a test left open is removed when the test
    ends, unless something (a module fixture) still holds it."""
    from rag_runtime.store import store_in_use  # the integration roots need no store library

    before = _memory_stores()
    yield
    for root in _memory_stores() - before:
        collections = root / "collections"
        held = collections.is_dir() and any(store_in_use(directory) for directory in collections.iterdir())
        if not held:
            shutil.rmtree(root, ignore_errors=True)


# A test session builds hundreds of apps; each is a reference cycle (FastAPI's app and router), so
# what it held (a runtime, a store, pipelines) waits for the rare full collection, and the heap the
# allocator keeps after big documents is not handed back. Once the process has grown this much since
# the last time, both are done: a few times a session, not after every test.
_RECLAIM_AFTER_GROWTH = 256 * 2**20
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_reclaimed_at = [0]
# Linux only: elsewhere there is no /proc to read the process's size from.
_STATM = Path("/proc/self/statm")
_CAN_MEASURE = _STATM.exists()
# glibc's malloc_trim hands free heap pages back to the system; other C libraries have none.
_MALLOC_TRIM = getattr(ctypes.CDLL(ctypes.util.find_library("c")), "malloc_trim", None) if _CAN_MEASURE else None


def _resident_bytes() -> int:
    with _STATM.open(encoding="ascii") as statm:
        return int(statm.read().split()[1]) * _PAGE_SIZE


@pytest.fixture(autouse=True)
def _reclaim_memory() -> Iterator[None]:
    yield
    if not _CAN_MEASURE:
        return
    if _resident_bytes() - _reclaimed_at[0] < _RECLAIM_AFTER_GROWTH:
        return
    gc.collect()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
    _reclaimed_at[0] = _resident_bytes()

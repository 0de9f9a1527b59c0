"""Handing the heap a run freed back to the system.

Extraction, OCR, page rendering and the embedding passes allocate hundreds of megabytes in worker
threads. glibc keeps what they free in its arenas, so a process that ingested a few large documents
held its peak for good (2.1 GiB after the 97 real documents; docs/benchmarks.md). ``malloc_trim(0)``
returns the free pages of every arena. Other C libraries have no such call: there it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable
from typing import Final


def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    library = ctypes.util.find_library("c")
    trim = getattr(ctypes.CDLL(library), "malloc_trim", None) if library else None
    if trim is None:
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim  # type: ignore[no-any-return]


_TRIM: Final = _malloc_trim()


def release_free_heap() -> bool:
    """Return the free heap pages to the system; True when the C library could (glibc)."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True

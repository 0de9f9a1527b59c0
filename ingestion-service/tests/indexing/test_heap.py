"""Freed heap handed back to the system after a run (glibc's malloc_trim)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from pathlib import Path

import pytest

from ingestion_service.indexing.heap import release_free_heap

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc: Linux only")

BLOCK = 64 * 1024  # below glibc's mmap threshold: carved from the heap, as a run's buffers are
BLOCKS = 4096  # 256 MiB


def resident_bytes() -> int:
    return int(Path("/proc/self/statm").read_text(encoding="ascii").split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_heap_freed_below_a_live_block_goes_back_to_the_system() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(BLOCK) for _ in range(BLOCKS)]
    for block in blocks:
        ctypes.memset(block, 1, BLOCK)
    # The last block, taken from the heap's top, stays: free() alone cannot shrink the heap past it.
    *freed_blocks, pin = blocks
    for block in freed_blocks:
        libc.free(block)
    freed = resident_bytes()
    try:
        assert release_free_heap()
        assert resident_bytes() < freed - BLOCKS * BLOCK // 2
    finally:
        libc.free(pin)

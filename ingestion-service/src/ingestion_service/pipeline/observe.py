"""Stage timing: components report how long they took through an injected callback."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

StageObserver = Callable[[str, float], None]


@contextmanager
def timed(observer: StageObserver | None, stage: str) -> Iterator[None]:
    """Report the block's wall time to ``observer`` under ``stage`` (also when it raises)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        if observer is not None:
            observer(stage, time.perf_counter() - started)

"""One lock for every PDFium call in the process.

PDFium is not thread-safe, and pypdfium2 says so: the survey, scan detection, page rendering for
OCR and the vision engines all run in worker threads and must not call into it at once.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

PDFIUM_LOCK = threading.RLock()
_P = ParamSpec("_P")
_R = TypeVar("_R")


def serialized(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` run while holding :data:`PDFIUM_LOCK`."""

    @functools.wraps(function)
    def locked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with PDFIUM_LOCK:
            return function(*args, **kwargs)

    return locked

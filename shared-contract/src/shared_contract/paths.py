"""A document's path relative to the folder it came from (``meta.path``) and its folders (``meta.folders``).

One rule on both sides: ingestion validates the path a request sends, ``rag sync`` and ``rag ingest``
build it from the root given on the command line, and the folder filter reads ``meta.folders`` (every
ancestor folder of the path, so "under notes/2024" is one exact keyword match on an indexed key).
"""

from __future__ import annotations

import unicodedata
from typing import Final

MAX_PATH_CHARS: Final = 1024


def relative_path(text: str) -> str:
    """``text`` as a relative POSIX path: ``\\`` read as ``/``, empty and ``.`` segments dropped.

    ValueError for an absolute path (``/x``, ``C:\\x``, ``\\\\server\\x``), a ``..`` segment, a control
    character, or more than MAX_PATH_CHARS characters; the message never quotes the path.
    """
    if any(unicodedata.category(char) == "Cc" for char in text):
        raise ValueError("must not contain control characters")
    slashed = text.replace("\\", "/")
    if slashed.startswith("/") or (len(slashed) >= 2 and slashed[1] == ":" and slashed[0].isascii()):
        raise ValueError("must be relative (no leading '/', no drive letter)")
    parts = [part for part in slashed.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ValueError("must not contain '..'")
    if not parts:
        raise ValueError("must name a file or folder")
    path = "/".join(parts)
    if len(path) > MAX_PATH_CHARS:
        raise ValueError(f"must be at most {MAX_PATH_CHARS} characters")
    return path


def path_folders(path: str) -> list[str]:
    """The folders ``path`` (relative, POSIX) lies in, outermost first: ``a/b/c.md`` -> ``["a", "a/b"]``."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[: depth + 1]) for depth in range(len(parts))]

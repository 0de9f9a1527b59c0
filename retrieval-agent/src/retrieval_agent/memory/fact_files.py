"""Reading a user's fact files without leaving the user's folder.

A symbolic link (a fact file, the user's folder or its ``deleted/``) could point anywhere, and what it
points to would be served as a fact: it is never followed. The folder is opened with ``O_NOFOLLOW``
and each file relative to it (``dir_fd``), also with ``O_NOFOLLOW``, so a link swapped in between a
check and the read is refused too. Only regular files are read (a FIFO would block the read), and at
most MAX_FACT_FILE_BYTES of each: a longer file is read as its beginning (``Fact.truncated``).

Hard links are read: a hard link is the same file under a second name, only possible on the same
file system (a memory volume holds nothing else), and hard-link backups (``cp -al``, rsnapshot)
give every fact a second name.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

from retrieval_agent.memory.facts import FACT_SUFFIX, Fact, FactFormatError, parse_fact
from retrieval_agent.memory.limits import MAX_FACT_FILE_BYTES

RefusalReason = Literal["link", "not_a_file"]
_DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused once open).
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_READ_CHUNK: Final = 65_536


class RefusedFileError(FactFormatError):
    """A file in a memory folder that is never read: a symbolic link, or not a regular file."""

    def __init__(self, file_name: str, reason: RefusalReason) -> None:
        what = "a symbolic link" if reason == "link" else "not a regular file"
        super().__init__(f"{file_name} is {what}; memory reads only regular files inside the user's folder")
        self.reason: RefusalReason = reason


class LinkedFolderError(OSError):
    """A user's folder (or its ``deleted/``) that is a symbolic link: nothing in it is read or written."""

    def __init__(self, folder: Path) -> None:
        super().__init__(f"{folder} is a symbolic link; memory never follows links out of MEMORY_PATH")


def check_not_linked(folder: Path) -> None:
    """LinkedFolderError when ``folder`` is a symbolic link (a missing folder is fine)."""
    if folder.is_symlink():
        raise LinkedFolderError(folder)


@contextmanager
def open_folder(folder: Path) -> Iterator[int | None]:
    """A descriptor of ``folder`` (None when it does not exist); LinkedFolderError when it is a link."""
    try:
        descriptor = os.open(folder, _DIRECTORY_FLAGS)
    except FileNotFoundError:
        yield None
        return
    except OSError as exc:
        # O_NOFOLLOW on a link: ELOOP; O_DIRECTORY on a link (some systems) or a file: ENOTDIR.
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and folder.is_symlink():
            raise LinkedFolderError(folder) from exc
        raise
    try:
        yield descriptor
    finally:
        os.close(descriptor)


def fact_names(folder_fd: int) -> list[str]:
    """The names of the ``.md`` entries of the folder (links and other non-files included), sorted."""
    with os.scandir(folder_fd) as entries:
        return sorted(entry.name for entry in entries if entry.name.endswith(FACT_SUFFIX))


def read_fact_at(folder_fd: int, file_name: str, *, max_bytes: int | None = MAX_FACT_FILE_BYTES) -> Fact:
    """The fact in ``file_name`` of the open folder: at most ``max_bytes`` of it (None: all of it).

    RefusedFileError for a link or anything but a regular file, FactFormatError when the file is no
    fact, OSError when it cannot be read (FileNotFoundError when it is not there).
    """
    try:
        descriptor = os.open(file_name, _FILE_FLAGS, dir_fd=folder_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RefusedFileError(file_name, "link") from None
        raise
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise RefusedFileError(file_name, "not_a_file")
        truncated = max_bytes is not None and status.st_size > max_bytes
        data = _read(descriptor, status.st_size if max_bytes is None else min(status.st_size, max_bytes))
    finally:
        os.close(descriptor)
    modified = datetime.fromtimestamp(status.st_mtime, UTC)
    return parse_fact(data, stem=file_name.removesuffix(FACT_SUFFIX), modified=modified, truncated=truncated)


def _read(descriptor: int, size: int) -> bytes:
    """Up to ``size`` bytes (fewer when the file shrank meanwhile)."""
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(descriptor, min(left, _READ_CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)

"""The memory folders: MEMORY_PATH/<user>/<id>.md, one fact per file, each folder its own Git repository.

Every change is a commit authored by "memory" whose subject starts with what happened (``ADD:``,
``UPDATE:``, ``DELETE:``, ``EDIT:`` for changes a person made by hand) and whose body says why, so
``git log`` reads as the memory's history and ``git revert`` undoes one step. A deleted fact is moved
to ``deleted/`` with the reason in its front matter, never destroyed. Files are written whole to a
temporary name and renamed, so a crash never leaves half a fact behind.

A change is stored when its commit is: until then the previous file is kept under a temporary name,
and when the commit fails (a full disk fails git's object writes) the change is taken back with
renames and removals, which need no free space, so a failed write leaves the folder as it was and a
retry stores the fact once. When git fails after moving HEAD, the change is committed: that is a
success. Files are read through :mod:`retrieval_agent.memory.fact_files`, which never follows a link.

The caller serialises the changes of one user (the service holds a lock per user).
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import anyio.to_thread

from retrieval_agent.adapters.git import Commit, GitRepository
from retrieval_agent.errors import FactNotFoundError, InvalidMemoryRequestError, MemoryStorageError
from retrieval_agent.memory.fact_files import (
    RefusalReason,
    RefusedFileError,
    check_not_linked,
    fact_names,
    open_folder,
    read_fact_at,
)
from retrieval_agent.memory.facts import (
    DELETED_DIR,
    FACT_SUFFIX,
    Fact,
    FactFormatError,
    check_user,
    is_fact_id,
    new_fact_id,
    normalize_language,
    utc_now,
)
from retrieval_agent.memory.limits import MAX_FACT_CHARS

logger = logging.getLogger(__name__)

_TEMP_PREFIX: Final = ".tmp-"
_GITIGNORE: Final = f"{_TEMP_PREFIX}*\n"
_SUBJECT_CHARS: Final = 72

# What a folder looks like without reading its files: (name, modification time, size) per fact.
Signature = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A file in the folder that is not a fact (a hand edit broke its front matter)."""

    file_name: str
    problem: str
    # Set for a file that is never read (a link, not a regular file).
    refused: RefusalReason | None = None


@dataclass(frozen=True, slots=True)
class FactListing:
    facts: list[Fact] = field(default_factory=lambda: list[Fact]())
    unreadable: list[Unreadable] = field(default_factory=lambda: list[Unreadable]())


def check_fact_text(text: str) -> str:
    """The fact's text, stripped; InvalidMemoryRequestError when empty or too long."""
    stripped = text.strip()
    if not stripped:
        raise InvalidMemoryRequestError("Invalid request: text: a fact needs some text.")
    if len(stripped) > MAX_FACT_CHARS:
        raise InvalidMemoryRequestError(f"Invalid request: text: a fact is at most {MAX_FACT_CHARS} characters.")
    return stripped


def _subject(action: str, text: str) -> str:
    line = " ".join(text.split())
    head = f"{action}: "
    room = _SUBJECT_CHARS - len(head)
    return head + (line if len(line) <= room else line[: room - 1] + "…")


def _message(action: str, fact: Fact, reason: str) -> str:
    lines = [_subject(action, fact.text), "", f"Why: {' '.join(reason.split()) or 'not given'}", f"Fact: {fact.id}"]
    if fact.conversation_id:
        lines.append(f"Conversation: {fact.conversation_id}")
    if fact.source_message_id:
        lines.append(f"Message: {fact.source_message_id}")
    return "\n".join(lines) + "\n"


def _temporary(folder: Path) -> Path:
    """A fresh name in ``folder`` that git ignores."""
    return folder / f"{_TEMP_PREFIX}{uuid.uuid4().hex}"


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = _temporary(path.parent)
    try:
        # O_EXCL | O_NOFOLLOW: the write goes to a new file, never through a link.
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(temporary, flags, 0o644), "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(path)
    finally:
        temporary.unlink(missing_ok=True)


def _nothing() -> None:
    return None


@dataclass(frozen=True, slots=True)
class _Change:
    """A change made in the folder but not committed yet: how to take it back, and what to tidy once
    it is committed. Both only rename or remove files, so they work on a full disk."""

    undo: Callable[[], None]
    settle: Callable[[], None] = _nothing


def _put(path: Path, data: bytes) -> _Change:
    """``data`` as ``path`` (written whole, then renamed in), the previous file kept until the commit."""
    previous = _temporary(path.parent)
    try:
        # A second name for the previous file: putting it back is one rename.
        os.link(path, previous, follow_symlinks=False)
    except FileNotFoundError:
        _write_atomically(path, data)
        return _Change(undo=lambda: path.unlink(missing_ok=True))
    except OSError:
        # A file system without hard links: a copy (on a full disk it fails here, before any change).
        try:
            shutil.copy2(path, previous, follow_symlinks=False)
        except OSError:
            previous.unlink(missing_ok=True)
            raise
    try:
        _write_atomically(path, data)
    except OSError:
        previous.unlink(missing_ok=True)
        raise
    return _Change(undo=lambda: os.replace(previous, path), settle=lambda: previous.unlink(missing_ok=True))


class FactRepository:
    """Facts of every user under ``root``."""

    def __init__(self, root: Path, git_executable: str) -> None:
        # MEMORY_PATH may itself be a link (the operator's choice), resolved once; below it none is followed.
        self.root = root.resolve()
        self._git = git_executable

    def folder(self, user: str) -> Path:
        try:
            check_user(user)
        except ValueError as exc:
            raise InvalidMemoryRequestError(f"Invalid request: {exc}.") from None
        return self.root / user

    def _repository(self, user: str) -> GitRepository:
        return GitRepository(self.folder(user), self._git)

    def _fact_path(self, user: str, fact_id: str) -> Path:
        if not is_fact_id(fact_id):
            raise InvalidMemoryRequestError(
                "Invalid request: fact_id must be 1-128 characters: ASCII letters, digits, '_' or '-'."
            )
        return self.folder(user) / f"{fact_id}{FACT_SUFFIX}"

    async def _checked(self, user: str) -> GitRepository:
        """The user's repository; MemoryStorageError when the folder is a link (git would follow it)."""
        repository = self._repository(user)
        try:
            await anyio.to_thread.run_sync(check_not_linked, repository.path)
        except OSError as exc:
            raise MemoryStorageError(str(exc)) from exc
        return repository

    async def _ensure(self, user: str) -> GitRepository:
        repository = await self._checked(user)
        await repository.ensure()
        # Keyed on HEAD, not on .gitignore: an INIT whose commit failed is made again.
        if await repository.head() is None:
            ignore = anyio.Path(repository.path / ".gitignore")
            if not await ignore.exists():
                await ignore.write_text(_GITIGNORE)
            await repository.commit_all(f"INIT: the memory of {user}\n")
        return repository

    async def _commit(self, repository: GitRepository, message: str, change: _Change) -> None:
        """Commit ``change``; when the commit fails, take the change back and raise MemoryStorageError."""
        try:
            before = await repository.head()
        except MemoryStorageError:
            if await self._take_back(change):
                raise
        else:
            try:
                await repository.commit_all(message)
            except MemoryStorageError:
                if await self._moved(repository, before):
                    # git failed after HEAD moved (e.g. writing its index): the change is committed.
                    logger.warning("memory: git reported a failure after committing; the change is stored")
                elif await self._take_back(change):
                    raise
        try:
            await anyio.to_thread.run_sync(change.settle)
        except OSError as exc:
            logger.warning("memory: a temporary file was left in the folder (git ignores it): %s", exc)

    @staticmethod
    async def _take_back(change: _Change) -> bool:
        """Undo ``change``; False when that failed too: then it stays in the folder, which every read and
        the next commit (EDIT) take as the truth, so answering a failure would make a retry store it twice."""
        try:
            await anyio.to_thread.run_sync(change.undo)
        except OSError:
            logger.exception("memory: a failed commit could not be taken back; the change stays")
            return False
        return True

    @staticmethod
    async def _moved(repository: GitRepository, before: str | None) -> bool:
        """Whether HEAD is no longer ``before``; False when git cannot even say (then the change is taken
        back: the folder, which reads and recall follow, must not hold what the error says failed)."""
        try:
            return await repository.head() != before
        except MemoryStorageError:
            return False

    # -- reading ----------------------------------------------------------------------------------

    def _scan(self, user: str) -> FactListing:
        listing = FactListing()
        try:
            with open_folder(self.folder(user)) as folder_fd:
                if folder_fd is None:
                    return listing
                for name in fact_names(folder_fd):
                    try:
                        listing.facts.append(read_fact_at(folder_fd, name))
                    except RefusedFileError as exc:
                        listing.unreadable.append(Unreadable(name, str(exc), refused=exc.reason))
                    except FactFormatError as exc:
                        listing.unreadable.append(Unreadable(name, str(exc)))
                    except FileNotFoundError:
                        continue  # removed while we listed
                    except OSError as exc:
                        raise MemoryStorageError(f"cannot read {name}: {exc}") from exc
        except OSError as exc:  # the folder itself: a link, not a directory, unreadable
            raise MemoryStorageError(f"cannot read the memory folder of {user!r}: {exc}") from exc
        return listing

    async def facts(self, user: str) -> FactListing:
        """The user's facts (deleted ones excluded) and the files that are not readable facts."""
        return await anyio.to_thread.run_sync(self._scan, user)

    def _signature(self, user: str) -> Signature:
        entries: list[tuple[str, int, int]] = []
        try:
            with open_folder(self.folder(user)) as folder_fd:
                if folder_fd is None:
                    return ()
                with os.scandir(folder_fd) as scan:
                    for entry in scan:
                        if entry.name.endswith(FACT_SUFFIX):
                            # The entry itself, links included: a link that appears is warned about.
                            stat = entry.stat(follow_symlinks=False)
                            entries.append((entry.name, stat.st_mtime_ns, stat.st_size))
        except OSError as exc:
            raise MemoryStorageError(f"cannot read the memory folder of {user!r}: {exc}") from exc
        return tuple(sorted(entries))

    async def signature(self, user: str) -> Signature:
        """A cheap summary that changes whenever a fact file is added, removed or rewritten."""
        return await anyio.to_thread.run_sync(self._signature, user)

    async def get(self, user: str, fact_id: str, *, whole: bool = False) -> Fact:
        """The fact; ``whole``: all of its file, even past MAX_FACT_FILE_BYTES (to move it unchanged)."""
        path = self._fact_path(user, fact_id)
        missing = FactNotFoundError(f"No fact {fact_id!r} in the memory of {user!r}.")

        def read() -> Fact:
            try:
                with open_folder(path.parent) as folder_fd:
                    if folder_fd is None:
                        raise missing
                    if whole:
                        return read_fact_at(folder_fd, path.name, max_bytes=None)
                    return read_fact_at(folder_fd, path.name)
            except FileNotFoundError:
                raise missing from None
            except FactFormatError as exc:
                raise MemoryStorageError(str(exc)) from exc
            except OSError as exc:
                raise MemoryStorageError(f"cannot read {path.name}: {exc}") from exc

        return await anyio.to_thread.run_sync(read)

    async def log(self, user: str, *, limit: int, fact_id: str | None = None) -> list[Commit]:
        """The folder's history, newest first; only the commits touching one fact when ``fact_id`` is given."""
        paths: list[str] = []
        if fact_id is not None:
            name = self._fact_path(user, fact_id).name
            paths = [name, f"{DELETED_DIR}/{name}"]
        return await (await self._checked(user)).log(limit=limit, paths=paths)

    # -- changing ---------------------------------------------------------------------------------

    async def _write(self, user: str, fact: Fact, *, action: str, reason: str) -> Fact:
        repository = await self._ensure(user)
        stored, data = fact.rendered()
        path = repository.path / stored.file_name
        try:
            change = await anyio.to_thread.run_sync(_put, path, data)
        except OSError as exc:
            raise MemoryStorageError(f"cannot write {stored.file_name}: {exc}") from exc
        await self._commit(repository, _message(action, stored, reason), change)
        return stored

    async def add(
        self,
        user: str,
        text: str,
        *,
        language: str | None,
        reason: str,
        conversation_id: str | None = None,
        source_message_id: str | None = None,
    ) -> Fact:
        """A new fact, committed as ``ADD``."""
        now = utc_now()
        fact = Fact(
            id=new_fact_id(),
            text=check_fact_text(text),
            created_at=now,
            updated_at=now,
            conversation_id=conversation_id,
            source_message_id=source_message_id,
            language=normalize_language(language),
        )
        return await self._write(user, fact, action="ADD", reason=reason)

    async def update(
        self,
        user: str,
        fact_id: str,
        text: str,
        *,
        language: str | None,
        reason: str,
        source_message_id: str | None = None,
    ) -> Fact:
        """The fact rewritten with ``text`` (its id and creation time kept), committed as ``UPDATE``."""
        current = await self.get(user, fact_id)
        fact = replace(
            current,
            text=check_fact_text(text),
            updated_at=utc_now(),
            language=normalize_language(language) if language else current.language,
            source_message_id=source_message_id or current.source_message_id,
        )
        return await self._write(user, fact, action="UPDATE", reason=reason)

    async def delete(self, user: str, fact_id: str, *, reason: str) -> Fact:
        """The fact moved to ``deleted/`` with ``reason``, committed as ``DELETE``; the moved fact."""
        # Whole: a hand-written file longer than what recall reads moves to deleted/ unchanged.
        current = await self.get(user, fact_id, whole=True)
        repository = await self._ensure(user)
        removed = replace(current, deleted_at=utc_now(), deleted_reason=" ".join(reason.split()) or "not given")
        stored, data = removed.rendered()

        def move() -> _Change:
            target_dir = repository.path / DELETED_DIR
            check_not_linked(target_dir)
            target_dir.mkdir(exist_ok=True)
            target = target_dir / stored.file_name
            if os.path.lexists(target):  # deleted before (re-added by hand since): keep both
                stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
                target = target_dir / f"{stored.id}.{stamp}{FACT_SUFFIX}"
            _write_atomically(target, data)
            source = repository.path / stored.file_name
            previous = _temporary(repository.path)
            try:
                source.replace(previous)  # out of git's sight, back with one rename
            except OSError:
                target.unlink(missing_ok=True)
                raise

            def undo() -> None:
                os.replace(previous, source)
                target.unlink(missing_ok=True)

            return _Change(undo=undo, settle=lambda: previous.unlink(missing_ok=True))

        try:
            change = await anyio.to_thread.run_sync(move)
        except OSError as exc:
            raise MemoryStorageError(f"cannot move {stored.file_name} to {DELETED_DIR}/: {exc}") from exc
        await self._commit(repository, _message("DELETE", stored, reason), change)
        return stored

    async def commit_hand_edits(self, user: str) -> list[str]:
        """Commit what a person changed in the folder since the last commit (``EDIT:``); the paths."""
        repository = await self._checked(user)
        if not await anyio.Path(repository.path / ".git").exists():
            return []
        changed = [path for path in await repository.changed_paths() if not path.startswith(_TEMP_PREFIX)]
        if not changed:
            return []
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        # None: git's index only lagged the folder (a commit taken back leaves it so), nothing was edited.
        if await repository.commit_all(f"EDIT: {shown}\n\nWhy: changed by hand in the memory folder\n") is None:
            return []
        return changed

    async def wipe(self, user: str) -> bool:
        """Remove the user's folder, history included; False when there was none."""
        folder = self.folder(user)

        def remove() -> bool:
            if folder.is_symlink():  # the link goes, never what it points to
                folder.unlink()
                return True
            if not folder.exists():
                return False
            shutil.rmtree(folder)
            return True

        try:
            return await anyio.to_thread.run_sync(remove)
        except OSError as exc:
            raise MemoryStorageError(f"cannot remove the memory of {user!r}: {exc}") from exc

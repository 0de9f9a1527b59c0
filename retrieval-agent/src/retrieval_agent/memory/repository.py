"""The memory folders: MEMORY_PATH/<user>/<id>.md, one fact per file, each folder its own Git repository.

Every change is a commit authored by "memory" whose subject starts with what happened (``ADD:``,
``UPDATE:``, ``DELETE:``, ``EDIT:`` for changes a person made by hand) and whose body says why, so
``git log`` reads as the memory's history and ``git revert`` undoes one step. A deleted fact is moved
to ``deleted/`` with the reason in its front matter, never destroyed. Files are written whole to a
temporary name and renamed, so a crash never leaves half a fact behind.

The caller serialises the changes of one user (the service holds a lock per user).
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import anyio.to_thread

from retrieval_agent.adapters.git import Commit, GitRepository
from retrieval_agent.errors import FactNotFoundError, InvalidMemoryRequestError, MemoryStorageError
from retrieval_agent.memory.facts import (
    DELETED_DIR,
    FACT_SUFFIX,
    Fact,
    FactFormatError,
    check_user,
    is_fact_id,
    new_fact_id,
    normalize_language,
    read_fact,
    utc_now,
)
from retrieval_agent.memory.limits import MAX_FACT_CHARS

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


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f"{_TEMP_PREFIX}{uuid.uuid4().hex}")
    try:
        with temporary.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(path)
    finally:
        temporary.unlink(missing_ok=True)


class FactRepository:
    """Facts of every user under ``root``."""

    def __init__(self, root: Path, git_executable: str) -> None:
        self.root = root
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

    async def _ensure(self, user: str) -> GitRepository:
        repository = self._repository(user)
        await repository.ensure()
        ignore = anyio.Path(repository.path / ".gitignore")
        if not await ignore.exists():
            await ignore.write_text(_GITIGNORE)
            await repository.commit_all(f"INIT: the memory of {user}\n")
        return repository

    # -- reading ----------------------------------------------------------------------------------

    def _scan(self, user: str) -> FactListing:
        folder = self.folder(user)
        listing = FactListing()
        if not folder.is_dir():
            return listing
        for path in sorted(folder.glob(f"*{FACT_SUFFIX}")):
            try:
                listing.facts.append(read_fact(path))
            except FactFormatError as exc:
                listing.unreadable.append(Unreadable(path.name, str(exc)))
            except FileNotFoundError:
                continue  # removed while we listed
            except OSError as exc:
                raise MemoryStorageError(f"cannot read {path.name}: {exc}") from exc
        return listing

    async def facts(self, user: str) -> FactListing:
        """The user's facts (deleted ones excluded) and the files that are not readable facts."""
        return await anyio.to_thread.run_sync(self._scan, user)

    def _signature(self, user: str) -> Signature:
        folder = self.folder(user)
        if not folder.is_dir():
            return ()
        entries: list[tuple[str, int, int]] = []
        with os.scandir(folder) as scan:
            for entry in scan:
                if entry.name.endswith(FACT_SUFFIX) and entry.is_file():
                    stat = entry.stat()
                    entries.append((entry.name, stat.st_mtime_ns, stat.st_size))
        return tuple(sorted(entries))

    async def signature(self, user: str) -> Signature:
        """A cheap summary that changes whenever a fact file is added, removed or rewritten."""
        return await anyio.to_thread.run_sync(self._signature, user)

    async def get(self, user: str, fact_id: str) -> Fact:
        path = self._fact_path(user, fact_id)

        def read() -> Fact:
            try:
                return read_fact(path)
            except FileNotFoundError:
                raise FactNotFoundError(f"No fact {fact_id!r} in the memory of {user!r}.") from None
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
        return await self._repository(user).log(limit=limit, paths=paths)

    # -- changing ---------------------------------------------------------------------------------

    async def _write(self, user: str, fact: Fact, *, action: str, reason: str) -> Fact:
        repository = await self._ensure(user)
        stored, data = fact.rendered()
        path = repository.path / stored.file_name
        try:
            await anyio.to_thread.run_sync(_write_atomically, path, data)
        except OSError as exc:
            raise MemoryStorageError(f"cannot write {stored.file_name}: {exc}") from exc
        await repository.commit_all(_message(action, stored, reason))
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
        current = await self.get(user, fact_id)
        repository = await self._ensure(user)
        removed = replace(current, deleted_at=utc_now(), deleted_reason=" ".join(reason.split()) or "not given")
        stored, data = removed.rendered()

        def move() -> None:
            target_dir = repository.path / DELETED_DIR
            target_dir.mkdir(exist_ok=True)
            target = target_dir / stored.file_name
            if target.exists():  # deleted before (re-added by hand since): keep both
                stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
                target = target_dir / f"{stored.id}.{stamp}{FACT_SUFFIX}"
            _write_atomically(target, data)
            (repository.path / stored.file_name).unlink()

        try:
            await anyio.to_thread.run_sync(move)
        except OSError as exc:
            raise MemoryStorageError(f"cannot move {stored.file_name} to {DELETED_DIR}/: {exc}") from exc
        await repository.commit_all(_message("DELETE", stored, reason))
        return stored

    async def commit_hand_edits(self, user: str) -> list[str]:
        """Commit what a person changed in the folder since the last commit (``EDIT:``); the paths."""
        if not await anyio.Path(self.folder(user) / ".git").exists():
            return []
        repository = self._repository(user)
        changed = [path for path in await repository.changed_paths() if not path.startswith(_TEMP_PREFIX)]
        if not changed:
            return []
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        await repository.commit_all(f"EDIT: {shown}\n\nWhy: changed by hand in the memory folder\n")
        return changed

    async def wipe(self, user: str) -> bool:
        """Remove the user's folder, history included; False when there was none."""
        folder = self.folder(user)

        def remove() -> bool:
            if not folder.exists():
                return False
            shutil.rmtree(folder)
            return True

        try:
            return await anyio.to_thread.run_sync(remove)
        except OSError as exc:
            raise MemoryStorageError(f"cannot remove the memory of {user!r}: {exc}") from exc

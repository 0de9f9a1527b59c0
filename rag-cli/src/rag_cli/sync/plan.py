"""What a sync compares and decides: the source, the identity of a synced file, the plan against the
knowledge base's listing, and the report."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from ingestion_service.api.models import DocumentView
from rag_cli.ignores import IgnoreRules

SYNC_SOURCE = "sync_source"
SYNC_PATH = "sync_path"
INGEST_TIMEOUT = httpx.Timeout(900.0, connect=10.0)
HASH_WORKERS = 4
# A folder that never goes quiet (a log being appended to) is still synced at least this often.
MAX_BATCH_MS = 60_000
# How long the watcher thread blocks before it looks at the stop flag again (bounds Ctrl-C latency).
WATCH_TIMEOUT_MS = 1_000
# How often a watched folder that was removed is looked for again.
FOLDER_RETURN_POLL_S = 1.0

Action = Literal["read", "add", "change", "remove"]


class SourceError(Exception):
    """The source argument is unusable (exit 2)."""


class SyncAbortedError(Exception):
    """The sync could not be planned: the source or the knowledge base could not be listed."""


@dataclass(frozen=True, slots=True)
class FolderSource:
    """A local folder (resolved)."""

    root: Path

    @property
    def uri(self) -> str:
        return self.root.as_uri()


@dataclass(frozen=True, slots=True)
class S3Source:
    """``s3://bucket/prefix``; ``prefix`` has no leading or trailing slash ("" = the whole bucket)."""

    bucket: str
    prefix: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    @property
    def key_prefix(self) -> str:
        # "docs" must not match "docs2/x": list under "docs/".
        return f"{self.prefix}/" if self.prefix else ""


Source = FolderSource | S3Source


def parse_source(text: str) -> Source:
    """A folder path or ``s3://bucket[/prefix]``; :class:`SourceError` when it is neither."""
    if text.startswith("s3://"):
        bucket, _, prefix = text.removeprefix("s3://").partition("/")
        if not bucket:
            raise SourceError(f"{text}: no bucket name (s3://bucket/prefix)")
        return S3Source(bucket, prefix.strip("/"))
    path = Path(text).expanduser()
    if not path.exists():
        raise SourceError(f"no such folder: {text}")
    if not path.is_dir():
        raise SourceError(f"{text} is not a folder (rag sync keeps a folder or an s3:// prefix in step)")
    return FolderSource(path.resolve())


def sync_file_id(root_uri: str, relative_path: str) -> str:
    """The ``file_id`` of ``relative_path`` (POSIX) under ``root_uri``."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{root_uri.rstrip('/')}/{relative_path}"))


def sync_attributes(root_uri: str, relative_path: str) -> dict[str, Any]:
    """The marks sync writes on each of its documents."""
    return {SYNC_SOURCE: root_uri, SYNC_PATH: relative_path}


def is_hidden(relative_path: str) -> bool:
    """A file or folder whose name starts with "." anywhere below the root."""
    return any(part.startswith(".") for part in relative_path.split("/"))


@dataclass(frozen=True, slots=True)
class SourceEntry:
    """One file of the source, as the plan compares it."""

    relative_path: str  # POSIX, relative to the root
    content_hash: str | None = None  # folder: sha256 of the bytes
    s3_key: str | None = None
    s3_etag: str | None = None
    size: int | None = None
    error: str | None = None  # could not be read: a failure, never a removal


@dataclass(frozen=True, slots=True)
class SyncPlan:
    """What a sync will do; entries sorted by path."""

    root_uri: str
    added: tuple[SourceEntry, ...] = ()
    changed: tuple[SourceEntry, ...] = ()
    unchanged: tuple[SourceEntry, ...] = ()
    removed: tuple[DocumentView, ...] = ()
    failed: tuple[SourceEntry, ...] = ()


def _etag(value: str | None) -> str | None:
    # S3 sends the ETag quoted; a service may store it either way.
    return value.strip('"') if value else None


def _unchanged(entry: SourceEntry, stored: DocumentView, root_uri: str) -> bool:
    marked = stored.attributes.get(SYNC_SOURCE) == root_uri and stored.attributes.get(SYNC_PATH) == entry.relative_path
    if not marked:
        return False
    if entry.content_hash is not None:
        return stored.content_hash == entry.content_hash
    return entry.s3_etag is not None and stored.s3_key == entry.s3_key and _etag(stored.s3_etag) == _etag(entry.s3_etag)


def plan_sync(
    local_entries: Iterable[SourceEntry],
    remote_documents: Iterable[DocumentView],
    root_uri: str,
    *,
    force: bool = False,
) -> SyncPlan:
    """Compare the source with the knowledge base (pure: no I/O); see the module doc for the rules."""
    remote = list(remote_documents)
    by_id = {document.file_id: document for document in remote}
    present: set[str] = set()
    added: list[SourceEntry] = []
    changed: list[SourceEntry] = []
    unchanged: list[SourceEntry] = []
    failed: list[SourceEntry] = []
    for entry in sorted(local_entries, key=lambda item: item.relative_path):
        file_id = sync_file_id(root_uri, entry.relative_path)
        present.add(file_id)
        stored = by_id.get(file_id)
        if entry.error is not None:
            failed.append(entry)
        elif stored is None:
            added.append(entry)
        elif not force and _unchanged(entry, stored, root_uri):
            unchanged.append(entry)
        else:
            changed.append(entry)
    removed: dict[str, DocumentView] = {}
    for document in remote:
        if document.file_id not in present and document.attributes.get(SYNC_SOURCE) == root_uri:
            removed.setdefault(document.file_id, document)
    return SyncPlan(
        root_uri=root_uri,
        added=tuple(added),
        changed=tuple(changed),
        unchanged=tuple(unchanged),
        removed=tuple(sorted(removed.values(), key=document_path)),
        failed=tuple(failed),
    )


def document_path(document: DocumentView) -> str:
    """How a stored document is named in the output: its sync path, else its name, else its id."""
    path = document.attributes.get(SYNC_PATH)
    return path if isinstance(path, str) and path else document.name or document.file_id


@dataclass(frozen=True, slots=True)
class Failure:
    """One file that did not sync, and why."""

    path: str
    action: Action
    error: str


@dataclass
class SyncReport:
    """What a sync did (or, for a dry run, would do)."""

    root_uri: str
    collection: str
    dry_run: bool = False
    added: list[str] = field(default_factory=lambda: list[str]())
    changed: list[str] = field(default_factory=lambda: list[str]())
    unchanged: list[str] = field(default_factory=lambda: list[str]())
    removed: list[str] = field(default_factory=lambda: list[str]())
    failures: list[Failure] = field(default_factory=lambda: list[Failure]())
    # Files the service read as no document (a thumbnail cache, a binary): noted, not failed.
    skipped: list[str] = field(default_factory=lambda: list[str]())

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def touched(self) -> bool:
        """Something was (or would be) added, changed or removed, or failed."""
        return bool(self.added or self.changed or self.removed or self.failures)

    def counts(self) -> dict[str, int]:
        return {
            "added": len(self.added),
            "changed": len(self.changed),
            "unchanged": len(self.unchanged),
            "removed": len(self.removed),
            "failed": len(self.failures),
        }

    def sort(self) -> None:
        for paths in (self.added, self.changed, self.unchanged, self.removed, self.skipped):
            paths.sort()
        self.failures.sort(key=lambda failure: failure.path)


@dataclass(frozen=True, slots=True)
class SyncOptions:
    """What ``rag sync`` was asked for, besides the source and the service."""

    collection: str
    user_id: str = "rag-cli"
    concurrency: int = 2
    force: bool = False
    dry_run: bool = False
    s3_endpoint_url: str | None = None
    # A folder's ignore rules besides the defaults and its ignore files (rag_cli.ignores).
    ignore_rules: IgnoreRules = field(default_factory=IgnoreRules)

"""``rag sync``: keep a folder or an S3 bucket prefix in step with one knowledge base.

Identity rules (they decide what "the same document" means, so changing them orphans documents):

- The source's ``root_uri`` is ``file:///abs/folder`` (``Path.resolve().as_uri()``) or
  ``s3://bucket/prefix``, normalised without a trailing slash.
- A synced file's ``file_id`` is ``uuid5(NAMESPACE_URL, f"{root_uri}/{relative_posix_path}")``, so the
  same folder synced again maps to the same documents. For a path that needs no percent-encoding
  this is also the id ``rag ingest`` gives the file, so a folder ingested before is adopted, not
  duplicated.
- Every document sync writes carries ``attributes = {"sync_source": root_uri, "sync_path":
  relative_path}``. "Removed" is computed only among the knowledge base's documents whose
  ``attributes.sync_source`` equals this root: documents others put in the knowledge base (Open
  WebUI uploads, other folders, other prefixes) are never deleted.

What is compared (against ``GET /api/v1/documents``; nothing is uploaded for an unchanged file):

- Folder: every file under the root, recursively, hidden files and folders skipped (as ``rag
  ingest`` does). Unchanged = the listing's ``content_hash`` equals the file's sha256 (hashed,
  streamed, in worker threads). Changed = same ``file_id``, different hash. New = ``file_id`` not listed.
- S3: every object under the prefix (``list_objects_v2``), folder markers (keys ending in "/") and
  hidden names skipped. Unchanged = the listing's ``s3_key`` and ``s3_etag`` equal the object's, so
  the object is not even read; otherwise the service is asked to ingest it by key (JSON mode).
- Either way a listed document must also carry this root's marks to count as unchanged (an adopted
  ``rag ingest`` document is sent once so it gets them), and a file sent that the service answers
  ``unchanged: true`` (same bytes under the same settings: nothing re-embedded) counts as unchanged.
- ``force`` sends every file with ``force=true`` (the service re-extracts and re-embeds).

A failure (HTTP error, unreadable file, failed delete) is collected with its error text and does not
stop the others; a file that could not be read is never taken for removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpx
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from rag_cli.client import (
    IngestReply,
    RequestFailedError,
    StoredDocument,
    delete_document,
    ingest_s3_object,
    list_documents,
    upload_file,
)
from rag_cli.config import Endpoint

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

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
    removed: tuple[StoredDocument, ...] = ()
    failed: tuple[SourceEntry, ...] = ()


def _etag(value: str | None) -> str | None:
    # S3 sends the ETag quoted; a service may store it either way.
    return value.strip('"') if value else None


def _unchanged(entry: SourceEntry, stored: StoredDocument, root_uri: str) -> bool:
    marked = stored.attributes.get(SYNC_SOURCE) == root_uri and stored.attributes.get(SYNC_PATH) == entry.relative_path
    if not marked:
        return False
    if entry.content_hash is not None:
        return stored.content_hash == entry.content_hash
    return entry.s3_etag is not None and stored.s3_key == entry.s3_key and _etag(stored.s3_etag) == _etag(entry.s3_etag)


def plan_sync(
    local_entries: Iterable[SourceEntry],
    remote_documents: Iterable[StoredDocument],
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
    removed: dict[str, StoredDocument] = {}
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


def document_path(document: StoredDocument) -> str:
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
        for paths in (self.added, self.changed, self.unchanged, self.removed):
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


# --- listing the source -------------------------------------------------------------------------


def _digest(path: Path) -> tuple[str, int]:
    """sha256 (streamed) and size of one file; blocking, so it runs in a worker thread."""
    with path.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
        return digest, os.fstat(handle.fileno()).st_size


def _is_file_entry(path: Path) -> bool:
    """A regular file, or a link that does not lead to a folder.

    A link whose target is missing or cannot be reached stays a file of the folder: reading it then
    fails and is reported, where leaving it out would take its document for removed.
    """
    try:
        if path.is_symlink():
            return not path.is_dir()
        return path.is_file()
    except OSError:  # cannot even be looked at: the read fails and says why
        return True


def folder_files(root: Path, scope: Collection[str] | None = None) -> list[str]:
    """Relative POSIX paths of the non-hidden files under ``root`` (only under ``scope``'s paths if given).

    Links that lead nowhere are listed too (see :func:`_is_file_entry`)."""
    starts = [root] if scope is None else [root / relative for relative in scope]
    found: set[str] = set()
    for start in starts:
        if _is_file_entry(start):
            candidates: Iterable[Path] = [start]
        elif start.is_dir():
            candidates = (path for path in start.rglob("*") if _is_file_entry(path))
        else:
            continue
        for path in candidates:
            relative = path.relative_to(root).as_posix()
            if not is_hidden(relative):
                found.add(relative)
    return sorted(found)


def _list_folder(root: Path, scope: Collection[str] | None) -> list[str]:
    if not root.is_dir():
        # A vanished root (an unmounted disk) must not read as "every file was removed".
        raise SyncAbortedError(f"{root} is not a folder any more")
    return folder_files(root, scope)


async def _scan_folder(
    source: FolderSource, scope: Collection[str] | None, progress: Progress | None
) -> list[SourceEntry]:
    relatives = await asyncio.to_thread(_list_folder, source.root, scope)
    task: TaskID | None = progress.add_task("", total=len(relatives), verb="hash") if progress else None
    gate = asyncio.Semaphore(HASH_WORKERS)

    async def one(relative: str) -> SourceEntry:
        path = source.root / relative
        async with gate:
            try:
                digest, size = await asyncio.to_thread(_digest, path)
            except OSError as exc:
                return SourceEntry(relative, error=f"cannot read file: {exc}")
            finally:
                if progress is not None and task is not None:
                    progress.update(task, advance=1, description=escape(relative))
        return SourceEntry(relative, content_hash=digest, size=size)

    return list(await asyncio.gather(*(one(relative) for relative in relatives)))


def _s3_endpoint(endpoint_url: str | None) -> tuple[str, str] | None:
    """Where the S3 endpoint comes from and its value, in the order the listing uses; None: AWS itself."""
    candidates = [("--s3-endpoint-url", endpoint_url)]
    candidates += [
        (name, os.environ.get(name)) for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "S3_ENDPOINT_URL")
    ]
    return next(((origin, value) for origin, value in candidates if value), None)


def check_s3_endpoint(endpoint_url: str | None) -> None:
    """A :class:`SourceError` naming the flag or variable when boto3 would refuse the endpoint URL."""
    from botocore.utils import is_valid_endpoint_url, is_valid_ipv6_endpoint_url

    found = _s3_endpoint(endpoint_url)
    if found is None:
        return
    origin, value = found
    # The check boto3 makes when it builds the client (a bare ValueError there, mid-sync).
    if not (is_valid_endpoint_url(value) or is_valid_ipv6_endpoint_url(value)):
        raise SourceError(f"{origin} {value!r} is not a valid endpoint URL (http(s)://host[:port])")


def _s3_client(endpoint_url: str | None) -> S3Client:
    import boto3
    from botocore.config import Config

    # The standard AWS settings first (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_REGION, ~/.aws),
    # then the S3_* variables `rag dev` and the services read, so one shell serves both.
    standard_endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    endpoint = endpoint_url or (None if standard_endpoint else os.environ.get("S3_ENDPOINT_URL")) or None
    access = secret = None
    if not os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("S3_ACCESS_KEY_ID"):
        access, secret = os.environ.get("S3_ACCESS_KEY_ID"), os.environ.get("S3_SECRET_ACCESS_KEY")
    session = boto3.session.Session()
    config = Config(
        region_name=session.region_name or os.environ.get("S3_REGION") or "us-east-1",
        connect_timeout=10,
        read_timeout=60,
        retries={"max_attempts": 3, "mode": "standard"},
        s3={"addressing_style": "path"},  # what MinIO needs, as the ingestion service does
        signature_version="s3v4",
    )
    client: S3Client = session.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=access, aws_secret_access_key=secret, config=config
    )
    return client


def list_s3_objects(source: S3Source, endpoint_url: str | None) -> list[SourceEntry]:
    """Every object under the prefix (blocking: call it in a worker thread)."""
    from botocore.exceptions import BotoCoreError, ClientError

    entries: list[SourceEntry] = []
    prefix = source.key_prefix
    try:
        client = _s3_client(endpoint_url)
        try:
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=source.bucket, Prefix=prefix):
                if "KeyCount" not in page:
                    # Not S3 (a web page answering 200 parses as an empty page): that must not read as
                    # "every object was removed".
                    raise SyncAbortedError(
                        f"cannot list {source.uri}: the endpoint did not answer with an S3 object listing"
                    )
                for item in page.get("Contents", []):
                    key = item.get("Key", "")
                    relative = key[len(prefix) :]
                    if not relative or key.endswith("/") or is_hidden(relative):
                        continue  # folder markers and hidden names
                    entries.append(SourceEntry(relative, s3_key=key, s3_etag=item.get("ETag"), size=item.get("Size")))
        finally:
            client.close()
    except ClientError as exc:
        error: Any = exc.response.get("Error", {})
        raise SyncAbortedError(
            f"cannot list {source.uri}: {error.get('Code', 'unknown')} {error.get('Message', '')}".strip()
        ) from exc
    except BotoCoreError as exc:
        raise SyncAbortedError(f"cannot list {source.uri}: {exc}") from exc
    return entries


async def scan_source(
    source: Source, options: SyncOptions, scope: Collection[str] | None = None, progress: Progress | None = None
) -> list[SourceEntry]:
    """The source's files as the plan compares them (``scope``: only these relative paths, folders only)."""
    if isinstance(source, FolderSource):
        return await _scan_folder(source, scope, progress)
    return await asyncio.to_thread(list_s3_objects, source, options.s3_endpoint_url)


# --- running a sync -----------------------------------------------------------------------------


def _progress(console: Console, *, transient: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.fields[verb]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=transient,
    )


async def _send(
    client: httpx.AsyncClient, endpoint: Endpoint, source: Source, entry: SourceEntry, options: SyncOptions
) -> IngestReply:
    file_id = sync_file_id(source.uri, entry.relative_path)
    attributes = sync_attributes(source.uri, entry.relative_path)
    if isinstance(source, FolderSource):
        return await upload_file(
            client,
            endpoint,
            source.root / entry.relative_path,
            file_id=file_id,
            collection=options.collection,
            user_id=options.user_id,
            force=options.force,
            attributes=attributes,
        )
    key = entry.s3_key or f"{source.key_prefix}{entry.relative_path}"
    return await ingest_s3_object(
        client,
        endpoint,
        bucket=source.bucket,
        key=key,
        file_id=file_id,
        filename=key.rsplit("/", 1)[-1],
        collection=options.collection,
        user_id=options.user_id,
        force=options.force,
        attributes=attributes,
    )


def planned_report(plan: SyncPlan, collection: str) -> SyncReport:
    """A dry run's report: what :func:`apply_plan` would do."""
    return SyncReport(
        root_uri=plan.root_uri,
        collection=collection,
        dry_run=True,
        added=[entry.relative_path for entry in plan.added],
        changed=[entry.relative_path for entry in plan.changed],
        unchanged=[entry.relative_path for entry in plan.unchanged],
        removed=[document_path(document) for document in plan.removed],
        failures=[Failure(entry.relative_path, "read", entry.error or "unreadable") for entry in plan.failed],
    )


async def apply_plan(
    plan: SyncPlan,
    source: Source,
    endpoint: Endpoint,
    options: SyncOptions,
    *,
    client: httpx.AsyncClient,
    progress: Progress | None = None,
) -> SyncReport:
    """Ingest the added and changed files and delete the removed ones, ``options.concurrency`` at a time."""
    report = SyncReport(
        root_uri=plan.root_uri,
        collection=options.collection,
        unchanged=[entry.relative_path for entry in plan.unchanged],
        failures=[Failure(entry.relative_path, "read", entry.error or "unreadable") for entry in plan.failed],
    )
    total = len(plan.added) + len(plan.changed) + len(plan.removed)
    task: TaskID | None = progress.add_task("", total=total, verb="sync") if progress and total else None
    gate = asyncio.Semaphore(options.concurrency)

    def advance(path: str) -> None:
        if progress is not None and task is not None:
            progress.update(task, advance=1, description=escape(path))

    async def ingest(entry: SourceEntry, action: Literal["add", "change"]) -> None:
        async with gate:
            reply = await _send(client, endpoint, source, entry, options)
        if not reply.ok:
            report.failures.append(Failure(entry.relative_path, action, reply.error or "failed"))
        elif reply.unchanged:
            # The service held the same bytes already: nothing was re-embedded.
            report.unchanged.append(entry.relative_path)
        else:
            (report.added if action == "add" else report.changed).append(entry.relative_path)
        advance(entry.relative_path)

    async def remove(document: StoredDocument) -> None:
        path = document_path(document)
        try:
            async with gate:
                await delete_document(client, endpoint, document.file_id, collection=options.collection)
        except RequestFailedError as exc:
            report.failures.append(Failure(path, "remove", str(exc)))
        except httpx.HTTPError as exc:
            report.failures.append(Failure(path, "remove", f"{type(exc).__name__}: {exc}"))
        else:
            report.removed.append(path)
        advance(path)

    await asyncio.gather(
        *(ingest(entry, "add") for entry in plan.added),
        *(ingest(entry, "change") for entry in plan.changed),
        *(remove(document) for document in plan.removed),
    )
    report.sort()
    return report


def _in_scope(relative_path: str, scope: Collection[str]) -> bool:
    return any(relative_path == path or relative_path.startswith(f"{path}/") for path in scope)


def _scoped(
    documents: Sequence[StoredDocument], root_uri: str, scope: Collection[str], entries: Sequence[SourceEntry]
) -> list[StoredDocument]:
    # A scoped (watch) run must neither remove nor compare documents outside the paths that changed.
    ids = {sync_file_id(root_uri, entry.relative_path) for entry in entries}
    kept: list[StoredDocument] = []
    for document in documents:
        path = document.attributes.get(SYNC_PATH)
        if document.file_id in ids or (
            document.attributes.get(SYNC_SOURCE) == root_uri and isinstance(path, str) and _in_scope(path, scope)
        ):
            kept.append(document)
    return kept


async def sync_once(
    source: Source,
    endpoint: Endpoint,
    options: SyncOptions,
    *,
    client: httpx.AsyncClient,
    console: Console,
    scope: Collection[str] | None = None,
    transient: bool = False,
) -> SyncReport:
    """List the knowledge base and the source, plan, and (unless a dry run) apply the plan.

    ``scope``: only these relative paths (files or folders) of a folder source, as ``--watch`` reports them.
    ``transient``: the progress bars vanish when done (watch rounds, which print only what changed).
    Raises :class:`SyncAbortedError` when either side cannot be listed (nothing is changed then).
    """
    try:
        # The knowledge base first: a wrong key or a down service fails before a long hashing pass.
        remote = await list_documents(client, endpoint, collection=options.collection)
    except RequestFailedError as exc:
        if exc.status in {404, 405}:
            raise SyncAbortedError(
                f"{endpoint.url} has no document listing (GET /api/v1/documents: {exc}); "
                "rag sync needs an ingestion service that has one"
            ) from exc
        raise SyncAbortedError(f"cannot list the documents of {options.collection!r}: {exc}") from exc
    except httpx.HTTPError as exc:
        raise SyncAbortedError(f"cannot reach {endpoint.url}: {type(exc).__name__}: {exc}") from exc
    with _progress(console, transient=transient) as progress:
        entries = await scan_source(source, options, scope, progress)
        if scope is not None:
            remote = _scoped(remote, source.uri, scope, entries)
        plan = plan_sync(entries, remote, source.uri, force=options.force)
        if options.dry_run:
            return planned_report(plan, options.collection)
        return await apply_plan(plan, source, endpoint, options, client=client, progress=progress)


# --- output -------------------------------------------------------------------------------------


def summary_line(report: SyncReport) -> str:
    """``3 added, 1 changed, 0 unchanged, 0 removed, 0 failed`` (plain text, for logs and scripts)."""
    return ", ".join(f"{count} {name}" for name, count in report.counts().items())


_STYLES = {"added": "green", "changed": "cyan", "unchanged": "dim", "removed": "yellow", "failed": "red"}
_PLANNED = {"added": "to add", "changed": "to change", "removed": "to remove"}


def summary_table(report: SyncReport) -> Table:
    """One row per outcome with its count."""
    # Short: a table is as wide as its title; the summary line names the source.
    title = "Sync plan (dry run: nothing changed)" if report.dry_run else "Sync summary"
    table = Table(title=title, min_width=len(title) + 4)
    table.add_column("outcome")
    table.add_column("files", justify="right")
    for name, count in report.counts().items():
        label = _PLANNED.get(name, name) if report.dry_run else name
        style = _STYLES[name]
        table.add_row(f"[{style}]{label}[/{style}]" if count else label, str(count))
    return table


def files_table(report: SyncReport) -> Table | None:
    """Each added, changed, removed or failed file, with the failure's reason; None when there is none."""
    if not report.touched:
        return None
    table = Table(title="Files")
    table.add_column("outcome")
    table.add_column("path", overflow="fold")
    table.add_column("error", overflow="fold")
    for name, paths in (("added", report.added), ("changed", report.changed), ("removed", report.removed)):
        label = _PLANNED[name] if report.dry_run else name
        for path in paths:
            table.add_row(label, escape(path), "")
    for failure in report.failures:
        table.add_row(f"[red]failed ({failure.action})[/red]", escape(failure.path), escape(failure.error))
    return table


def print_report(console: Console, report: SyncReport, *, brief: bool = False) -> None:
    """The files table, then the summary (``brief``: a line instead of the table, for watch rounds)."""
    files = files_table(report)
    if files is not None:
        console.print(files)
    if not brief:
        console.print(summary_table(report))
    # One unwrapped line, whatever the terminal width: scripts and logs grep it.
    console.print(
        f"{'planned' if report.dry_run else 'synced'} {escape(report.root_uri)}: {summary_line(report)}",
        soft_wrap=True,
    )


# --- entry points -------------------------------------------------------------------------------


async def _sync_with_client(
    source: Source,
    endpoint: Endpoint,
    options: SyncOptions,
    console: Console,
    transport: httpx.AsyncBaseTransport | None,
) -> SyncReport:
    async with httpx.AsyncClient(timeout=INGEST_TIMEOUT, transport=transport) as client:
        return await sync_once(source, endpoint, options, client=client, console=console)


def _relative_paths(root: Path, changes: Iterable[tuple[Any, str]]) -> set[str]:
    relatives: set[str] = set()
    for _, raw in changes:
        try:
            relative = Path(raw).relative_to(root).as_posix()
        except ValueError:
            continue
        if relative not in {"", "."} and not is_hidden(relative):
            relatives.add(relative)
    return relatives


async def _round(
    source: Source,
    endpoint: Endpoint,
    options: SyncOptions,
    *,
    client: httpx.AsyncClient,
    console: Console,
    scope: Collection[str] | None,
    quiet: bool,
) -> None:
    try:
        report = await sync_once(
            source, endpoint, options, client=client, console=console, scope=scope, transient=quiet
        )
    except SyncAbortedError as exc:
        console.print(f"[red]rag sync: {escape(str(exc))}[/red]")
        return
    if report.touched or not quiet:
        print_report(console, report, brief=quiet)


async def watch_source(
    source: Source,
    endpoint: Endpoint,
    options: SyncOptions,
    *,
    console: Console,
    debounce_ms: int = 1_500,
    interval_s: float = 60.0,
    stop: asyncio.Event | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> None:
    """A full sync, then follow the source until ``stop`` is set (or the task is cancelled: Ctrl-C).

    A folder is watched with watchfiles: changes are gathered until the folder has been quiet for
    ``debounce_ms`` and only the paths they touched are synced again. An S3 prefix is listed again
    every ``interval_s`` seconds (a full, but cheap, sync: unchanged objects are never read).
    """
    if stop is None:
        stop = asyncio.Event()
    async with httpx.AsyncClient(timeout=INGEST_TIMEOUT, transport=transport) as client:

        async def sync_round(scope: Collection[str] | None, quiet: bool) -> None:
            await _round(source, endpoint, options, client=client, console=console, scope=scope, quiet=quiet)

        if isinstance(source, S3Source):
            await sync_round(None, False)
            console.print(f"watching {escape(source.uri)} (every {interval_s:g} s; Ctrl-C stops)")
            while not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), timeout=interval_s)
                except TimeoutError:
                    await sync_round(None, True)
            return
        await _watch_folder(source.root, sync_round, console=console, debounce_ms=debounce_ms, stop=stop)


SyncRound = Callable[[Collection[str] | None, bool], Awaitable[None]]


async def _watch_folder(
    root: Path, sync_round: SyncRound, *, console: Console, debounce_ms: int, stop: asyncio.Event
) -> None:
    """Follow the folder until ``stop``; a folder removed (or replaced) is waited for and watched afresh."""
    while not stop.is_set():
        # Off the event loop: the folder may sit on a mount that hangs.
        if not await asyncio.to_thread(root.is_dir):
            console.print(f"[yellow]rag sync: {escape(str(root))} is not a folder now; waiting for it[/yellow]")
            while not await asyncio.to_thread(root.is_dir):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=FOLDER_RETURN_POLL_S)
                if stop.is_set():
                    return
        await _follow_folder(root, sync_round, console=console, debounce_ms=debounce_ms, stop=stop)


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a folder, None when there is none: a recreated folder is another one."""
    try:
        status = path.stat()
    except OSError:
        return None
    return (status.st_dev, status.st_ino)


async def _follow_folder(
    root: Path, sync_round: SyncRound, *, console: Console, debounce_ms: int, stop: asyncio.Event
) -> None:
    """A full sync, then the changed paths, until ``stop`` or until the folder is removed or replaced
    (its watcher then sees nothing more: the caller watches the new one)."""
    from watchfiles import awatch

    identity = await asyncio.to_thread(_identity, root)
    # The watcher's own event: it sets it when cancelled, which must not stop the whole watch.
    watcher_stop = asyncio.Event()
    relay = asyncio.ensure_future(stop.wait())
    relay.add_done_callback(lambda _: watcher_stop.set())
    changes = awatch(
        root,
        # The root itself too: removing an empty folder reports nothing else.
        watch_filter=lambda _change, path: path == str(root) or bool(_relative_paths(root, [(None, path)])),
        # The watcher groups changes until none came for `step` ms: that is the quiet period.
        step=debounce_ms,
        debounce=max(MAX_BATCH_MS, 2 * debounce_ms),
        rust_timeout=WATCH_TIMEOUT_MS,
        stop_event=watcher_stop,
    )
    # The watcher starts before the full sync reads the folder, so a file written after that
    # read is a change it reports (it keeps what happens until it is first asked). Started
    # after the sync, it missed a file written in between until something else changed.
    following = asyncio.ensure_future(anext(changes))
    await asyncio.sleep(0)  # the step that registers the watcher's paths
    try:
        await sync_round(None, False)
        console.print(f"watching {escape(str(root))} (quiet period {debounce_ms} ms; Ctrl-C stops)")
        while True:
            try:
                batch = await following
            except StopAsyncIteration:  # the stop event ended the watcher
                return
            # The root's own event is its removal (or a new one in its place, which may even reuse the inode).
            if any(path == str(root) for _, path in batch) or await asyncio.to_thread(_identity, root) != identity:
                return
            scope = _relative_paths(root, batch)
            if scope:
                await sync_round(scope, True)
            following = asyncio.ensure_future(anext(changes))
    finally:
        relay.cancel()
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
            await following
        await changes.aclose()


# Signals that end a watch: Ctrl-C, and what `docker stop` / Kubernetes send.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def watch_until_signalled(
    source: Source,
    endpoint: Endpoint,
    options: SyncOptions,
    *,
    console: Console,
    debounce_ms: int = 1_500,
    interval_s: float = 60.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> None:
    """:func:`watch_source` until SIGINT or SIGTERM.

    A signal sets the stop event, which the folder watcher checks every quiet period and the S3
    poller waits on, and cancels a round in flight. The stop does not rest on cancellation alone:
    watchfiles runs its watcher in a worker thread under a task group it cancels itself every
    cycle, where a cancellation landing at that moment could be absorbed.
    """
    stop = asyncio.Event()
    watching = asyncio.ensure_future(
        watch_source(
            source,
            endpoint,
            options,
            console=console,
            debounce_ms=debounce_ms,
            interval_s=interval_s,
            stop=stop,
            transport=transport,
        )
    )

    def request_stop() -> None:
        stop.set()
        watching.cancel()

    loop = asyncio.get_running_loop()
    # A signal the parent set to be ignored (a background job's SIGINT) stays ignored.
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    handled = [signum for signum, handler in previous.items() if handler is not signal.SIG_IGN]
    for signum in handled:
        loop.add_signal_handler(signum, request_stop)
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await watching
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)
            handler = previous[signum]
            if handler is not None:
                signal.signal(signum, handler)


def run_sync(
    endpoint: Endpoint,
    source_text: str,
    options: SyncOptions,
    *,
    watch: bool = False,
    debounce_ms: int = 1_500,
    interval_s: float = 60.0,
    console: Console | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> int:
    """Entry point of ``rag sync``: 0 when everything synced, 1 when something failed, 2 for a bad source.

    With ``watch`` it runs until Ctrl-C and then returns 0 (each round reports its own failures).
    """
    console = console or Console()
    try:
        source = parse_source(source_text)
        if isinstance(source, S3Source):
            check_s3_endpoint(options.s3_endpoint_url)
    except SourceError as exc:
        console.print(f"[red]rag sync: {escape(str(exc))}[/red]")
        return 2
    if watch:
        # Ctrl-C (or SIGTERM) is how a watch ends; a Ctrl-C before the handlers are in place
        # arrives as KeyboardInterrupt.
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(
                watch_until_signalled(
                    source,
                    endpoint,
                    options,
                    console=console,
                    debounce_ms=debounce_ms,
                    interval_s=interval_s,
                    transport=transport,
                )
            )
        console.print("rag sync: stopped")
        return 0
    try:
        report = asyncio.run(_sync_with_client(source, endpoint, options, console, transport))
    except SyncAbortedError as exc:
        console.print(f"[red]rag sync: {escape(str(exc))}[/red]")
        return 1
    except KeyboardInterrupt:
        console.print("[yellow]rag sync: interrupted (what finished stays; run it again to finish)[/yellow]")
        return 130
    print_report(console, report)
    return 0 if report.ok else 1

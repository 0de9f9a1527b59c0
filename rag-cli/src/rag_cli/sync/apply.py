"""Running a plan: uploads, S3 ingests by key and deletes, a few at once, with progress."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from typing import Literal

import httpx
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from ingestion_service.api.models import DocumentView
from rag_cli.client import (
    IngestReply,
    RequestFailedError,
    delete_document,
    ingest_s3_object,
    list_documents,
    upload_file,
)
from rag_cli.config import Endpoint
from rag_cli.sync.listing import scan_source
from rag_cli.sync.plan import (
    SYNC_PATH,
    SYNC_SOURCE,
    Failure,
    FolderSource,
    Source,
    SourceEntry,
    SyncAbortedError,
    SyncOptions,
    SyncPlan,
    SyncReport,
    document_path,
    plan_sync,
    sync_attributes,
    sync_file_id,
)


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
            relative_path=entry.relative_path,
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
        relative_path=entry.relative_path,
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
        if reply.not_a_document:
            report.skipped.append(entry.relative_path)
        elif not reply.ok:
            report.failures.append(Failure(entry.relative_path, action, reply.error or "failed"))
        elif reply.unchanged:
            # The service held the same bytes already: nothing was re-embedded.
            report.unchanged.append(entry.relative_path)
        else:
            (report.added if action == "add" else report.changed).append(entry.relative_path)
        advance(entry.relative_path)

    async def remove(document: DocumentView) -> None:
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
    documents: Sequence[DocumentView], root_uri: str, scope: Collection[str], entries: Sequence[SourceEntry]
) -> list[DocumentView]:
    # A scoped (watch) run must neither remove nor compare documents outside the paths that changed.
    ids = {sync_file_id(root_uri, entry.relative_path) for entry in entries}
    kept: list[DocumentView] = []
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

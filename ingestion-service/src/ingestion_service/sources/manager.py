"""The registered sources: each one's state file in INGEST_STATE_DIR/sources, its syncs (on demand, on its
schedule, after registration) and its removal.

A sync lists the source, then ingests its items one after another through the ordinary runner
(INGEST_CONCURRENCY, versions, the unchanged fast path), each under ``item_file_id`` of its URI; then
it deletes the documents of items the source no longer has. Only the source's own documents are
touched: those of the items it listed before (one another source of the collection also lists is kept).
A source that cannot be listed ends ``failed`` and keeps its documents.

A sync interrupted by a shutdown or a crash stays ``pending``/``indexing`` in its file and runs again
from the start at the next start-up: unchanged items cost a hash and no embedding.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import uuid
from collections.abc import Sequence
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import anyio.to_thread

from ingestion_service.errors import (
    IngestAbortedError,
    IngestionError,
    PayloadTooLargeError,
    PipelineFailedError,
    ShuttingDownError,
    SourceExistsError,
    SourceNotFoundError,
    SourceSyncRunningError,
)
from ingestion_service.indexing.fingerprint import ingest_fingerprint
from ingestion_service.indexing.job import DocumentLabels, IngestJob
from ingestion_service.indexing.removal import delete_document
from ingestion_service.indexing.runner import IndexingRunner
from ingestion_service.indexing.versioning import RunVersion
from ingestion_service.intake.handoff import require_qdrant, wait_for_runner
from ingestion_service.intake.staging import (
    fetch_from_s3,
    fetch_url,
    identify_source,
    make_workdir,
    prepare_source,
    remove_workdir,
    upload_path,
)
from ingestion_service.jobs.engine import JobEngine, JobRun
from ingestion_service.jobs.reindex_state import StateFiles
from ingestion_service.runtime import ABORT_WAIT_SECONDS, ServiceRuntime
from ingestion_service.sources.listing import ListedItem, list_items
from ingestion_service.sources.model import (
    MAX_LISTED_FAILURES,
    ItemOutcome,
    SourceCounts,
    SourceFailure,
    SourceItem,
    SourceKind,
    SourceRecord,
    item_file_id,
)
from ingestion_service.sources.uris import normalised_uri, parse_s3
from shared_contract import ContractError

logger = logging.getLogger(__name__)

STATE_SUBDIR = "sources"
# How often the schedule is looked at.
SCHEDULE_TICK_SECONDS = 5.0
UNFINISHED = frozenset({"pending", "indexing"})


def _utc_now() -> datetime:
    return datetime.now(UTC)


class _Sync(JobRun):
    """A source and the task of its running sync (touched only on the event loop)."""

    def __init__(self, record: SourceRecord) -> None:
        super().__init__(record.source_id)
        self.record = record
        self.removing = False


class SourceManager:
    """The process's sources: registered through the API, loaded and resumed at start-up, stopped at shutdown."""

    def __init__(self, runtime: ServiceRuntime) -> None:
        self._runtime = runtime
        hooks = runtime.hooks
        self._now = hooks.source_clock or _utc_now
        self._tick_seconds = hooks.source_tick_seconds or SCHEDULE_TICK_SECONDS
        self._settings = runtime.settings
        self._files = StateFiles(runtime.settings.ingest_state_dir / STATE_SUBDIR, SourceRecord)
        self._sources: dict[str, _Sync] = {}
        self._engine: JobEngine[_Sync] = JobEngine("source-sync")
        self._schedule: asyncio.Task[None] | None = None

    # -- the API ----------------------------------------------------------------------------

    async def register(
        self,
        *,
        uri: str,
        kind: SourceKind,
        collection_name: str,
        schedule_minutes: int | None,
        max_pages: int | None,
        max_depth: int | None,
        include: list[str],
        exclude: list[str],
    ) -> SourceRecord:
        """Check and keep a source, then start its first sync (422 refused, 409 already kept)."""
        self._engine.refuse_if_closing()
        normal = await normalised_uri(self._settings, self._runtime.urls, uri, kind)
        for sync in self._sources.values():
            if sync.record.uri == normal and sync.record.collection_name == collection_name:
                raise SourceExistsError(sync.record.source_id)
        record = SourceRecord(
            source_id=uuid.uuid4().hex,
            uri=normal,
            kind=kind,
            collection_name=collection_name,
            target_index=self._settings.qdrant_index,
            schedule_minutes=schedule_minutes,
            max_pages=min(max_pages or self._settings.source_max_pages, self._settings.source_max_pages),
            max_depth=min(
                self._settings.source_max_depth if max_depth is None else max_depth, self._settings.source_max_depth
            ),
            include=include,
            exclude=exclude,
            created_at=self._now(),
        )
        sync = _Sync(record)
        self._sources[record.source_id] = sync
        await self._save(record)
        self._launch(sync)
        logger.info("source %s registered (%s)", record.source_id, kind, extra={"source_id": record.source_id})
        return record.model_copy(deep=True)

    def records(self) -> list[SourceRecord]:
        """Copies of every source, oldest first."""
        records = [sync.record.model_copy(deep=True) for sync in self._sources.values()]
        return sorted(records, key=lambda record: record.created_at)

    def get(self, source_id: str) -> SourceRecord:
        """A copy of the source (SOURCE_NOT_FOUND when unknown)."""
        return self._find(source_id).record.model_copy(deep=True)

    async def sync(self, source_id: str) -> SourceRecord:
        """Start a sync now (409 SOURCE_SYNC_RUNNING when one is pending or running)."""
        self._engine.refuse_if_closing()
        sync = self._find(source_id)
        if self._busy(sync):
            raise SourceSyncRunningError(f"source {source_id} is syncing")
        sync.record.state = "pending"
        await self._save(sync.record)
        self._launch(sync)
        return sync.record.model_copy(deep=True)

    async def remove(self, source_id: str) -> int:
        """Stop its sync, delete its documents and forget it; how many documents were deleted."""
        sync = self._find(source_id)
        sync.removing = True
        sync.stop(ShuttingDownError("source removed"))
        await self._engine.wait([sync], ABORT_WAIT_SECONDS)
        record = sync.record
        await require_qdrant(self._runtime)
        deleted = await self._delete_items(record, [item.file_id for item in record.items])
        del self._sources[source_id]
        await anyio.to_thread.run_sync(self._files.remove, [source_id])
        logger.info("source %s removed with %d documents", source_id, deleted, extra={"source_id": source_id})
        return deleted

    def _find(self, source_id: str) -> _Sync:
        sync = self._sources.get(source_id)
        if sync is None or sync.removing:
            raise SourceNotFoundError(f"no source {source_id!r}")
        return sync

    @staticmethod
    def _busy(sync: _Sync) -> bool:
        return sync.task is not None and not sync.task.done()

    # -- start-up and shutdown --------------------------------------------------------------

    async def start(self) -> None:
        """Load this index's sources, resume the syncs a restart interrupted and start the schedule."""
        for record in await anyio.to_thread.run_sync(self._files.load, self._settings.qdrant_index):
            sync = _Sync(record)
            self._sources[record.source_id] = sync
            if record.state in UNFINISHED:
                logger.info("source %s: its interrupted sync runs again", record.source_id)
                self._launch(sync)
        self._schedule = asyncio.create_task(self._schedule_loop(), name="source-schedule")

    async def shutdown(self) -> None:
        """Stop the schedule and the running syncs (they stay unfinished, so they run again at the next start)."""
        self._engine.close()
        if self._schedule is not None:
            self._schedule.cancel()
            with suppress(asyncio.CancelledError):
                await self._schedule
        for sync in self._sources.values():
            sync.stop(ShuttingDownError("service shutting down"))
        pending = await self._engine.wait(list(self._sources.values()), ABORT_WAIT_SECONDS)
        if pending:
            logger.warning("%d source syncs still stopping at shutdown; they run again at the next start", len(pending))

    async def _schedule_loop(self) -> None:
        while not self._engine.closing:
            await anyio.sleep(self._tick_seconds)
            now = self._now()
            for sync in list(self._sources.values()):
                due = sync.record.next_sync_at
                if due is not None and due <= now and not self._busy(sync) and not sync.removing:
                    sync.record.state = "pending"
                    self._launch(sync)

    # -- a sync -----------------------------------------------------------------------------

    def _launch(self, sync: _Sync) -> None:
        sync.scope = anyio.CancelScope()
        sync.control = None
        self._engine.launch(sync, self._run(sync))

    async def _run(self, sync: _Sync) -> None:
        record = sync.record
        failure: SourceFailure | None = None
        completed = False
        try:
            with sync.scope:
                await self._execute(sync)
                completed = True
        except IngestAbortedError:
            pass
        except IngestionError as exc:
            failure = SourceFailure(code=exc.code, error=exc.detail())
            logger.warning("source %s sync failed: %s: %s", record.source_id, exc.code, exc)
        except ContractError as exc:
            failure = SourceFailure(code=PipelineFailedError.code, error="Reading or writing the collection failed.")
            logger.error("source %s sync failed", record.source_id, exc_info=exc)
        except Exception as exc:  # a fault of the sync itself: recorded on the source and logged with its traceback
            failure = SourceFailure(code=PipelineFailedError.code, error=PipelineFailedError.public_message)
            logger.error("source %s sync failed", record.source_id, exc_info=exc)
        if sync.removing or not (completed or failure is not None):
            return  # removed, or stopped by the shutdown: the file keeps the unfinished state
        with anyio.CancelScope(shield=True):
            now = self._now()
            if failure is None and record.counts.seen > 0 and record.counts.failed == record.counts.seen:
                failure = record.failures[0].model_copy(update={"uri": None}) if record.failures else None
            record.state = "failed" if failure is not None else "indexed"
            record.error = failure
            record.last_synced_at = now
            if record.schedule_minutes is not None:
                record.next_sync_at = now + timedelta(minutes=record.schedule_minutes)
            await self._save(record)

    async def _execute(self, sync: _Sync) -> None:
        record = sync.record
        runner = await wait_for_runner(self._runtime)
        record.state, record.error = "indexing", None
        await self._save(record)
        workdir = await make_workdir(self._runtime)
        try:
            listed = await list_items(self._runtime, record, workdir)
        finally:
            await remove_workdir(self._runtime, workdir)
        counts = SourceCounts()
        failures: list[SourceFailure] = []
        fingerprint = ingest_fingerprint(self._settings, self._settings.extraction_engine)
        for item in listed:
            outcome, failure = await self._item(sync, runner, item, fingerprint)
            counts.count(outcome)
            if failure is not None and len(failures) < MAX_LISTED_FAILURES:
                failures.append(failure)
        current = [SourceItem(uri=item.uri, file_id=item_file_id(item.uri)) for item in listed]
        present = {item.file_id for item in current}
        gone = [item.file_id for item in record.items if item.file_id not in present]
        counts.removed = await self._delete_items(record, gone)
        record.items, record.counts, record.failures = current, counts, failures

    async def _item(
        self, sync: _Sync, runner: IndexingRunner, item: ListedItem, fingerprint: str
    ) -> tuple[ItemOutcome, SourceFailure | None]:
        record = sync.record
        file_id = item_file_id(item.uri)
        workdir = await make_workdir(self._runtime)
        try:
            existed = await self._runtime.index.head(file_id, record.collection_name) is not None
            job = await self._job(record, item, file_id, workdir, fingerprint)
            sync.control = runner.new_control()
            if sync.scope.cancel_called:
                sync.control.abort(ShuttingDownError("stopped"))
            outcome = await runner.ingest(job, limiter=self._runtime.limiter, control=sync.control)
        except IngestAbortedError:
            raise
        except IngestionError as exc:
            logger.warning("source %s: item failed: %s: %s", record.source_id, exc.code, exc)
            return "failed", SourceFailure(code=exc.code, error=exc.detail(), uri=item.uri)
        finally:
            sync.control = None
            await remove_workdir(self._runtime, workdir)
        if outcome.unchanged:
            return "unchanged", None
        return ("changed" if existed else "added"), None

    async def _job(
        self, record: SourceRecord, item: ListedItem, file_id: str, workdir: Path, fingerprint: str
    ) -> IngestJob:
        """The item staged in ``workdir`` and its ingest (as a ``url``, S3 or upload ingest builds it)."""
        runtime = self._runtime
        fetched_at = self._now().isoformat()
        name: str | None = None
        s3_origin: tuple[str, str] | None = None
        etag: str | None = None
        if item.local is not None:
            filename = item.local.name
            path = upload_path(workdir, filename)
            await self._copy(item.local, path, workdir)
        elif item.s3_key is not None:
            bucket = parse_s3(record.uri).bucket
            filename = item.s3_key.rsplit("/", 1)[-1]
            path = upload_path(workdir, filename)
            head = await fetch_from_s3(runtime, bucket, item.s3_key, path)
            s3_origin, etag = (bucket, item.s3_key), head.etag
        else:
            fetched = await fetch_url(runtime, item.uri, workdir)
            path, filename, name = fetched.path, fetched.filename, item.uri
        source = await prepare_source(runtime, path, filename)
        identity = await identify_source(
            source,
            s3_bucket=s3_origin[0] if s3_origin else None,
            s3_key=s3_origin[1] if s3_origin else None,
            s3_etag=etag,
        )
        return IngestJob(
            source=source,
            file_id=file_id,
            collection_name=record.collection_name,
            collection_type="file",
            user_id="",
            overwrite=True,
            run=RunVersion.new(),
            identity=identity,
            labels=DocumentLabels(),
            fingerprint=fingerprint,
            name=name,
            path=item.relative if record.kind in ("folder", "s3") else None,
            source_uri=item.uri,
            fetched_at=fetched_at,
        )

    async def _copy(self, source: Path, destination: Path, workdir: Path) -> None:
        limit = self._settings.max_upload_bytes
        size = await anyio.to_thread.run_sync(lambda: source.stat().st_size)
        if size > limit:
            raise PayloadTooLargeError(limit)
        self._runtime.scratch.reserve(workdir, size)
        await anyio.to_thread.run_sync(shutil.copyfile, source, destination)

    async def _delete_items(self, record: SourceRecord, file_ids: Sequence[str]) -> int:
        """Delete the documents of ``file_ids`` from the source's collection, but those another source of it
        lists; how many documents were deleted (DELETE_FAILED when the store fails)."""
        kept = {
            item.file_id
            for other in self._sources.values()
            if other.record.source_id != record.source_id and other.record.collection_name == record.collection_name
            for item in other.record.items
        }
        documents = 0
        for file_id in file_ids:
            if file_id in kept:
                continue
            chunks = await delete_document(
                self._runtime.index, self._runtime.originals, file_id, record.collection_name
            )
            documents += 1 if chunks else 0
        return documents

    async def _save(self, record: SourceRecord) -> None:
        text = record.model_dump_json(indent=2)
        try:
            await anyio.to_thread.run_sync(self._files.write, record.source_id, text)
        except OSError as exc:
            logger.error("source %s: saving its state failed (check INGEST_STATE_DIR): %s", record.source_id, exc)

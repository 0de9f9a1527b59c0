"""The originals of ingested files, versioned and deleted with their chunks.

A run keeps its file's bytes before it commits (``keep``), so a published version always has its
original; after the commit, a failed run or a delete, ``settle`` leaves only the live version's
original of that file (the one whose sha256 the file's head names). A run killed between the two
leaves an original no head names; the file's next ingest or delete removes it.

Runs of one file can interleave: an older run's ``settle`` may remove a newer run's original
before that one commits, so a committed run keeps its original again before it settles (``keep``
writes nothing when it is there).

ORIGINALS_MAX_BYTES caps the store: past it a file is indexed without its original (logged and
counted), since refusing the ingest would lose more than the page images. The running total is
read from the store once, then kept by this process; replicas sharing a bucket each count their
own writes on top of what they read at start.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from pathlib import Path

import anyio.to_thread

from ingestion_service.adapters.chunk_index import ChunkIndex
from ingestion_service.adapters.originals import OriginalKey, OriginalStore, Usage, version_of
from ingestion_service.documents.renderings import RENDERING_SUFFIX, rendering_path
from ingestion_service.indexing.job import IngestJob
from ingestion_service.metrics import IngestMetrics
from shared_contract import MetaKey

logger = logging.getLogger(__name__)


class Originals:
    """The service's originals: the store, its cap, and the versioning around it."""

    def __init__(
        self, store: OriginalStore, index: ChunkIndex, *, max_bytes: int, metrics: IngestMetrics | None = None
    ) -> None:
        self.store = store
        self._index = index
        self._max_bytes = max_bytes
        self._metrics = metrics
        self._used: int | None = None
        self._lock = threading.Lock()

    # -- the runs' side ---------------------------------------------------------------------

    @staticmethod
    def key_of(job: IngestJob) -> OriginalKey | None:
        """The job's original, None when its source is not the file's bytes (a reindex from stored text)."""
        if not job.source_is_original or job.identity is None:
            return None
        return OriginalKey(job.collection_name, job.file_id, job.identity.sha256)

    async def keep(self, job: IngestJob) -> bool:
        """Store the job's source under its sha256 unless it is there, and its PDF rendering when the run
        made one; False when the original is not kept (cap, no bytes)."""
        key = self.key_of(job)
        if key is None:
            return False
        kept = await anyio.to_thread.run_sync(self._keep, key, job.source.path)
        rendering = rendering_path(job.source.path)
        if kept and await anyio.to_thread.run_sync(rendering.is_file):
            await anyio.to_thread.run_sync(self._keep, replace(key, variant=RENDERING_SUFFIX), rendering)
        return kept

    def _keep(self, key: OriginalKey, source: Path) -> bool:
        if self.store.exists(key):
            return True
        size = source.stat().st_size
        with self._lock:
            if self._used is None:
                self._used = self.store.usage().bytes
            if self._used + size > self._max_bytes:
                full = True
            else:
                full = False
                self._used += size
        if full:
            logger.warning(
                "original not kept: ORIGINALS_MAX_BYTES (%d) is reached; the file is indexed without page images",
                self._max_bytes,
                extra={"file_id": key.file_id, "collection_name": key.collection_name},
            )
            if self._metrics is not None:
                self._metrics.ingest_originals_skipped.inc()
            return False
        try:
            self.store.put(key, source)
        except BaseException:
            self._release(size)
            raise
        return True

    async def settle(self, collection_name: str, file_id: str) -> None:
        """Remove every original of the file but the live version's (all of them when none is live)."""
        head = await self._index.head(file_id, collection_name)
        live = None if head is None else head.get(MetaKey.SOURCE_HASH)
        await anyio.to_thread.run_sync(self._prune, collection_name, file_id, live)

    def _prune(self, collection_name: str, file_id: str, live: object) -> None:
        freed = 0
        for name in self.store.versions(collection_name, file_id):
            if version_of(name) != live:
                freed += self.store.remove(collection_name, file_id, name)
        self._release(freed)

    async def forget_everywhere(self, file_id: str) -> None:
        """A DELETE of the file from every collection: its originals in every tenant."""
        freed = await anyio.to_thread.run_sync(self.store.remove_everywhere, file_id)
        self._release(freed)

    def _release(self, freed: int) -> None:
        if freed:
            with self._lock:
                if self._used is not None:
                    self._used = max(0, self._used - freed)

    # -- readers ----------------------------------------------------------------------------

    async def fetch(self, key: OriginalKey, destination: Path) -> bool:
        """Copy the original into ``destination``; False when it is not kept."""
        return await anyio.to_thread.run_sync(self.store.fetch, key, destination)

    async def usage(self, collection_name: str) -> Usage:
        """What the tenant's originals hold (the collection stats)."""
        return await anyio.to_thread.run_sync(self.store.usage, collection_name)

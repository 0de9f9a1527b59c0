"""A file's chunks in the shared collection: write, publish, sweep, delete, inspect, recover.

Everything goes through the storage port (``rag_runtime.store``), so the same code runs on a
Qdrant server and on the embedded engine. Store failures arrive as the contract's typed errors;
callers decide which wire code they become.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from qdrant_client import models

from rag_runtime.store import (
    ChunkPoint,
    ChunkStore,
    PointRecord,
    committed_file_filter,
    file_filter,
    match,
    pending_condition,
    read_newest_version,
    scroll_pages,
    tenant_condition,
)
from shared_contract import LIVE_STATE, PAYLOAD_META, MetaKey, meta_path
from shared_contract.schema import tenant_kind

_RECOVERY_PAGE = 1024
# A file has one committed head per tenant, two for the moment between publish and sweep.
_HEADS_PAGE = 64
# Tenants of one file read per facet when a delete names none (a file sits in a handful).
_FILE_TENANTS_PAGE = 1000
_RECOVERY_FIELDS = [meta_path(MetaKey.FILE_ID), meta_path(MetaKey.COLLECTION_NAME), meta_path(MetaKey.INGEST_SEQ)]


@dataclass(frozen=True)
class StoredChunk:
    """One point as the inspection API shows it."""

    point_id: str
    content: str
    meta: dict[str, Any]


@dataclass(frozen=True)
class RecoveryReport:
    """What start-up recovery removed."""

    pending_runs_removed: int
    stale_versions_removed: int


def _pending(point: ChunkPoint) -> ChunkPoint:
    meta = point.payload.get(PAYLOAD_META)
    if not isinstance(meta, Mapping) or MetaKey.LIVE_IN not in meta:
        return point
    kept = {key: value for key, value in meta.items() if key != MetaKey.LIVE_IN}
    return replace(point, payload={**point.payload, PAYLOAD_META: kept})


def _newest_meta(records: Sequence[PointRecord]) -> dict[str, Any] | None:
    metas = [dict(record.payload.get(PAYLOAD_META) or {}) for record in records]
    if not metas:
        return None
    return max(metas, key=lambda meta: _as_seq(meta.get(MetaKey.INGEST_SEQ)) or 0)


def _seq_condition(**bounds: int) -> models.FieldCondition:
    return models.FieldCondition(key=meta_path(MetaKey.INGEST_SEQ), range=models.Range(**bounds))


def _as_seq(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class ChunkIndex:
    """The versioning protocol's reads and writes (see ``indexing/versioning.py``)."""

    def __init__(self, store: ChunkStore) -> None:
        self.store = store

    async def write(self, points: Sequence[ChunkPoint]) -> None:
        """Write one batch of a run's (pending) points.

        A pending point never carries ``meta.live_in``, whatever its meta came from (a copy of another
        tenant's committed point, a document's own metadata): search filters on that key alone.
        """
        await self.store.upsert([_pending(point) for point in points])

    async def count(self, file_id: str, collection_name: str | None = None) -> int:
        """Committed points of ``file_id`` (one tenant or all): what readers see."""
        return await self.store.count(committed_file_filter(file_id, collection_name))

    async def count_newer(self, file_id: str, collection_name: str, ingest_seq: int) -> int:
        """Points of (file, tenant) written by a run with a larger ingest_seq, pending or not."""
        return await self.store.count(file_filter(file_id, collection_name, must=[_seq_condition(gt=ingest_seq)]))

    async def publish(
        self, file_id: str, collection_name: str, ingest_version: str, *, meta: Mapping[str, Any] | None = None
    ) -> None:
        """The atomic switch: one operation makes every point of this run visible to readers
        (and sets ``meta`` on them in the same operation)."""
        await self.store.set_payload(
            file_filter(file_id, collection_name, must=[match(MetaKey.INGEST_VERSION, ingest_version)]),
            {**(meta or {}), MetaKey.INGEST_STATE: LIVE_STATE, MetaKey.LIVE_IN: collection_name},
            key="meta",
        )

    async def delete_older(self, file_id: str, collection_name: str, ingest_seq: int) -> None:
        """Delete every point of (file, tenant) not written by a run with ingest_seq >= ``ingest_seq``.

        ``must_not`` (rather than a ``lt`` range) also removes points without an ingest_seq,
        e.g. ones written by older tooling.
        """
        await self.store.delete(file_filter(file_id, collection_name, must_not=[_seq_condition(gte=ingest_seq)]))

    async def delete_version(self, file_id: str, collection_name: str, ingest_version: str) -> None:
        """Delete the points one run wrote."""
        await self.store.delete(
            file_filter(file_id, collection_name, must=[match(MetaKey.INGEST_VERSION, ingest_version)])
        )

    async def count_version(self, file_id: str, collection_name: str, ingest_version: str) -> int:
        """Points one run wrote that are still stored, pending or not."""
        return await self.store.count(
            file_filter(file_id, collection_name, must=[match(MetaKey.INGEST_VERSION, ingest_version)])
        )

    async def delete_file(self, file_id: str, collection_name: str | None = None) -> int:
        """Delete a file's committed points (one tenant, or every tenant but long-term memory's
        ``memory-*``); returns how many. A run still writing keeps its pending points: its commit
        publishes them whole (a DELETE during an ingest is undone by that ingest), or it removes
        them itself, or start-up recovery does."""
        not_pending = [pending_condition()]
        if collection_name is not None:
            existing = await self.count(file_id, collection_name)
            await self.store.delete(file_filter(file_id, collection_name, must_not=not_pending))
            return existing
        # Qdrant has no prefix match, so name the tenants to delete from: a memory point is never selected,
        # even one written meanwhile. Memory tenants already seen are left out of the next facet, so every
        # full page makes progress.
        memory: list[str] = []
        deleted = 0
        while True:
            skip = [tenant_condition(memory)] if memory else []
            hits = await self.store.facet(
                meta_path(MetaKey.COLLECTION_NAME), file_filter(file_id, must_not=skip), limit=_FILE_TENANTS_PAGE
            )
            names = [str(hit.value) for hit in hits]
            memory += [name for name in names if tenant_kind(name) == "memory"]
            tenants = [name for name in names if tenant_kind(name) != "memory"]
            if tenants:
                in_tenants = [tenant_condition(tenants)]
                deleted += await self.store.count(file_filter(file_id, must=in_tenants, must_not=not_pending))
                await self.store.delete(file_filter(file_id, must=in_tenants, must_not=not_pending))
            if len(hits) < _FILE_TENANTS_PAGE:
                return deleted

    async def scroll(
        self, file_id: str, collection_name: str | None, *, limit: int, offset: str | None
    ) -> tuple[list[StoredChunk], str | None]:
        """One page of a file's committed points in id order, plus the cursor of the next page."""
        records, next_offset = await self.store.scroll(
            committed_file_filter(file_id, collection_name), limit=limit, offset=offset
        )
        chunks = [
            StoredChunk(
                point_id=record.point_id,
                content=str(record.payload.get("content") or ""),
                meta=dict(record.payload.get("meta") or {}),
            )
            for record in records
        ]
        return chunks, next_offset

    async def head(self, file_id: str, collection_name: str) -> dict[str, Any] | None:
        """The meta of the file's newest committed version's first chunk (None when nothing is stored)."""
        records, _ = await self.store.scroll(
            file_filter(file_id, collection_name, must=[match(MetaKey.SPLIT_ID, 0)], must_not=[pending_condition()]),
            limit=_HEADS_PAGE,
            with_payload=[PAYLOAD_META],
        )
        return _newest_meta(records)

    async def committed_chunk(self, point_id: str, file_id: str, collection_name: str) -> dict[str, Any] | None:
        """The meta of one committed point of the file in the tenant; None when no such point is stored."""
        records, _ = await self.store.scroll(
            file_filter(
                file_id,
                collection_name,
                must=[models.HasIdCondition(has_id=[point_id])],
                must_not=[pending_condition()],
            ),
            limit=1,
            with_payload=[PAYLOAD_META],
        )
        meta = records[0].payload.get(PAYLOAD_META) if records else None
        return meta if isinstance(meta, dict) else None

    async def identical_copy(self, file_id: str, source_hash: str, fingerprint: str, *, exclude: str) -> str | None:
        """A tenant other than ``exclude`` holding this file with the same bytes and fingerprint, if any."""
        selector = models.Filter(
            must=[
                match(MetaKey.FILE_ID, file_id),
                match(MetaKey.SOURCE_HASH, source_hash),
                match(MetaKey.SPLIT_ID, 0),
            ],
            must_not=[pending_condition(), match(MetaKey.COLLECTION_NAME, exclude)],
        )
        records, _ = await self.store.scroll(selector, limit=_HEADS_PAGE, with_payload=[PAYLOAD_META])
        for record in records:
            meta = record.payload.get(PAYLOAD_META) or {}
            tenant = meta.get(MetaKey.COLLECTION_NAME)
            if meta.get(MetaKey.INGEST_FINGERPRINT) == fingerprint and isinstance(tenant, str):
                return tenant
        return None

    async def claim(
        self, file_id: str, collection_name: str, ingest_version: str, ingest_seq: int, meta: Mapping[str, Any]
    ) -> bool:
        """Raise the committed version ``ingest_version``'s ingest_seq to ``ingest_seq`` and set ``meta`` on
        it, in one operation; never lowers a seq (a newer claim keeps its seq and its meta).

        True when that version is still stored with a seq at least ``ingest_seq``; False when it is
        gone (a concurrent run swept it).
        """
        version = [match(MetaKey.INGEST_VERSION, ingest_version)]
        await self.store.set_payload(
            file_filter(
                file_id,
                collection_name,
                must=[*version, _seq_condition(lt=ingest_seq)],
                must_not=[pending_condition()],
            ),
            {**meta, MetaKey.INGEST_SEQ: ingest_seq},
            key=PAYLOAD_META,
        )
        claimed = file_filter(
            file_id, collection_name, must=[*version, _seq_condition(gte=ingest_seq)], must_not=[pending_condition()]
        )
        return await self.store.count(claimed) > 0

    async def read_version(self, file_id: str, collection_name: str) -> list[PointRecord]:
        """Every point (payload and vectors) of the file's newest committed version in the tenant."""
        return await read_newest_version(self.store, file_id, collection_name, with_vectors=True)

    async def recover(self, *, pending_before_seq: int | None) -> RecoveryReport:
        """Start-up repair after a crash; see ``versioning.recover``."""
        pending = models.Filter(must=[pending_condition()])
        if pending_before_seq is not None:
            pending.must = [pending_condition(), _seq_condition(lt=pending_before_seq)]
        pending_points = await self.store.count(pending)
        if pending_points:
            await self.store.delete(pending)
        stale = 0
        for (file_id, collection_name), newest in (await self._files_with_several_live_versions()).items():
            before = await self.count(file_id, collection_name)
            await self.delete_older(file_id, collection_name, newest)
            stale += before - await self.count(file_id, collection_name)
        return RecoveryReport(pending_runs_removed=pending_points, stale_versions_removed=stale)

    async def _files_with_several_live_versions(self) -> dict[tuple[str, str], int]:
        """(file, tenant) -> newest seq, for files with more than one committed version."""
        seqs: dict[tuple[str, str], set[int]] = defaultdict(set)
        live = models.Filter(must_not=[pending_condition()])
        async for page in scroll_pages(self.store, live, page_size=_RECOVERY_PAGE, with_payload=_RECOVERY_FIELDS):
            for record in page:
                meta = record.payload.get("meta") or {}
                seq = _as_seq(meta.get(MetaKey.INGEST_SEQ))
                file_id, tenant = meta.get(MetaKey.FILE_ID), meta.get(MetaKey.COLLECTION_NAME)
                if seq is not None and isinstance(file_id, str) and isinstance(tenant, str):
                    seqs[(file_id, tenant)].add(seq)
        return {key: max(values) for key, values in seqs.items() if len(values) > 1}

"""A file's newest complete committed version, read whole (ingestion's copy and text routes, the reindex)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from rag_runtime.store.filters import committed_file_filter
from rag_runtime.store.paging import scroll_pages
from rag_runtime.store.port import ChunkStore, PointRecord
from shared_contract.schema import PAYLOAD_META, MetaKey, meta_path

logger = logging.getLogger(__name__)

_PAGE = 1024
# What choosing and ordering a version reads, whatever else the caller asks for.
_VERSION_FIELDS = tuple(meta_path(key) for key in (MetaKey.INGEST_SEQ, MetaKey.SPLIT_ID, MetaKey.CHUNK_COUNT))


def _number(record: PointRecord, key: str) -> int:
    value = (record.payload.get(PAYLOAD_META) or {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def ingested_at(meta: Mapping[str, Any]) -> datetime | None:
    """When a version was ingested: ``indexed_at``, else the wall-clock milliseconds inside ``ingest_seq``
    (epoch milliseconds * 1000 + a tie-breaker). Every reader of it shows one instant the same way."""
    stamp = meta.get(MetaKey.INDEXED_AT)
    if isinstance(stamp, str):
        try:
            parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None:
            return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    seq = meta.get(MetaKey.INGEST_SEQ)
    if isinstance(seq, int) and not isinstance(seq, bool) and seq > 0:
        return datetime.fromtimestamp(seq // 1000 / 1000, UTC)
    return None


def _complete(version: Sequence[PointRecord]) -> bool:
    """Every chunk the version's document has is here (points without a chunk count, written by
    older tooling, are taken as they are)."""
    expected = _number(version[0], MetaKey.CHUNK_COUNT)
    return expected == 0 or len(version) >= expected


async def read_newest_version(
    store: ChunkStore,
    file_id: str,
    collection_name: str,
    *,
    with_payload: bool | Sequence[str] = True,
    with_vectors: bool = False,
) -> list[PointRecord]:
    """Every committed point of the file's newest complete version (largest ``ingest_seq`` whose
    points number its ``chunk_count``) in the tenant, in ``split_id`` order; empty when nothing is
    committed.

    Two versions are committed at once only between a publish and its sweep. On a sharded server a
    publish is atomic per shard only, so for a moment the new version can be committed on some
    shards and not yet on others; the previous version is still whole then, and is what this
    returns. A version has at most MAX_CHUNKS_PER_DOCUMENT points, so reading it is bounded.
    """
    fields: bool | list[str] = (
        with_payload if isinstance(with_payload, bool) else list(dict.fromkeys([*with_payload, *_VERSION_FIELDS]))
    )
    records: list[PointRecord] = []
    async for page in scroll_pages(
        store,
        committed_file_filter(file_id, collection_name),
        page_size=_PAGE,
        with_payload=fields,
        with_vectors=with_vectors,
    ):
        records.extend(page)
    if not records:
        return []
    versions: defaultdict[int, list[PointRecord]] = defaultdict(list)
    for record in records:
        versions[_number(record, MetaKey.INGEST_SEQ)].append(record)
    newest_first = sorted(versions, reverse=True)
    chosen = next((seq for seq in newest_first if _complete(versions[seq])), None)
    if chosen is None:
        # No whole version stored: the newest is the most there is (never the case after a commit,
        # which counts its points before it publishes).
        chosen = newest_first[0]
        logger.warning(
            "file %r in %r: no committed version is complete; reading %d of %d chunks of the newest",
            file_id,
            collection_name,
            len(versions[chosen]),
            _number(versions[chosen][0], MetaKey.CHUNK_COUNT),
        )
    # Scroll pages come in point-id order; the document's order is split_id.
    return sorted(versions[chosen], key=lambda record: _number(record, MetaKey.SPLIT_ID))

"""A file's newest committed version, read whole (ingestion's copy and text routes, the reindex)."""

from __future__ import annotations

from collections.abc import Sequence

from shared_contract.schema import PAYLOAD_META, MetaKey
from shared_contract.store.filters import committed_file_filter
from shared_contract.store.port import ChunkStore, PointRecord

_PAGE = 1024


def _number(record: PointRecord, key: str) -> int:
    value = (record.payload.get(PAYLOAD_META) or {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


async def read_newest_version(
    store: ChunkStore,
    file_id: str,
    collection_name: str,
    *,
    with_payload: bool | Sequence[str] = True,
    with_vectors: bool = False,
) -> list[PointRecord]:
    """Every committed point of the file's newest version (largest ``ingest_seq``) in the tenant, in
    ``split_id`` order; empty when nothing is committed. ``with_payload`` must include ``meta.ingest_seq``
    and ``meta.split_id`` when it names fields. Two versions are committed at once only between a
    publish and its sweep; a version has at most MAX_CHUNKS_PER_DOCUMENT points, so reading it is bounded."""
    records: list[PointRecord] = []
    offset: str | None = None
    while True:
        page, offset = await store.scroll(
            committed_file_filter(file_id, collection_name),
            limit=_PAGE,
            offset=offset,
            with_payload=with_payload,
            with_vectors=with_vectors,
        )
        records.extend(page)
        if offset is None:
            break
    newest = max((_number(record, MetaKey.INGEST_SEQ) for record in records), default=0)
    version = [record for record in records if _number(record, MetaKey.INGEST_SEQ) == newest]
    # Scroll pages come in point-id order; the document's order is split_id.
    return sorted(version, key=lambda record: _number(record, MetaKey.SPLIT_ID))

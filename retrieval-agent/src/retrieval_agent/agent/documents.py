"""Whole documents rebuilt from their chunks, and the tenants' document list (the agent's read tools).

Order: ingestion numbers each file version's chunks ``split_id`` 0..n-1 in document order (the
chunk finalizer, over the whole file); ``shared_contract.text.stitch`` removes the window overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from qdrant_client import models

from rag_runtime.store import PointRecord, file_filter, pending_condition
from retrieval_agent.adapters.store import StoreSearch
from shared_contract import PAYLOAD_CONTENT, PAYLOAD_META, MetaKey, meta_path
from shared_contract.text import stitch

# Splits read per store call: ~400-token chunks make this far more text than any budget.
SPLIT_PAGE = 64
TRUNCATION_MARK = "\n[…]"
# Documents scanned for a listing or a file-name filter (one meta-only record each).
MAX_LISTED_DOCUMENTS = 5000
# Chunk-specific keys a whole-document source does not carry.
_CHUNK_ONLY_KEYS = frozenset({MetaKey.PAGE, MetaKey.HEADERS, MetaKey.SPLIT_ID, MetaKey.CONTENT_HASH})


def cut(text: str, max_chars: int) -> tuple[str, bool]:
    """``text`` within ``max_chars`` (at a whitespace when one is near), and whether it was cut."""
    if len(text) <= max_chars:
        return text, False
    room = max_chars - len(TRUNCATION_MARK)
    head = text[:room]
    space = head.rfind(" ", int(room * 0.9))
    return (head[:space] if space > 0 else head).rstrip() + TRUNCATION_MARK, True


def _split_id(record: PointRecord) -> int:
    meta = record.payload.get(PAYLOAD_META)
    value = meta.get(MetaKey.SPLIT_ID) if isinstance(meta, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _meta(record: PointRecord) -> dict[str, Any]:
    meta = record.payload.get(PAYLOAD_META)
    return meta if isinstance(meta, dict) else {}


def _seq(meta: dict[str, Any]) -> int:
    seq = meta.get(MetaKey.INGEST_SEQ)
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else -1


@dataclass(frozen=True, slots=True)
class WholeDocument:
    """One document rebuilt from its chunks (maybe cut at the budget)."""

    file_id: str
    collection_name: str
    meta: dict[str, Any]
    text: str
    chunks: int
    chunks_read: int
    truncated: bool


def _pick_version(records: Sequence[PointRecord], collection_names: Sequence[str]) -> tuple[str, int]:
    """(tenant, ingest_seq) to read: the newest version, in the first requested tenant holding it."""
    order = {name: index for index, name in enumerate(collection_names)}
    versions = {(str(_meta(r).get(MetaKey.COLLECTION_NAME)), _seq(_meta(r))) for r in records}
    newest = max(seq for _, seq in versions)
    return min(
        ((tenant, seq) for tenant, seq in versions if seq == newest), key=lambda item: order.get(item[0], len(order))
    )


async def read_whole_document(
    store: StoreSearch, file_id: str, collection_names: Sequence[str], *, max_chars: int
) -> WholeDocument | None:
    """The document ``file_id`` from the request's tenants, rebuilt in order; None when they hold no such file."""
    first = await store.file_chunks(file_id, collection_names, splits=range(SPLIT_PAGE))
    if not first:
        return None
    version = _pick_version(first, collection_names)
    records = [r for r in first if (str(_meta(r).get(MetaKey.COLLECTION_NAME)), _seq(_meta(r))) == version]
    # ``version`` came from the tenants' own chunks, so this count stays inside them.
    total = await store.count(
        file_filter(
            file_id,
            version[0],
            must=[
                models.FieldCondition(
                    key=meta_path(MetaKey.INGEST_SEQ), range=models.Range(gte=version[1], lte=version[1])
                )
            ],
            must_not=[pending_condition()],
        )
    )
    chars = sum(len(str(r.payload.get(PAYLOAD_CONTENT) or "")) for r in records)
    start = SPLIT_PAGE
    while chars < max_chars and len(records) < total:
        page = await store.file_chunks(
            file_id, collection_names, splits=range(start, start + SPLIT_PAGE), version=version
        )
        if not page:
            break  # a gap in the numbering (never written by ingestion): stop at what is contiguous
        records.extend(page)
        chars += sum(len(str(r.payload.get(PAYLOAD_CONTENT) or "")) for r in page)
        start += SPLIT_PAGE
    records.sort(key=_split_id)
    text, truncated = cut(stitch([str(r.payload.get(PAYLOAD_CONTENT) or "") for r in records]), max_chars)
    meta = {key: value for key, value in _meta(records[0]).items() if key not in _CHUNK_ONLY_KEYS}
    return WholeDocument(
        file_id=file_id,
        collection_name=version[0],
        meta=meta,
        text=text,
        chunks=max(total, len(records)),
        chunks_read=len(records),
        truncated=truncated or len(records) < total,
    )


@dataclass(frozen=True, slots=True)
class DocumentEntry:
    """One document of a listing: the newest version's first chunk's meta."""

    file_id: str
    meta: dict[str, Any] = field(default_factory=lambda: dict[str, Any]())

    @property
    def seq(self) -> int:
        """The version's ``ingest_seq`` (when it was ingested)."""
        return _seq(self.meta)


async def list_document_entries(
    store: StoreSearch, collection_names: Sequence[str], conditions: Sequence[models.Condition]
) -> tuple[list[DocumentEntry], bool]:
    """Every document in the tenants matching ``conditions``, one entry per file id (newest version).

    Returns the entries (by name) and whether the scan stopped at MAX_LISTED_DOCUMENTS.
    """
    heads = await store.document_heads(collection_names, conditions, MAX_LISTED_DOCUMENTS)
    newest: dict[str, DocumentEntry] = {}
    for record in heads:
        meta = _meta(record)
        file_id = meta.get(MetaKey.FILE_ID)
        if not isinstance(file_id, str):
            continue
        known = newest.get(file_id)
        if known is None or _seq(meta) > known.seq:
            newest[file_id] = DocumentEntry(file_id=file_id, meta=meta)
    entries = sorted(newest.values(), key=lambda entry: (str(entry.meta.get(MetaKey.NAME) or ""), entry.file_id))
    return entries, len(heads) >= MAX_LISTED_DOCUMENTS

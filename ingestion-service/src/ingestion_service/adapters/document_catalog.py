"""A tenant's documents as the documents API shows them: listed, read whole, relabelled, summed up.

A document is one committed version of a file in one tenant. Its document-level metadata
(contract 2.1: source hash, format, tags, chunk count, ...) is the same on every chunk, so one
chunk per document answers a listing: the head, ``split_id`` 0 (indexed). Lists and stats read the
tenant's heads in pages and sort or sum them in memory: a few hundred bytes per document, fine
for a knowledge base of up to ``MAX_LISTED_DOCUMENTS``; above that they fail loudly
(``TooManyDocumentsError``) rather than answer from a truncated scan.

Data written before contract 2.1 lacks those keys: the chunk count is then counted, the
ingest time derived from ``ingest_seq``; the rest is reported as unknown (None).

Between a run's publish and its sweep a file has two committed versions for one store call
(``indexing/versioning.py``); every read here keeps the newest ``ingest_seq``.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import anyio
from qdrant_client import models

from ingestion_service.errors import TooManyDocumentsError
from rag_runtime.store import (
    ChunkStore,
    PointRecord,
    committed_file_filter,
    file_filter,
    ingested_at,
    match,
    pending_condition,
    read_newest_version,
    scroll_pages,
    tenant_condition,
    tenant_filter,
)
from shared_contract import PAYLOAD_CONTENT, PAYLOAD_META, MetaKey, meta_path
from shared_contract.attributes import AttributeValue
from shared_contract.text import chunk_origin, stitch

# Heads read into memory for one list or stats call; one more is TOO_MANY_DOCUMENTS.
MAX_LISTED_DOCUMENTS = 100_000
_PAGE = 1024

DocumentSort = Literal["ingested_at", "-ingested_at", "name", "-name"]
_EPOCH = datetime.fromtimestamp(0, UTC)

# What sorting needs of each head; the listed page then reads its heads whole.
_SORT_FIELDS = [meta_path(key) for key in (MetaKey.FILE_ID, MetaKey.INGEST_SEQ, MetaKey.NAME, MetaKey.INDEXED_AT)]
_STATS_FIELDS = [
    meta_path(key)
    for key in (
        MetaKey.FILE_ID,
        MetaKey.INGEST_SEQ,
        MetaKey.INDEXED_AT,
        MetaKey.LANGUAGES,
        MetaKey.FORMAT,
        MetaKey.EXTRACTOR,
        MetaKey.TEXT_BYTES,
        MetaKey.INGEST_FINGERPRINT,
    )
]
# Page and heading path: chunks of different ones share no window overlap (shared_contract.text).
_TEXT_FIELDS = [
    PAYLOAD_CONTENT,
    *(meta_path(key) for key in (MetaKey.SPLIT_ID, MetaKey.INGEST_SEQ, MetaKey.NAME, MetaKey.PAGE, MetaKey.HEADERS)),
    meta_path(MetaKey.PATH),
]

# A page's text and the metadata its rebuild carries (a reindex of an upload).
_PAGE_FIELDS = [PAYLOAD_CONTENT, PAYLOAD_META]


def _meta(record: PointRecord) -> dict[str, Any]:
    meta = record.payload.get(PAYLOAD_META)
    return meta if isinstance(meta, dict) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _seq(meta: dict[str, Any]) -> int:
    return _int(meta.get(MetaKey.INGEST_SEQ)) or -1


def _newest_by_file(records: Sequence[PointRecord], into: dict[str, dict[str, Any]]) -> None:
    for record in records:
        meta = _meta(record)
        file_id = meta.get(MetaKey.FILE_ID)
        if not isinstance(file_id, str):
            continue
        known = into.get(file_id)
        if known is None or _seq(meta) > _seq(known):
            into[file_id] = meta


def _version_filter(file_id: str, collection_name: str, seq: int | None) -> models.Filter:
    """Committed points of one version of (file, tenant); ``seq`` None: data from before ``ingest_seq``."""
    if seq is None or seq < 0:
        return committed_file_filter(file_id, collection_name)
    exact = models.FieldCondition(key=meta_path(MetaKey.INGEST_SEQ), range=models.Range(gte=seq, lte=seq))
    return file_filter(file_id, collection_name, must=[exact], must_not=[pending_condition()])


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """One document as the documents list shows it (None: not recorded, e.g. ingested before contract 2.1)."""

    file_id: str
    name: str | None
    collection_name: str
    content_hash: str | None
    source_bytes: int | None
    format: str | None
    chunks: int
    text_bytes: int | None
    languages: list[str]
    extractor: str | None
    tags: list[str]
    category: str | None
    attributes: dict[str, Any]
    ingested_at: datetime | None
    ingest_version: str | None
    s3_bucket: str | None
    s3_key: str | None
    s3_etag: str | None
    path: str | None
    source_uri: str | None = None
    fetched_at: str | None = None


def _info(file_id: str, collection_name: str, meta: dict[str, Any], chunks: int) -> DocumentInfo:
    attributes = meta.get(MetaKey.ATTRIBUTES)
    return DocumentInfo(
        file_id=file_id,
        name=_str(meta.get(MetaKey.NAME)),
        collection_name=collection_name,
        content_hash=_str(meta.get(MetaKey.SOURCE_HASH)),
        source_bytes=_int(meta.get(MetaKey.SOURCE_BYTES)),
        format=_str(meta.get(MetaKey.FORMAT)),
        chunks=chunks,
        text_bytes=_int(meta.get(MetaKey.TEXT_BYTES)),
        languages=_strings(meta.get(MetaKey.LANGUAGES)),
        extractor=_str(meta.get(MetaKey.EXTRACTOR)),
        tags=_strings(meta.get(MetaKey.TAGS)),
        category=_str(meta.get(MetaKey.CATEGORY)),
        attributes=dict(attributes) if isinstance(attributes, dict) else {},
        ingested_at=ingested_at(meta),
        ingest_version=_str(meta.get(MetaKey.INGEST_VERSION)),
        s3_bucket=_str(meta.get(MetaKey.S3_BUCKET)),
        s3_key=_str(meta.get(MetaKey.S3_KEY)),
        s3_etag=_str(meta.get(MetaKey.S3_ETAG)),
        path=_str(meta.get(MetaKey.PATH)),
        source_uri=_str(meta.get(MetaKey.SOURCE_URI)),
        fetched_at=_str(meta.get(MetaKey.FETCHED_AT)),
    )


@dataclass(frozen=True, slots=True)
class DocumentPage:
    """One page of a sorted listing, and how many documents the whole listing has."""

    documents: list[DocumentInfo]
    total: int


@dataclass(frozen=True, slots=True)
class DocumentText:
    """A document's text rebuilt from its chunks, overlap removed."""

    file_id: str
    collection_name: str
    name: str | None
    text: str
    chunks: int
    path: str | None = None


@dataclass(frozen=True, slots=True)
class PageText:
    """The stitched text of consecutive chunks with the same ``meta.page`` (or none), and its first chunk's meta."""

    text: str
    meta: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CollectionStats:
    """What one tenant holds. The per-value maps count documents, not chunks."""

    collection_name: str
    documents: int
    chunks: int
    text_bytes: int
    languages: dict[str, int]
    formats: dict[str, int]
    extractors: dict[str, int]
    last_ingest: datetime | None
    # Documents stored under another ingest fingerprint than the service's (settings, chunking, contract).
    outdated_documents: int = 0


class Unchanged(enum.Enum):
    """Marks a field a metadata update leaves as stored."""

    UNCHANGED = enum.auto()


UNCHANGED = Unchanged.UNCHANGED


@dataclass(frozen=True, slots=True)
class DocumentChanges:
    """A metadata update: each given field replaces the stored value ([] / None / {} clear it)."""

    tags: list[str] | Unchanged = UNCHANGED
    category: str | Unchanged | None = UNCHANGED
    attributes: dict[str, AttributeValue] | Unchanged = UNCHANGED
    name: str | Unchanged = UNCHANGED

    def meta(self) -> dict[str, Any]:
        """The meta keys to set (``source`` follows ``name``: Open WebUI shows it as the citation)."""
        values: dict[str, Any] = {}
        if not isinstance(self.tags, Unchanged):
            values[MetaKey.TAGS] = self.tags
        if not isinstance(self.category, Unchanged):
            values[MetaKey.CATEGORY] = self.category
        if not isinstance(self.attributes, Unchanged):
            values[MetaKey.ATTRIBUTES] = self.attributes
        if not isinstance(self.name, Unchanged):
            values[MetaKey.NAME] = self.name
            values[MetaKey.SOURCE] = self.name
        return values


def _counted(values: dict[str, int]) -> dict[str, int]:
    """Most documents first, then by value."""
    return dict(sorted(values.items(), key=lambda item: (-item[1], item[0])))


class DocumentCatalog:
    """Document-level reads and metadata writes over the storage port (committed versions only)."""

    def __init__(self, store: ChunkStore, *, max_documents: int = MAX_LISTED_DOCUMENTS) -> None:
        self.store = store
        self.max_documents = max_documents

    async def _heads(
        self, collection_name: str, conditions: Sequence[models.Condition], fields: Sequence[str]
    ) -> dict[str, dict[str, Any]]:
        """file_id -> the newest committed head's meta (``fields`` only), for every document of the tenant."""
        selector = models.Filter(
            must=[tenant_condition([collection_name]), match(MetaKey.SPLIT_ID, 0), *conditions],
            must_not=[pending_condition()],
        )
        heads: dict[str, dict[str, Any]] = {}
        read = 0
        async for page in scroll_pages(self.store, selector, page_size=_PAGE, with_payload=list(fields)):
            read += len(page)
            if read > self.max_documents:
                raise TooManyDocumentsError(self.max_documents)
            _newest_by_file(page, heads)
        return heads

    async def _chunks(self, file_id: str, collection_name: str, meta: dict[str, Any]) -> int:
        recorded = _int(meta.get(MetaKey.CHUNK_COUNT))
        if recorded is not None:
            return recorded
        # Ingested before chunk_count was recorded: count the version's points.
        return await self.store.count(_version_filter(file_id, collection_name, _int(meta.get(MetaKey.INGEST_SEQ))))

    async def list_documents(
        self,
        collection_name: str,
        *,
        conditions: Sequence[models.Condition] = (),
        sort: DocumentSort = "-ingested_at",
        limit: int,
        offset: int = 0,
    ) -> DocumentPage:
        """The documents of one tenant matching ``conditions``, sorted, from ``offset`` on (at most ``limit``).

        Ties (same time or name) are ordered by file_id, so pages never overlap or skip.
        """
        heads = await self._heads(collection_name, conditions, _SORT_FIELDS)
        ordered = sorted(heads)
        if sort.endswith("ingested_at"):
            ordered.sort(key=lambda file_id: ingested_at(heads[file_id]) or _EPOCH, reverse=sort.startswith("-"))
        else:
            ordered.sort(
                key=lambda file_id: str(heads[file_id].get(MetaKey.NAME) or "").casefold(), reverse=sort.startswith("-")
            )
        page_ids = ordered[offset : offset + limit]
        documents = await self._page(collection_name, page_ids) if page_ids else []
        return DocumentPage(documents=documents, total=len(heads))

    async def _page(self, collection_name: str, file_ids: Sequence[str]) -> list[DocumentInfo]:
        """The listed page's heads, read whole, in ``file_ids`` order (a file deleted since the scan drops out)."""
        selector = models.Filter(
            must=[
                tenant_condition([collection_name]),
                match(MetaKey.SPLIT_ID, 0),
                models.FieldCondition(key=meta_path(MetaKey.FILE_ID), match=models.MatchAny(any=list(file_ids))),
            ],
            must_not=[pending_condition()],
        )
        heads: dict[str, dict[str, Any]] = {}
        async for page in scroll_pages(self.store, selector, page_size=_PAGE, with_payload=[PAYLOAD_META]):
            _newest_by_file(page, heads)
        documents: list[DocumentInfo] = []
        for file_id in file_ids:
            meta = heads.get(file_id)
            if meta is not None:
                documents.append(
                    _info(file_id, collection_name, meta, await self._chunks(file_id, collection_name, meta))
                )
        return documents

    async def document(self, file_id: str, collection_name: str) -> DocumentInfo | None:
        """The file's newest committed version in the tenant as a listing entry; None when it has none."""
        heads = await self._page(collection_name, [file_id])
        return heads[0] if heads else None

    async def read_text(self, file_id: str, collection_name: str) -> DocumentText | None:
        """The newest committed version's chunks in ``split_id`` order, stitched; None when nothing is committed.

        A version has at most MAX_CHUNKS_PER_DOCUMENT chunks, so reading all of them is bounded.
        """
        version = await read_newest_version(self.store, file_id, collection_name, with_payload=_TEXT_FIELDS)
        if not version:
            return None
        contents = [str(record.payload.get(PAYLOAD_CONTENT) or "") for record in version]
        origins = [chunk_origin(_meta(record)) for record in version]
        # Up to MAX_EXTRACTED_CHARS of text: joined in a thread, not on the event loop.
        text = await anyio.to_thread.run_sync(stitch, contents, origins)
        return DocumentText(
            file_id=file_id,
            collection_name=collection_name,
            name=_str(_meta(version[0]).get(MetaKey.NAME)),
            text=text,
            chunks=len(version),
            path=_str(_meta(version[0]).get(MetaKey.PATH)),
        )

    async def read_pages(self, file_id: str, collection_name: str) -> list[PageText]:
        """The newest committed version's text page by page, in ``split_id`` order; [] when nothing is committed.

        Each page is chunked on its own (a page too short to stand alone opens the next one's first
        chunk), so a page's chunks stitch back into its text; joined by blank lines, the pages are
        ``read_text``'s text.
        """
        version = await read_newest_version(self.store, file_id, collection_name, with_payload=_PAGE_FIELDS)

        def stitched() -> list[PageText]:
            pages: list[PageText] = []
            for _, group in itertools.groupby(version, key=lambda record: _meta(record).get(MetaKey.PAGE)):
                records = list(group)
                contents = [str(record.payload.get(PAYLOAD_CONTENT) or "") for record in records]
                origins = [chunk_origin(_meta(record)) for record in records]
                pages.append(PageText(text=stitch(contents, origins), meta=_meta(records[0])))
            return pages

        # Up to MAX_EXTRACTED_CHARS of text: joined in a thread, not on the event loop.
        return await anyio.to_thread.run_sync(stitched)

    async def update(self, file_id: str, collection_name: str, changes: DocumentChanges) -> bool:
        """Set the changed metadata on every point of (file, tenant) in one operation; False when none is committed.

        Pending points too: a run still writing would otherwise publish the old values over the
        update (its chunks written after this call still carry what its request gave).
        """
        if await self.store.count(committed_file_filter(file_id, collection_name)) == 0:
            return False
        values = changes.meta()
        if values:
            await self.store.set_payload(file_filter(file_id, collection_name), values, key=PAYLOAD_META)
        return True

    async def stats(self, collection_name: str, current_fingerprint: str | None = None) -> CollectionStats:
        """Documents, chunks and bytes of one tenant, and how many documents have each language, format,
        engine; with ``current_fingerprint``, how many were stored under another one."""
        heads = await self._heads(collection_name, (), _STATS_FIELDS)
        chunks = await self.store.count(tenant_filter([collection_name])) if heads else 0
        languages: dict[str, int] = {}
        formats: dict[str, int] = {}
        extractors: dict[str, int] = {}
        text_bytes = 0
        last: datetime | None = None
        outdated = 0
        for meta in heads.values():
            if current_fingerprint is not None and meta.get(MetaKey.INGEST_FINGERPRINT) != current_fingerprint:
                outdated += 1
            for language in dict.fromkeys(_strings(meta.get(MetaKey.LANGUAGES))):
                languages[language] = languages.get(language, 0) + 1
            for key, counts in ((MetaKey.FORMAT, formats), (MetaKey.EXTRACTOR, extractors)):
                value = _str(meta.get(key))
                if value:
                    counts[value] = counts.get(value, 0) + 1
            # Documents from before contract 2.1 carry no text_bytes; they add nothing until re-ingested.
            text_bytes += _int(meta.get(MetaKey.TEXT_BYTES)) or 0
            when = ingested_at(meta)
            if when is not None and (last is None or when > last):
                last = when
        return CollectionStats(
            collection_name=collection_name,
            documents=len(heads),
            chunks=chunks,
            text_bytes=text_bytes,
            languages=_counted(languages),
            formats=_counted(formats),
            extractors=_counted(extractors),
            last_ingest=last,
            outdated_documents=outdated,
        )

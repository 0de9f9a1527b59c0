"""The shared collection as search uses it: the storage port plus short-lived caches.

Two things are cached, never forever: what the collection offers (the sparse vector, its IDF
modifier, the lexical text indexes, and whether its manifest agrees with this service's contract
settings; CAPABILITY_CACHE_TTL_SECONDS, and read afresh by each readiness probe) and which lexical
languages the requested tenants hold (one facet per tenant set; LEXICAL_LANGUAGE_CACHE_TTL_SECONDS).
Every other call goes straight to the store, which raises the contract's typed errors.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from qdrant_client import models

from rag_runtime.lexical import LEXICAL_FIELD_PREFIX
from rag_runtime.store import (
    ChunkStore,
    PointRecord,
    ServerStore,
    committed_file_filter,
    match,
    pending_condition,
    scroll_pages,
    tenant_condition,
    tenant_counts,
    tenant_filter,
    verify_collection,
)
from retrieval_agent.settings import Settings
from shared_contract import (
    PAYLOAD_CONTENT,
    PAYLOAD_META,
    PENDING_STATE,
    CollectionManifest,
    CollectionMissingError,
    ContractMismatchError,
    ManifestMissingError,
    MetaKey,
    has_live_key,
    meta_path,
    verify_manifest,
)
from shared_contract.schema import TenantKind

logger = logging.getLogger(__name__)

_SCROLL_PAGE = 256
# More than the lexical languages there are (11 stemmed + the fallback).
_FACET_LIMIT = 50
# Tenant sets are open-ended (a tenant per uploaded file), so the language cache is bounded.
_MAX_LANGUAGE_ENTRIES = 4096


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the collection offers the search paths."""

    has_sparse: bool
    # The sparse vector has the IDF modifier, so its leg can take a per-tenant IDF corpus.
    sparse_idf: bool
    # Lexical fields (``lexical_<code>``) with a BM25-scoring full-text index.
    lexical_fields: frozenset[str]
    # ``text-dense-multilingual``: present on the chunks outside the dense model's languages.
    has_multilingual: bool = False
    # Written by these services (it has the contract's manifest), so ``meta.lexical_language`` is
    # indexed even before the first chunk of a language created its text index.
    own_layout: bool = False
    # Contract 3.x: ``meta.live_in`` alone selects a tenant's committed points (``has_live_key``).
    live_key: bool = False


@dataclass(frozen=True, slots=True)
class _Reading:
    """One reading of the collection: what it offers, and its manifest's first disagreement with this
    service's contract settings (None: it agrees, or it has no manifest)."""

    read_at: float
    capabilities: Capabilities
    mismatch: ContractMismatchError | None


def _refusal(mismatch: ContractMismatchError) -> ContractMismatchError:
    # A fresh error per refusal: one instance raised on every request would pile up tracebacks.
    return ContractMismatchError(mismatch.collection, mismatch.field, mismatch.collection_value, mismatch.service_value)


@dataclass(frozen=True, slots=True)
class SplitSpan:
    """Consecutive splits of one tenant's copy of one file version (``seq`` None: any version)."""

    collection_name: str
    file_id: str
    seq: int | None
    splits: range


class StoreSearch:
    """Search-side access to the collection through a :class:`ChunkStore`."""

    def __init__(self, store: ChunkStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self._reading: _Reading | None = None
        self._languages: dict[tuple[str, ...], tuple[float, tuple[tuple[str, int], ...]]] = {}
        self._older_contract_said = False

    @property
    def collection(self) -> str:
        """The physical collection's name."""
        return self.store.collection

    async def capabilities(self, *, max_age: float | None = None) -> Capabilities:
        """The collection's vectors and lexical indexes, cached for CAPABILITY_CACHE_TTL_SECONDS
        (or ``max_age`` seconds, when shorter: a caller that knows the cache may be stale).

        Raises ContractMismatchError while the collection's manifest disagrees with this service's
        contract settings (the verdict is cached with the capabilities), and CollectionMissingError
        while the collection does not exist (never cached).
        """
        now = time.monotonic()
        reading = self._reading
        ttl = (
            self.settings.capability_cache_ttl_seconds
            if max_age is None
            else min(max_age, self.settings.capability_cache_ttl_seconds)
        )
        if reading is None or now - reading.read_at >= ttl:
            reading = await self._read(now)
        if reading.mismatch is not None:
            raise _refusal(reading.mismatch)
        return reading.capabilities

    async def check_contract(self) -> None:
        """Raise ContractMismatchError while the collection's manifest disagrees with this service's
        contract settings: every query path calls it before any work (the verdict :meth:`capabilities`
        caches, so it costs no store call within the cache's lifetime)."""
        await self.capabilities()

    async def _read(self, now: float) -> _Reading:
        info = await self.store.info()
        try:
            manifest = await self.store.read_manifest()
        except ManifestMissingError:
            # A collection another tool created: its sparse modifier is unknown, so no IDF scope.
            manifest = None
        sparse_idf = info.has_sparse and manifest is not None and manifest.sparse_modifier == "idf"
        capabilities = Capabilities(
            has_sparse=info.has_sparse,
            sparse_idf=sparse_idf,
            lexical_fields=frozenset(
                field for field in info.text_index_fields if field.startswith(LEXICAL_FIELD_PREFIX)
            ),
            has_multilingual=info.has_multilingual,
            own_layout=manifest is not None,
            live_key=has_live_key(manifest),
        )
        if manifest is not None and not capabilities.live_key and not self._older_contract_said:
            self._older_contract_said = True
            logger.info(
                "collection %s is a contract %s collection: search filters it on two conditions; one created "
                "under contract 3 filters on one, faster (`rag migrate` copies an embedded store; docs/contract.md)",
                self.collection,
                manifest.contract_version,
            )
        reading = _Reading(now, capabilities, None if manifest is None else self._mismatch(manifest))
        self._log_change(self._reading, reading)
        self._reading = reading
        return reading

    def _mismatch(self, manifest: CollectionManifest) -> ContractMismatchError | None:
        try:
            # As readiness checks it: a sparse-less collection is searched dense only.
            verify_manifest(self.settings.qdrant_index, manifest, self.settings, require_sparse=False)
        except ContractMismatchError as exc:
            return exc
        return None

    @staticmethod
    def _log_change(previous: _Reading | None, current: _Reading) -> None:
        before = None if previous is None else previous.mismatch
        after = current.mismatch
        if after is not None and (before is None or str(before) != str(after)):
            logger.warning("contract mismatch: every query is refused (503 COLLECTION_MISMATCH) until fixed: %s", after)
        elif after is None and before is not None:
            logger.warning("contract mismatch resolved: the collection's manifest matches again; queries are served")

    def forget_capabilities(self) -> None:
        """Drop the cached capabilities (after an error that suggests the collection changed).

        The contract verdict is kept for the next reading to compare with: its change is logged once.
        """
        if self._reading is not None:
            self._reading = replace(self._reading, read_at=-math.inf)

    async def lexical_languages(self, collection_names: Sequence[str]) -> dict[str, int]:
        """``meta.lexical_language`` code -> committed chunks in the tenants (codes sorted).

        One facet per tenant set, cached for LEXICAL_LANGUAGE_CACHE_TTL_SECONDS. An empty answer
        (a tenant still being ingested, or unknown) is not cached, so its first chunks count at once.
        """
        key = tuple(sorted(set(collection_names)))
        now = time.monotonic()
        cached = self._languages.get(key)
        if cached is not None and now - cached[0] < self.settings.lexical_language_cache_ttl_seconds:
            return dict(cached[1])
        counts = await self.store.facet(meta_path(MetaKey.LEXICAL_LANGUAGE), tenant_filter(key), limit=_FACET_LIMIT)
        mix = tuple(sorted((str(count.value), count.count) for count in counts if isinstance(count.value, str)))
        if mix:
            self._remember(key, now, mix)
        else:
            self._languages.pop(key, None)
        return dict(mix)

    def _remember(self, key: tuple[str, ...], now: float, codes: tuple[tuple[str, int], ...]) -> None:
        if len(self._languages) >= _MAX_LANGUAGE_ENTRIES:
            ttl = self.settings.lexical_language_cache_ttl_seconds
            self._languages = {k: v for k, v in self._languages.items() if now - v[0] < ttl}
            while len(self._languages) >= _MAX_LANGUAGE_ENTRIES:
                del self._languages[next(iter(self._languages))]  # the oldest insertion
        self._languages[key] = (now, codes)

    async def query(self, request: models.QueryRequest) -> list[PointRecord]:
        """One Query API request. Typed errors: QdrantUnavailableError, StoreRequestError,
        CollectionMissingError (which also drops the cached capabilities)."""
        try:
            return await self.store.query(request)
        except CollectionMissingError:
            self.forget_capabilities()
            raise

    async def query_batch(self, requests: Sequence[models.QueryRequest]) -> list[list[PointRecord]]:
        """Several Query API requests in one call; the same typed errors as :meth:`query`."""
        try:
            return await self.store.query_batch(requests)
        except CollectionMissingError:
            self.forget_capabilities()
            raise

    async def scroll_contents(self, collection_names: Sequence[str], max_docs: int) -> list[PointRecord]:
        """Up to ``max_docs`` committed chunks of the given tenants, content and meta only."""
        return await self.scroll_records(tenant_filter(collection_names), max_docs)

    async def scroll_records(
        self, selector: models.Filter, max_points: int, *, payload: Sequence[str] = (PAYLOAD_CONTENT, PAYLOAD_META)
    ) -> list[PointRecord]:
        """Up to ``max_points`` points ``selector`` matches (in id order), with the ``payload`` keys only.

        Callers pass a filter built on ``tenant_filter``: this adapter never reads outside the tenants
        it is given, and the agent's tools build every selector that way (``agent/filters.py``).
        """
        records: list[PointRecord] = []
        if max_points < 1:
            return records
        pages = scroll_pages(self.store, selector, page_size=min(_SCROLL_PAGE, max_points), with_payload=list(payload))
        async for page in pages:
            records.extend(page[: max_points - len(records)])
            if len(records) >= max_points:
                break
        return records

    async def count(self, selector: models.Filter) -> int:
        """Exact number of points ``selector`` matches."""
        return await self.store.count(selector)

    async def file_chunks(
        self, file_id: str, collection_names: Sequence[str], *, splits: range, version: tuple[str, int] | None = None
    ) -> list[PointRecord]:
        """Committed chunks of one file within the tenants whose ``meta.split_id`` is in ``splits``.

        Ingestion numbers a file version's chunks 0..n-1 in document order (``split_id``); the caller
        sorts them. ``version`` (collection name, ingest_seq) narrows to one tenant's copy of one
        version (a file may sit in several knowledge bases, and two versions are live for a moment).
        """
        conditions: list[models.Condition] = [
            match(MetaKey.FILE_ID, file_id),
            models.FieldCondition(
                key=meta_path(MetaKey.SPLIT_ID), range=models.Range(gte=splits.start, lt=splits.stop)
            ),
        ]
        if version is not None:
            conditions.append(match(MetaKey.COLLECTION_NAME, version[0]))
            # The seq index is range-only (no lookup): an exact value is a closed range.
            conditions.append(
                models.FieldCondition(
                    key=meta_path(MetaKey.INGEST_SEQ), range=models.Range(gte=version[1], lte=version[1])
                )
            )
        selector = models.Filter(must=[tenant_condition(collection_names), *conditions], must_not=[pending_condition()])
        # A version holds each split once; two versions or tenants at most double it per page.
        return await self.scroll_records(selector, max_points=4 * len(splits) + _SCROLL_PAGE)

    async def chunks_around(
        self,
        point_ids: Sequence[str],
        spans: Sequence[SplitSpan],
        scope: models.Filter,
        *,
        payload: Sequence[str] = (PAYLOAD_CONTENT, PAYLOAD_META),
    ) -> list[PointRecord]:
        """Chunks within ``scope`` (a search's tenants and filter), in one read: the points
        ``point_ids`` and those of several file versions whose ``split_id`` lies in each span, with
        the ``payload`` keys only.
        """
        branches: list[models.Condition] = []
        if point_ids:
            branches.append(models.HasIdCondition(has_id=list(point_ids)))
        for span in spans:
            conditions: list[models.Condition] = [
                match(MetaKey.COLLECTION_NAME, span.collection_name),
                match(MetaKey.FILE_ID, span.file_id),
                models.FieldCondition(
                    key=meta_path(MetaKey.SPLIT_ID), range=models.Range(gte=span.splits.start, lt=span.splits.stop)
                ),
            ]
            if span.seq is not None:
                conditions.append(
                    models.FieldCondition(
                        key=meta_path(MetaKey.INGEST_SEQ), range=models.Range(gte=span.seq, lte=span.seq)
                    )
                )
            branches.append(models.Filter(must=conditions))
        if not branches:
            return []
        selector = models.Filter(must=[scope, models.Filter(should=branches)], must_not=[pending_condition()])
        return await self.scroll_records(
            selector, max_points=len(point_ids) + sum(len(span.splits) for span in spans), payload=payload
        )

    async def committed_by_id(
        self, point_ids: Sequence[str], collection_names: Sequence[str], *, payload: Sequence[str]
    ) -> list[PointRecord]:
        """The points ``point_ids`` that are committed chunks of ``collection_names``, read by id (no
        filter for the engine to plan), with the ``payload`` keys: a point of another tenant, or one
        a run is still writing, is left out here as the tenant filter leaves it out."""
        if not point_ids:
            return []
        checked = (meta_path(MetaKey.COLLECTION_NAME), meta_path(MetaKey.INGEST_STATE))
        records = await self.store.retrieve(
            point_ids, with_payload=[*payload, *(key for key in checked if key not in payload)]
        )
        tenants = set(collection_names)
        kept: list[PointRecord] = []
        for record in records:
            meta = record.payload.get(PAYLOAD_META)
            if (
                isinstance(meta, dict)
                and meta.get(MetaKey.COLLECTION_NAME) in tenants
                and meta.get(MetaKey.INGEST_STATE) != PENDING_STATE
            ):
                kept.append(record)
        return kept

    async def document_heads(
        self, collection_names: Sequence[str], conditions: Sequence[models.Condition], max_docs: int
    ) -> list[PointRecord]:
        """One record (meta only) per document version in the tenants: its first chunk (``split_id`` 0)."""
        selector = models.Filter(
            must=[
                tenant_condition(collection_names),
                match(MetaKey.SPLIT_ID, 0),
                *conditions,
            ],
            must_not=[pending_condition()],
        )
        return await self.scroll_records(selector, max_docs, payload=[PAYLOAD_META])

    async def tenant_names(self, limit: int, kinds: Collection[TenantKind] | None = None) -> list[str]:
        """The tenants (``meta.collection_name`` values) holding committed chunks, of ``kinds`` (else all),
        at most ``limit`` (the largest), by name."""
        tenants, _ = await tenant_counts(self.store, limit=limit, kinds=kinds)
        return [tenant.name for tenant in tenants]

    async def file_exists_anywhere(self, file_id: str) -> bool:
        """Whether any tenant holds committed chunks of ``file_id`` (a count only: nothing is read).

        Tells a tool call that reached for another tenant's document (counted as a tenant violation)
        from one that named a file that does not exist.
        """
        return await self.store.count(committed_file_filter(file_id)) > 0

    async def verify(self) -> CollectionManifest:
        """The store answers, a server is recent enough, and the manifest matches these settings.

        Readiness calls it on every probe, and the next query reads the collection afresh, so a
        mismatch that appeared or was fixed (the collection re-created) shows on the query paths too.
        """
        if isinstance(self.store, ServerStore):
            await self.store.check_version()
        self.forget_capabilities()
        return await verify_collection(self.store, self.settings, require_sparse=False)

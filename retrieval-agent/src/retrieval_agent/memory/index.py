"""The facts of each user as points of the shared collection, under the tenant ``memory-<user>``.

One point per fact (its id stable per user and fact), written with the contract's embeddings and the
lexical field of the fact's language, so recall runs the documents' hybrid search: dense, sparse and
BM25 legs fused by RRF in the store, restricted to the user's tenant on every leg. The fused
candidates' scores are then boosted for recently updated facts, here rather than by a formula query
over the fusion: a Qdrant server runs a fusion nested under a formula per shard, which would rank
each shard's facts apart. The candidates then pass a cosine floor and, for the chat context, an MMR
pick that keeps near-duplicates from filling it. A recalled fact's text is cut to
MEMORY_MAX_FACT_CHARS_IN_PROMPT, so a hand-written long file cannot fill the prompt.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from qdrant_client import models

from rag_runtime import lexical
from rag_runtime.embedding import DocumentVectors, QueryVectors, SparseVectorData
from rag_runtime.store import (
    ChunkPoint,
    ChunkStore,
    PointRecord,
    chunk_point,
    match,
    scroll_pages,
    tenant_condition,
    tenant_filter,
)
from retrieval_agent.adapters.store import StoreSearch
from retrieval_agent.memory.facts import Fact, clip_for_prompt
from retrieval_agent.memory.ranking import cosines, mmr
from retrieval_agent.search.query import DENSE_SEARCH, RESULT_PAYLOAD, FusionParams, hybrid_request
from retrieval_agent.search.scope import scoped_filter
from retrieval_agent.settings import Settings
from shared_contract import DENSE_VECTOR, PAYLOAD_CONTENT, PAYLOAD_META, MetaKey, meta_path
from shared_contract.schema import memory_collection_name

COLLECTION_TYPE: Final = "memory"
# Payload keys of a fact point beyond the contract's MetaKey.
CREATED_AT: Final = "created_at"
UPDATED_AT: Final = "updated_at"
CONVERSATION_ID: Final = "conversation_id"
SOURCE_MESSAGE_ID: Final = "source_message_id"

MIN_POOL: Final = 20
_SCROLL_PAGE: Final = 256
_UPSERT_BATCH: Final = 256
# More than the lexical languages there are (11 stemmed + the fallback).
_FACET_LIMIT: Final = 50
_SECONDS_PER_DAY: Final = 86_400.0
# A point without ``updated_at`` (none is written so) counts as updated long ago.
_UNKNOWN_UPDATE: Final = datetime(1970, 1, 1, tzinfo=UTC)


class MemoryEmbedder(Protocol):
    """What the index uses of :class:`shared_contract.ContractEmbedder`."""

    @property
    def sparse(self) -> object | None:
        """The sparse model, None when sparse embeddings are off."""
        ...

    async def aembed_documents(self, texts: Sequence[str], *, with_sparse: bool = False) -> DocumentVectors: ...

    async def aembed_query(self, text: str, *, with_sparse: bool = True) -> QueryVectors: ...


@dataclass(frozen=True, slots=True)
class IndexSync:
    """What one :meth:`MemoryIndex.sync` changed, in facts."""

    added: int = 0
    updated: int = 0
    removed: int = 0


@dataclass(frozen=True, slots=True)
class RankedFact:
    """One recalled fact."""

    fact_id: str
    # At most MEMORY_MAX_FACT_CHARS_IN_PROMPT characters (clip_for_prompt).
    text: str
    # The fused RRF score, times the recency boost when recency is on.
    score: float
    # Cosine of the query's dense vector to the fact's.
    relevance: float
    created_at: datetime
    updated_at: datetime
    conversation_id: str | None


def rfc3339(value: datetime) -> str:
    """``value`` in UTC as RFC 3339 with ``Z`` (the form Qdrant parses as a datetime)."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def point_id(user: str, fact_id: str) -> str:
    """The chunk id of a fact's point; :func:`rag_runtime.store.point_id_for` makes it a UUID."""
    return f"{memory_collection_name(user)}/{fact_id}"


def recency_boost(updated_at: datetime, *, now: datetime, half_life_days: float, weight: float) -> float:
    """``(1 - weight) + weight * 0.5 ** (age / half-life)``: the recency share halves every half-life
    (the age counts either way from ``now``, as Qdrant's ``exp_decay`` does)."""
    age = abs((now - updated_at).total_seconds())
    return (1.0 - weight) + weight * math.pow(0.5, age / (half_life_days * _SECONDS_PER_DAY))


def _parse_time(value: object) -> datetime:
    """A stored RFC 3339 time (written by :meth:`MemoryIndex.sync`) as an aware datetime."""
    parsed = datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _optional(value: object) -> str | None:
    return value if isinstance(value, str) else None


class MemoryIndex:
    """The memory tenants of the shared collection. One per app; ``settings`` supplies the fusion
    weights and the MEMORY_* ranking knobs."""

    def __init__(
        self,
        store: ChunkStore,
        embedder: MemoryEmbedder,
        settings: Settings,
        *,
        search_store: StoreSearch | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        # The collection's vectors (sparse or not, its IDF modifier) and its contract verdict, read as
        # search reads them: the app passes its own ``search_store``, so both refuse a mismatch together.
        self._capabilities = search_store if search_store is not None else StoreSearch(store, settings)

    async def _with_sparse(self) -> tuple[bool, bool]:
        """Whether sparse vectors are written and queried, and whether their leg takes an IDF scope."""
        if self.embedder.sparse is None:
            return False, False
        capabilities = await self._capabilities.capabilities()
        return capabilities.has_sparse, capabilities.sparse_idf

    # -- writing ----------------------------------------------------------------------------

    async def sync(self, user: str, facts: Sequence[Fact]) -> IndexSync:
        """Make the user's tenant hold exactly ``facts``: embed new and changed ones (by
        ``content_hash``), in one batch, and delete the points of facts no longer there."""
        tenant = memory_collection_name(user)
        stored = await self._stored_hashes(tenant)
        current = {fact.id: fact for fact in facts}
        changed = [fact for fact in current.values() if stored.get(fact.id) != fact.content_hash]
        removed = sorted(set(stored) - set(current))
        if changed:
            # Facts embedded under settings the collection was not built with would not be found.
            await self._capabilities.check_contract()
            with_sparse, _ = await self._with_sparse()
            vectors = await self.embedder.aembed_documents([fact.text for fact in changed], with_sparse=with_sparse)
            indexed_at = rfc3339(datetime.now(UTC))
            points = [
                self._point(
                    user,
                    fact,
                    dense=vectors.dense[position],
                    sparse=vectors.sparse[position] if vectors.sparse is not None else None,
                    indexed_at=indexed_at,
                )
                for position, fact in enumerate(changed)
            ]
            for start in range(0, len(points), _UPSERT_BATCH):
                await self.store.upsert(points[start : start + _UPSERT_BATCH])
        if removed:
            await self.store.delete(
                models.Filter(
                    must=[
                        tenant_condition([tenant]),
                        models.FieldCondition(key=meta_path(MetaKey.FILE_ID), match=models.MatchAny(any=removed)),
                    ]
                )
            )
        added = sum(1 for fact in changed if fact.id not in stored)
        return IndexSync(added=added, updated=len(changed) - added, removed=len(removed))

    async def _stored_hashes(self, tenant: str) -> dict[str, str]:
        """fact id -> content hash of every point in the tenant."""
        selector = models.Filter(must=[tenant_condition([tenant])])
        keys = [meta_path(MetaKey.FILE_ID), meta_path(MetaKey.CONTENT_HASH)]
        hashes: dict[str, str] = {}
        async for page in scroll_pages(self.store, selector, page_size=_SCROLL_PAGE, with_payload=keys):
            for record in page:
                meta = record.payload.get(PAYLOAD_META) or {}
                fact_id = meta.get(MetaKey.FILE_ID)
                if isinstance(fact_id, str):
                    hashes[fact_id] = str(meta.get(MetaKey.CONTENT_HASH) or "")
        return hashes

    @staticmethod
    def _point(
        user: str, fact: Fact, *, dense: Sequence[float], sparse: SparseVectorData | None, indexed_at: str
    ) -> ChunkPoint:
        meta: dict[str, Any] = {
            MetaKey.FILE_ID: fact.id,
            MetaKey.COLLECTION_NAME: memory_collection_name(user),
            # Written live: a fact has no pending state.
            MetaKey.LIVE_IN: memory_collection_name(user),
            MetaKey.COLLECTION_TYPE: COLLECTION_TYPE,
            MetaKey.NAME: fact.file_name,
            MetaKey.CONTENT_HASH: fact.content_hash,
            MetaKey.LANGUAGES: [fact.language],
            CREATED_AT: rfc3339(fact.created_at),
            UPDATED_AT: rfc3339(fact.updated_at),
            CONVERSATION_ID: fact.conversation_id,
            SOURCE_MESSAGE_ID: fact.source_message_id,
            MetaKey.INDEXED_AT: indexed_at,
        }
        return chunk_point(point_id(user, fact.id), fact.text, meta, dense=dense, sparse=sparse)

    async def forget(self, user: str) -> None:
        """Delete every point of the user's tenant."""
        await self.store.delete(models.Filter(must=[tenant_condition([memory_collection_name(user)])]))

    # -- recall -----------------------------------------------------------------------------

    def _conditions(self, conversation_id: str | None) -> list[models.Condition]:
        if conversation_id is not None:
            return [match(CONVERSATION_ID, conversation_id)]
        if self.settings.memory_scope == "conversation":
            # A turn outside any conversation sees only the facts learned outside one too.
            return [models.FieldCondition(key=meta_path(CONVERSATION_ID), is_empty=True)]
        return []

    async def search(
        self,
        user: str,
        text: str,
        *,
        k: int,
        conversation_id: str | None = None,
        now: datetime | None = None,
        recency: bool = True,
        diverse: bool = True,
    ) -> list[RankedFact]:
        """Up to ``k`` of the user's facts for ``text``, best first.

        ``conversation_id`` keeps the facts of that conversation only (MEMORY_SCOPE=conversation
        without one: the facts of no conversation). ``recency`` boosts recently updated facts
        (MEMORY_RECENCY_*; ``now`` is the decay's target, the current time by default); ``diverse``
        picks by MMR (MEMORY_MMR_LAMBDA) instead of by score. Facts whose cosine to ``text`` is below
        MEMORY_MIN_RELEVANCE are never returned. Reconciliation asks with neither recency nor diversity.
        """
        if k < 1 or not text.strip():
            return []
        tenant = memory_collection_name(user)
        languages = await self.store.facet(
            meta_path(MetaKey.LEXICAL_LANGUAGE), tenant_filter([tenant]), limit=_FACET_LIMIT
        )
        if not languages:
            return []  # nothing remembered: no embedding, no query
        request, query = await self._request(
            tenant,
            text,
            [str(count.value) for count in languages],
            pool=max(4 * k, MIN_POOL),
            conditions=self._conditions(conversation_id),
        )
        candidates = [
            (point, point.score, vector)
            for point in await self.store.query(request)
            if (vector := _dense(point)) is not None
        ]
        if recency:
            target = now if now is not None else datetime.now(UTC)
            candidates = [
                (point, score * self._recency_boost(point, target), vector) for point, score, vector in candidates
            ]
            candidates.sort(key=lambda candidate: candidate[1], reverse=True)
        relevance = cosines(query.dense, [vector for _, _, vector in candidates])
        kept = [
            (point, score, vector, cosine)
            for (point, score, vector), cosine in zip(candidates, relevance, strict=True)
            if cosine >= self.settings.memory_min_relevance
        ]
        if diverse:
            order = mmr(
                [score for _, score, _, _ in kept],
                [vector for _, _, vector, _ in kept],
                k=k,
                mmr_lambda=self.settings.memory_mmr_lambda,
            )
            kept = [kept[position] for position in order]
        max_chars = self.settings.memory_max_fact_chars_in_prompt
        return [_ranked(point, score, cosine, max_chars=max_chars) for point, score, _, cosine in kept[:k]]

    def _recency_boost(self, point: PointRecord, now: datetime) -> float:
        updated = (point.payload.get(PAYLOAD_META) or {}).get(UPDATED_AT)
        return recency_boost(
            _UNKNOWN_UPDATE if updated is None else _parse_time(updated),
            now=now,
            half_life_days=self.settings.memory_recency_half_life_days,
            weight=self.settings.memory_recency_weight,
        )

    async def _request(
        self,
        tenant: str,
        text: str,
        language_codes: Sequence[str],
        *,
        pool: int,
        conditions: Sequence[models.Condition],
    ) -> tuple[models.QueryRequest, QueryVectors]:
        """The recall request (and the query's vectors): the documents' hybrid fusion over the tenant,
        at the top level of the query so a sharded server fuses over all its shards."""
        settings = self.settings
        hybrid = settings.enable_hybrid_search
        with_sparse, sparse_idf = await self._with_sparse() if hybrid else (False, False)
        live_key = (await self._capabilities.capabilities()).live_key
        query = await self.embedder.aembed_query(text, with_sparse=with_sparse)
        params = FusionParams(
            k=settings.hybrid_rrf_k,
            dense_weight=settings.hybrid_dense_weight,
            sparse_weight=settings.hybrid_sparse_weight,
            lexical_weight=settings.hybrid_lexical_weight,
            prefetch_limit=pool,
            bm25_k1=settings.lexical_bm25_k1,
            bm25_b=settings.lexical_bm25_b,
        )
        fused = hybrid_request(
            dense=query.dense,
            sparse=query.sparse,
            text=text,
            lexical_fields=lexical.lexical_fields(language_codes) if hybrid else [],
            collection_names=[tenant],
            limit=pool,
            params=params,
            sparse_idf=sparse_idf,
            conditions=conditions,
            live_key=live_key,
        )
        selector = scoped_filter([tenant], conditions, live_key=live_key)
        common: dict[str, Any] = {
            "filter": selector,
            "limit": pool,
            "with_payload": list(RESULT_PAYLOAD),
            # Each candidate's dense vector: its cosine to the query (the floor) and to the others (MMR).
            "with_vector": [DENSE_VECTOR],
        }
        if fused is None:
            # Hybrid off, or no leg but the dense one: plain nearest neighbours (cosine scores).
            return (
                models.QueryRequest(query=list(query.dense), using=DENSE_VECTOR, params=DENSE_SEARCH, **common),
                query,
            )
        return models.QueryRequest(prefetch=fused.prefetch, query=fused.query, **common), query


def _dense(point: PointRecord) -> list[float] | None:
    vector = (point.vectors or {}).get(DENSE_VECTOR)
    return vector if isinstance(vector, list) else None


def _ranked(point: PointRecord, score: float, relevance: float, *, max_chars: int) -> RankedFact:
    meta: dict[str, Any] = point.payload.get(PAYLOAD_META) or {}
    return RankedFact(
        fact_id=str(meta.get(MetaKey.FILE_ID, "")),
        text=clip_for_prompt(str(point.payload.get(PAYLOAD_CONTENT, "")), max_chars),
        score=score,
        relevance=relevance,
        created_at=_parse_time(meta.get(CREATED_AT)),
        updated_at=_parse_time(meta.get(UPDATED_AT)),
        conversation_id=_optional(meta.get(CONVERSATION_ID)),
    )

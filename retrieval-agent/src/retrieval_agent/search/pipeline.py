"""The linear pipeline: resolve queries, embed, retrieve per query (concurrently), fuse, rerank, k.

Path per query, chosen on live collection capabilities (cached a few seconds):

- ``native_hybrid``: hybrid on: a dense leg, a sparse leg (when the collection has ``text-sparse``)
  and a BM25 leg over the lexical languages of the requested tenants (when the collection has the
  lexical text indexes), fused here by z-score (:mod:`.fusion`): the term legs are sent while the
  dense model runs (:func:`.embed.embed_beside`), the vector legs once the vectors are in, and the
  fused hits are read in one more call; ``HYBRID_FUSION=rrf``: one Query API call fused
  server-side with weighted RRF.
- ``bm25_fallback``: hybrid on but the collection has neither ``text-sparse`` nor a lexical text
  index (a collection another tool created): dense search fused with a bounded, cached
  client-side BM25 (last resort).
- ``dense``: hybrid off, or nothing but the dense leg to send (no sparse terms, no lexical data).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import anyio
import anyio.to_thread
from qdrant_client import models

from rag_runtime.embedding import ContractEmbedder, SparseVectorData
from rag_runtime.language_id import language_identifier
from rag_runtime.lexical import lexical_fields
from rag_runtime.store import PointRecord
from retrieval_agent.adapters.reranker import Reranker
from retrieval_agent.adapters.store import StoreSearch
from retrieval_agent.errors import first_leaf
from retrieval_agent.metrics import SearchMetrics, SearchPath
from retrieval_agent.relevance_models import FITTED_K
from retrieval_agent.search.embed import QueryVectorMemo, embed_beside, embed_hybrid_query, embed_query
from retrieval_agent.search.fusion import FusedCandidate, zscore_fuse
from retrieval_agent.search.leg_weights import (
    covered_share,
    dense_weight_for,
    lexical_fields_for,
    multilingual_weight_for,
)
from retrieval_agent.search.lexical import Bm25Cache
from retrieval_agent.search.postprocess import Hit, dense_score, newest_versions, point_to_hit, rrf_fuse, top_k
from retrieval_agent.search.queries import (
    ChatMessage,
    FollowUpPolicy,
    QueryGenerator,
    ResolvedQueries,
    resolve_queries,
)
from retrieval_agent.search.query import (
    FusionParams,
    HybridLegs,
    LegPlan,
    dense_request,
    fused_points_request,
    leg_requests,
    rrf_request,
)
from retrieval_agent.search.relevance import RelevanceCalibrator, non_increasing
from retrieval_agent.search.rerank import rerank
from retrieval_agent.search.scope import scoped_filter
from retrieval_agent.search.windows import NEIGHBOUR_PAYLOAD, by_position, neighbour_read, windowed
from retrieval_agent.settings import Settings
from shared_contract import StoreRequestError
from shared_contract.embedding_models import dense_model_languages

logger = logging.getLogger(__name__)

# How stale the cached capabilities may be when the tenants hold a language they show no index for.
CAPABILITY_REFRESH_SECONDS: Final = 1.0

# Identical texts (one file in two knowledge bases) collapse into one hit: when that leaves fewer
# than k, the candidates are fetched again this many times, twice as deep each time.
DEDUP_REFETCHES = 2


@dataclass(frozen=True, slots=True)
class RetrievedList:
    """One query's ranked candidates and the path that produced them."""

    query: str
    hits: list[Hit]
    path: SearchPath
    # The store returned fewer candidates than asked: a deeper fetch finds nothing more.
    exhausted: bool = True


@dataclass(frozen=True, slots=True)
class TermCandidates:
    """The term legs sent while the dense model ran, and what each returned."""

    legs: HybridLegs
    candidates: list[list[PointRecord]]
    # A text index was missing: the BM25 legs were dropped and the sparse leg alone (if any) sent.
    lexical_dropped: bool


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """What the API turns into a response."""

    result_sets: list[list[Hit]]
    resolved: ResolvedQueries
    paths: list[SearchPath]


class LinearSearch:
    """Holds the open clients and runs the linear pipeline; one per app."""

    def __init__(
        self,
        settings: Settings,
        *,
        store: StoreSearch,
        embedder: ContractEmbedder,
        metrics: SearchMetrics,
        reranker: Reranker | None = None,
        generator: QueryGenerator | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.metrics = metrics
        self.reranker = reranker
        self.generator = generator
        self.bm25 = Bm25Cache(
            ttl_seconds=settings.bm25_cache_ttl_seconds, max_docs=settings.bm25_max_docs, metrics=metrics
        )
        # When the store said a text index is missing, skip the BM25 legs for a while.
        self._lexical_unsupported_at: float | None = None
        self._dense_languages = dense_model_languages(settings.embedding_model)
        self.follow_up = FollowUpPolicy(mode=settings.followup_context, max_words=settings.followup_max_words)
        self.calibrator = RelevanceCalibrator(
            settings.relevance_models,
            reranker_scale=settings.effective_reranker_score_scale,
            dense_languages=self._dense_languages,
        )

    def fusion(
        self,
        limit: int,
        language_mix: Mapping[str, int] | None = None,
        *,
        multilingual: bool = False,
        query: str | None = None,
    ) -> FusionParams:
        """Fusion parameters for one hybrid request returning ``limit`` hits over tenants with this
        language mix; ``multilingual``: the collection has ``text-dense-multilingual``. With the
        ``query`` (QUERY_LANGUAGE_ROUTING), the dense legs are weighed by the query's language."""
        settings = self.settings
        multilingual_weight = 0.0
        query_language: str | None = None
        if multilingual and self.embedder.multilingual is not None:
            # Over tenants whose chunks the dense model reads, every query stays with it: no detection.
            share = covered_share(language_mix or {}, self._dense_languages)
            if query is not None and settings.query_language_routing and share is not None and share < 1.0:
                query_language = language_identifier().query_language(query)
            multilingual_weight = multilingual_weight_for(
                language_mix or {},
                self._dense_languages,
                weight=settings.hybrid_multilingual_weight,
                query_language=query_language,
            )
        return FusionParams(
            k=settings.hybrid_rrf_k,
            dense_weight=dense_weight_for(
                language_mix or {},
                self._dense_languages,
                covered=settings.hybrid_dense_weight,
                other=settings.hybrid_dense_weight_other_languages,
                query_language=query_language,
            ),
            sparse_weight=settings.hybrid_sparse_weight,
            lexical_weight=settings.hybrid_lexical_weight,
            prefetch_limit=max(limit, FITTED_K) * settings.hybrid_prefetch_multiplier,
            bm25_k1=settings.lexical_bm25_k1,
            bm25_b=settings.lexical_bm25_b,
            method=settings.hybrid_fusion,
            multilingual_weight=multilingual_weight,
        )

    async def retrieve(
        self,
        query: str,
        collection_names: Sequence[str],
        limit: int,
        *,
        conditions: Sequence[models.Condition] = (),
        memo: QueryVectorMemo | None = None,
        depth: int | None = None,
    ) -> RetrievedList:
        """Up to ``limit`` candidates for one query from the tenants in ``collection_names``.

        ``depth`` (default ``limit``) sizes the legs' prefetch: candidates past it come from the same
        leg lists, so asking for spare ones does not reorder the first ``depth``.
        ``conditions`` (the request's ``filter``, the agent's metadata filters) are ANDed with the tenant
        filter on every leg. ``memo``: the request's query vectors, kept for a deeper fetch of the query.
        """
        capabilities = await self.store.capabilities()
        live_key = capabilities.live_key
        if not self.settings.enable_hybrid_search:
            return await self._dense(
                query, collection_names, limit, conditions=conditions, live_key=live_key, memo=memo
            )
        # The tenants' language mix picks the BM25 fields and weighs the dense legs (a foreign
        # collection without lexical fields has no ``meta.lexical_language`` index to ask).
        language_mix: dict[str, int] = {}
        if capabilities.own_layout or capabilities.lexical_fields:
            language_mix = await self.store.lexical_languages(collection_names)
        if not capabilities.lexical_fields.issuperset(lexical_fields(list(language_mix))):
            # A language whose first chunks were written after the capabilities were read: its text
            # index is new, so read them again (at most once a second).
            capabilities = await self.store.capabilities(max_age=CAPABILITY_REFRESH_SECONDS)
        sparse = capabilities.has_sparse and self.embedder.sparse is not None
        lexical = bool(capabilities.lexical_fields) and self._lexical_supported()
        if not sparse and not lexical:
            if conditions:
                # The client-side BM25 corpus is cached per tenant set, unfiltered: a filtered search on
                # this last-resort path is dense only.
                return await self._dense(
                    query, collection_names, limit, conditions=conditions, live_key=live_key, memo=memo
                )
            return await self._bm25_fallback(query, collection_names, limit, memo=memo)
        fields = lexical_fields_for(language_mix, capabilities.lexical_fields) if lexical else []
        params = self.fusion(depth or limit, language_mix, multilingual=capabilities.has_multilingual, query=query)
        plan = LegPlan(
            text=query,
            collection_names=collection_names,
            params=params,
            sparse_idf=capabilities.sparse_idf,
            conditions=conditions,
            live_key=live_key,
        )
        if params.method == "rrf":
            return await self._rrf(plan, limit, fields, with_sparse=sparse, memo=memo)

        # z-score: the term legs go out while the dense model runs; the vector legs follow.
        async def send_term_legs(sparse_vector: SparseVectorData | None) -> TermCandidates:
            legs = plan.terms(sparse_vector, fields)
            try:
                return TermCandidates(legs, await self._candidates(legs), lexical_dropped=False)
            except StoreRequestError as exc:
                if not (exc.missing_text_index and fields):
                    raise
                self._lexical_missing(exc)
                legs = plan.terms(sparse_vector, ())
                return TermCandidates(legs, await self._candidates(legs), lexical_dropped=True)

        vectors, multilingual, term_candidates = await embed_beside(
            self.embedder,
            query,
            with_sparse=sparse,
            with_multilingual=params.multilingual_weight > 0,
            metrics=self.metrics,
            beside=send_term_legs,
            memo=memo,
        )
        vector = plan.vectors(vectors.dense, multilingual)
        legs = vector.then(term_candidates.legs)
        if not legs.fuses():
            if term_candidates.lexical_dropped and not conditions:
                return await self._bm25_fallback(query, collection_names, limit, dense=vectors.dense)
            return await self._dense(
                query, collection_names, limit, dense=vectors.dense, conditions=conditions, live_key=live_key
            )
        candidates = [*await self._candidates(vector), *term_candidates.candidates]
        hits, exhausted = await self._read_fused(
            zscore_fuse(candidates, legs.weights, limit, depth=FITTED_K * self.settings.hybrid_prefetch_multiplier),
            vectors.dense,
            collection_names,
            limit,
            conditions,
            live_key,
        )
        return self._done(query, newest_versions(hits), "native_hybrid", exhausted=exhausted)

    async def _candidates(self, legs: HybridLegs) -> list[list[PointRecord]]:
        """Each leg's ids and raw scores, in one batch (none for no legs)."""
        if not legs.legs:
            return []
        with self.metrics.time_stage("qdrant"):
            return await self.store.query_batch(leg_requests(legs))

    async def _rrf(
        self, plan: LegPlan, limit: int, fields: Sequence[str], *, with_sparse: bool, memo: QueryVectorMemo | None
    ) -> RetrievedList:
        """``HYBRID_FUSION=rrf``: every leg fused in the store by weighted RRF, one request (after the
        query's vectors, which every leg of it needs)."""
        query, collection_names, conditions = plan.text, plan.collection_names, plan.conditions
        vectors, multilingual = await embed_hybrid_query(
            self.embedder,
            query,
            with_sparse=with_sparse,
            with_multilingual=plan.params.multilingual_weight > 0,
            metrics=self.metrics,
            memo=memo,
        )
        vector = plan.vectors(vectors.dense, multilingual)

        async def fused(legs: HybridLegs) -> RetrievedList:
            with self.metrics.time_stage("qdrant"):
                points = await self.store.query(rrf_request(legs, k=plan.params.k, limit=limit))
            hits = [point_to_hit(point, cosine_to=vectors.dense) for point in points]
            return self._done(query, newest_versions(hits), "native_hybrid", exhausted=len(points) < limit)

        def dense_only() -> Awaitable[RetrievedList]:
            return self._dense(
                query, collection_names, limit, dense=vectors.dense, conditions=conditions, live_key=plan.live_key
            )

        legs = vector.then(plan.terms(vectors.sparse, fields))
        if not legs.fuses():
            return await dense_only()
        try:
            return await fused(legs)
        except StoreRequestError as exc:
            if not (exc.missing_text_index and fields):
                raise
            self._lexical_missing(exc)
        legs = vector.then(plan.terms(vectors.sparse, ()))
        if legs.fuses():
            return await fused(legs)
        if conditions:
            return await dense_only()
        return await self._bm25_fallback(query, collection_names, limit, dense=vectors.dense)

    async def _read_fused(
        self,
        fused: Sequence[FusedCandidate],
        dense: Sequence[float],
        collection_names: Sequence[str],
        limit: int,
        conditions: Sequence[models.Condition],
        live_key: bool,
    ) -> tuple[list[Hit], bool]:
        """The fused candidates' payloads and cosines, and whether the store ran out of candidates."""
        if not fused:
            return [], True
        with self.metrics.time_stage("qdrant"):
            points = await self.store.query(
                fused_points_request(
                    dense,
                    [candidate.point_id for candidate in fused],
                    collection_names,
                    conditions,
                    live_key=live_key,
                )
            )
        # A point deleted between the two calls is gone from the second: it drops out.
        read = {point.point_id: point for point in points}
        hits = [
            point_to_hit(read[candidate.point_id], candidate.score, known_cosine=read[candidate.point_id].score)
            for candidate in fused
            if candidate.point_id in read
        ]
        return hits, len(fused) < limit

    async def _dense(
        self,
        query: str,
        collection_names: Sequence[str],
        limit: int,
        *,
        dense: Sequence[float] | None = None,
        conditions: Sequence[models.Condition] = (),
        live_key: bool = False,
        memo: QueryVectorMemo | None = None,
    ) -> RetrievedList:
        if dense is None:
            dense = (await embed_query(self.embedder, query, with_sparse=False, metrics=self.metrics, memo=memo)).dense
        with self.metrics.time_stage("qdrant"):
            points = await self.store.query(
                dense_request(dense, collection_names, limit, conditions=conditions, live_key=live_key)
            )
        hits = [point_to_hit(point, dense_score(point.score), known_cosine=point.score) for point in points]
        return self._done(query, newest_versions(hits), "dense", exhausted=len(points) < limit)

    async def _bm25_fallback(
        self,
        query: str,
        collection_names: Sequence[str],
        limit: int,
        *,
        dense: Sequence[float] | None = None,
        memo: QueryVectorMemo | None = None,
    ) -> RetrievedList:
        if dense is None:
            dense = (await embed_query(self.embedder, query, with_sparse=False, metrics=self.metrics, memo=memo)).dense
        prefetch = max(limit, FITTED_K) * self.settings.hybrid_prefetch_multiplier
        with self.metrics.time_stage("qdrant"):
            points = await self.store.query(dense_request(dense, collection_names, prefetch))
        dense_hits = [point_to_hit(point, dense_score(point.score), known_cosine=point.score) for point in points]
        with self.metrics.time_stage("bm25"):
            index = await self.bm25.index_for(
                collection_names, lambda max_docs: self._load_corpus(collection_names, max_docs)
            )
            lexical_hits = await anyio.to_thread.run_sync(index.search, query, prefetch)
        fused = rrf_fuse(
            [dense_hits, lexical_hits],
            k=self.settings.hybrid_rrf_k,
            limit=2 * prefetch,
            weights=[self.settings.hybrid_dense_weight, self.settings.hybrid_lexical_weight],
        )
        exhausted = len(fused) < limit
        return self._done(query, newest_versions(fused)[:limit], "bm25_fallback", exhausted=exhausted)

    def _lexical_supported(self) -> bool:
        marked = self._lexical_unsupported_at
        return marked is None or time.monotonic() - marked >= self.settings.lexical_retry_after_seconds

    def _lexical_missing(self, exc: StoreRequestError) -> None:
        """A text index vanished under a BM25 leg: count it, stop sending those legs for a while."""
        self._lexical_unsupported_at = time.monotonic()
        self.store.forget_capabilities()
        self.metrics.lexical_retries.inc()
        logger.warning("a lexical text index is missing, retrying without BM25 legs: %s", exc)

    def fused_scale(self, path: SearchPath) -> float:
        """What turns a path's fused score into the calibration feature: RRF scores times their k."""
        if path == "native_hybrid" and self.settings.hybrid_fusion == "zscore":
            return 1.0
        return float(self.settings.hybrid_rrf_k)

    async def _load_corpus(self, collection_names: Sequence[str], max_docs: int) -> list[Hit]:
        records = await self.store.scroll_contents(collection_names, max_docs)
        return [point_to_hit(record, 0.0) for record in records]

    def _done(self, query: str, hits: list[Hit], path: SearchPath, *, exhausted: bool) -> RetrievedList:
        self.metrics.path.labels(path=path).inc()
        calibrated = self.calibrator.retrieved(hits, path, fused_scale=self.fused_scale(path))
        return RetrievedList(query=query, hits=calibrated, path=path, exhausted=exhausted)

    async def search(
        self,
        *,
        queries: Sequence[str] | None,
        messages: Sequence[ChatMessage] | None,
        collection_names: Sequence[str],
        k: int,
        template: str | None = None,
        use_generator: bool = True,
        conditions: Sequence[models.Condition] = (),
    ) -> SearchOutcome:
        """Run the whole linear pipeline for one request.

        ``use_generator=False``: no LLM writes the queries (the agent's fallback, when that LLM just failed).
        ``conditions`` (the request's ``filter``) narrow every retrieval, refetches included.
        Refused (ContractMismatchError) while the collection's contract disagrees, before any LLM call.
        """
        await self.store.check_contract()
        resolved = await resolve_queries(
            queries,
            messages,
            generator=self.generator if use_generator else None,
            metrics=self.metrics,
            template=template or self.settings.retrieval_query_generation_prompt_template,
            follow_up=self.follow_up,
        )
        if not resolved.queries:
            return SearchOutcome(result_sets=[[]], resolved=resolved, paths=[])
        fetch_k = k * self.settings.initial_retrieval_multiplier if self.reranker is not None else k
        # Windows drop hits an earlier window shows: spare candidates fill their places (half of k
        # is enough for 94 % of SciFact's queries; the rest fetch again, deeper).
        spare = max(1, k // 2) if self.settings.search_window_chars > 0 else 0
        memo = QueryVectorMemo()  # a deeper fetch reuses the queries' vectors
        for refetch in range(DEDUP_REFETCHES + 1):
            if len(resolved.queries) == 1:
                # The common case: no task group (a task spawn and a loop turn per request).
                lists = [
                    await self.retrieve(
                        resolved.queries[0],
                        collection_names,
                        fetch_k + spare,
                        conditions=conditions,
                        memo=memo,
                        depth=fetch_k,
                    )
                ]
            else:
                lists = await self.retrieve_all(
                    resolved.queries, collection_names, fetch_k + spare, conditions=conditions, memo=memo, depth=fetch_k
                )
            sets = await self._result_sets(
                lists, resolved, k, fetch_k, spare, collection_names=collection_names, conditions=conditions
            )
            enough = all(len(hits) >= k for hits in sets)
            if enough or all(item.exhausted for item in lists) or refetch == DEDUP_REFETCHES:
                break
            self.metrics.dedup_refetches.inc()
            fetch_k *= 2
        return SearchOutcome(result_sets=sets, resolved=resolved, paths=[item.path for item in lists])

    async def _result_sets(
        self,
        lists: Sequence[RetrievedList],
        resolved: ResolvedQueries,
        k: int,
        fetch_k: int,
        spare: int,
        *,
        collection_names: Sequence[str],
        conditions: Sequence[models.Condition],
    ) -> list[list[Hit]]:
        """The response's lists: one per query, or one merged list."""
        if self.settings.search_result_sets == "per_query":
            return [
                await self.finish(item.hits, item.query, k, collection_names=collection_names, conditions=conditions)
                for item in lists
            ]
        merged = self.merge([item.hits for item in lists], fetch_k + spare, depth=fetch_k)
        primary = resolved.primary or resolved.queries[0]
        return [await self.finish(merged, primary, k, collection_names=collection_names, conditions=conditions)]

    async def retrieve_all(
        self,
        queries: Sequence[str],
        collection_names: Sequence[str],
        limit: int,
        *,
        conditions: Sequence[models.Condition] = (),
        memo: QueryVectorMemo | None = None,
        depth: int | None = None,
    ) -> list[RetrievedList]:
        """Every query's candidates, retrieved concurrently, in query order (``depth``: see :meth:`retrieve`)."""
        if len(queries) == 1:
            return [
                await self.retrieve(queries[0], collection_names, limit, conditions=conditions, memo=memo, depth=depth)
            ]
        retrieved: list[RetrievedList | None] = [None] * len(queries)

        async def one(index: int, query: str) -> None:
            retrieved[index] = await self.retrieve(
                query, collection_names, limit, conditions=conditions, memo=memo, depth=depth
            )

        try:
            async with anyio.create_task_group() as group:
                for index, query in enumerate(queries):
                    group.start_soon(one, index, query)
        except BaseExceptionGroup as group_error:
            # Surface the first typed failure so it maps to its wire code.
            raise first_leaf(group_error) from None
        return [item for item in retrieved if item is not None]

    def merge(self, rankings: Sequence[Sequence[Hit]], limit: int, *, depth: int | None = None) -> list[Hit]:
        """One list from several queries' lists: RRF across queries, dedup by content hash.

        ``depth``: the first ``depth`` hits are fused from each list's first ``depth`` alone (deeper
        hits would add to their scores and reorder them); the spare ones after them from the whole lists.
        """
        if len(rankings) == 1:
            return top_k(rankings[0], limit)
        rrf_k = self.settings.multi_query_rrf_k
        depth = limit if depth is None else min(depth, limit)
        head = rrf_fuse([ranking[:depth] for ranking in rankings], k=rrf_k, limit=depth)
        if depth == limit:
            return head
        shown = {hit.content_hash for hit in head}
        spare = [hit for hit in rrf_fuse(rankings, k=rrf_k, limit=limit) if hit.content_hash not in shown]
        return head + spare[: limit - len(head)]

    async def finish(
        self,
        candidates: Sequence[Hit],
        query: str,
        k: int,
        *,
        collection_names: Sequence[str],
        conditions: Sequence[models.Condition] = (),
        rerank_hits: bool = True,
    ) -> list[Hit]:
        """Newest versions, dedup, optional rerank against ``query``, at most ``k``, each read with its
        neighbours (the last step of a search).

        The neighbours come from ``collection_names`` under ``conditions`` (the candidates' own scope).
        ``rerank_hits=False`` skips the reranker (the agent's direct search from plain-text queries).
        """
        # Lists of several queries may hold two versions of one file: narrowed once more here.
        unique = top_k(newest_versions(candidates), len(candidates))
        # With windows, every candidate may be needed: a hit an earlier window shows gives its place.
        depth = len(unique) if self.settings.search_window_chars > 0 else k
        if self.reranker is not None and rerank_hits:
            reranked = await rerank(self.reranker, query, unique, depth, self.metrics, calibrator=self.calibrator)
            ranked = non_increasing(top_k(reranked, depth))
        else:
            ranked = non_increasing(unique[:depth])
        return await self.windows(ranked, k, collection_names=collection_names, conditions=conditions)

    async def windows(
        self,
        ranked: Sequence[Hit],
        k: int,
        *,
        collection_names: Sequence[str],
        conditions: Sequence[models.Condition] = (),
    ) -> list[Hit]:
        """The first ``k`` results, each read with its neighbouring chunks (:mod:`.windows`) from the
        same scope; the chunks alone when SEARCH_WINDOW_CHARS is 0."""
        budget = self.settings.search_window_chars
        if budget == 0 or not ranked:
            return list(ranked[:k])
        # One read for every candidate: a later one takes the place of a hit an earlier window shows.
        wanted = neighbour_read(ranked)
        records: list[PointRecord] = []
        if wanted.spans or (wanted.point_ids and conditions):
            live_key = (await self.store.capabilities()).live_key
            scope = scoped_filter(collection_names, conditions, live_key=live_key)
            with self.metrics.time_stage("windows"):
                records = await self.store.chunks_around(
                    wanted.point_ids, wanted.spans, scope, payload=NEIGHBOUR_PAYLOAD
                )
        elif wanted.point_ids:
            # Ids derived from the hits' own file versions, with no request filter to apply: read by
            # id, with no filter for the engine to plan.
            with self.metrics.time_stage("windows"):
                records = await self.store.committed_by_id(
                    wanted.point_ids, collection_names, payload=NEIGHBOUR_PAYLOAD
                )
        return windowed(ranked, by_position(records, ranked), max_chars=budget, k=k)

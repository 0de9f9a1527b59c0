"""The linear pipeline: resolve queries, embed, retrieve per query (concurrently), fuse, rerank, k.

Path per query, chosen on live collection capabilities (cached a few seconds):

- ``native_hybrid``: hybrid on and the collection has ``text-sparse``: one Query API call with
  dense and sparse prefetch legs and server-side weighted RRF.
- ``lexical_fallback``: hybrid on, no ``text-sparse``: dense leg plus Qdrant's own BM25 text
  query over the ``content`` full-text index, fused server-side.
- ``bm25_fallback``: as above but Qdrant has no scoring text index: dense search fused with a
  bounded, cached client-side BM25 (last resort).
- ``dense``: hybrid off.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import anyio

from retrieval_agent.adapters.qdrant import QdrantSearch
from retrieval_agent.adapters.reranker import Reranker
from retrieval_agent.errors import LexicalIndexMissingError
from retrieval_agent.metrics import SearchMetrics, SearchPath
from retrieval_agent.search.embed import embed_query
from retrieval_agent.search.lexical import Bm25Cache
from retrieval_agent.search.postprocess import Hit, dense_score, point_to_hit, rrf_fuse, top_k
from retrieval_agent.search.queries import ChatMessage, QueryGenerator, ResolvedQueries, resolve_queries
from retrieval_agent.search.query import FusionParams, dense_request, hybrid_request, lexical_request
from retrieval_agent.search.rerank import rerank
from retrieval_agent.settings import Settings
from shared_contract import ContractEmbedder

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetrievedList:
    """One query's ranked candidates and the path that produced them."""

    query: str
    hits: list[Hit]
    path: SearchPath


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
        qdrant: QdrantSearch,
        embedder: ContractEmbedder,
        metrics: SearchMetrics,
        reranker: Reranker | None = None,
        generator: QueryGenerator | None = None,
    ) -> None:
        self.settings = settings
        self.qdrant = qdrant
        self.embedder = embedder
        self.metrics = metrics
        self.reranker = reranker
        self.generator = generator
        self.bm25 = Bm25Cache(
            ttl_seconds=settings.bm25_cache_ttl_seconds, max_docs=settings.bm25_max_docs, metrics=metrics
        )
        # When Qdrant said it cannot run text queries, skip asking again for a while.
        self._lexical_unsupported_at: float | None = None

    def fusion(self, limit: int, lexical: bool = False) -> FusionParams:
        """RRF parameters for one hybrid request returning ``limit`` hits."""
        second = self.settings.bm25_weight if lexical else self.settings.hybrid_sparse_weight
        return FusionParams(
            k=self.settings.hybrid_rrf_k,
            weights=(self.settings.hybrid_dense_weight, second),
            prefetch_limit=limit * self.settings.hybrid_prefetch_multiplier,
        )

    async def retrieve(self, query: str, collection_names: Sequence[str], limit: int) -> RetrievedList:
        """Up to ``limit`` candidates for one query from the tenants in ``collection_names``."""
        capabilities = await self.qdrant.capabilities()
        hybrid = self.settings.enable_hybrid_search
        native = hybrid and capabilities.has_sparse and self.embedder.sparse is not None
        vectors = await embed_query(self.embedder, query, with_sparse=native, metrics=self.metrics)
        if native and vectors.sparse is not None and vectors.sparse.indices:
            request = hybrid_request(vectors.dense, vectors.sparse, collection_names, limit, self.fusion(limit))
            with self.metrics.time_stage("qdrant"):
                points = await self.qdrant.query(request)
            return self._done(query, [point_to_hit(point) for point in points], "native_hybrid")
        if hybrid and not native and self._lexical_supported():
            request = lexical_request(vectors.dense, query, collection_names, limit, self.fusion(limit, lexical=True))
            try:
                with self.metrics.time_stage("qdrant"):
                    points = await self.qdrant.query(request, lexical=True)
            except LexicalIndexMissingError as exc:
                self._lexical_unsupported_at = time.monotonic()
                logger.warning("no scoring text index on content, using client-side BM25: %s", exc)
            else:
                return self._done(query, [point_to_hit(point) for point in points], "lexical_fallback")
        prefetch = limit * self.settings.hybrid_prefetch_multiplier if hybrid and not native else limit
        with self.metrics.time_stage("qdrant"):
            points = await self.qdrant.query(dense_request(vectors.dense, collection_names, prefetch))
        dense_hits = [point_to_hit(point, dense_score(point.score)) for point in points]
        if not hybrid or native:
            return self._done(query, dense_hits[:limit], "dense")
        with self.metrics.time_stage("bm25"):
            index = await self.bm25.index_for(
                collection_names, lambda max_docs: self._load_corpus(collection_names, max_docs)
            )
            lexical_hits = index.search(query, prefetch)
        fused = rrf_fuse(
            [dense_hits, lexical_hits],
            k=self.settings.hybrid_rrf_k,
            limit=limit,
            weights=[self.settings.hybrid_dense_weight, self.settings.bm25_weight],
        )
        return self._done(query, fused, "bm25_fallback")

    def _lexical_supported(self) -> bool:
        marked = self._lexical_unsupported_at
        return marked is None or time.monotonic() - marked >= self.settings.bm25_cache_ttl_seconds

    async def _load_corpus(self, collection_names: Sequence[str], max_docs: int) -> list[Hit]:
        records = await self.qdrant.scroll_contents(collection_names, max_docs)
        return [point_to_hit(record, 0.0) for record in records]

    def _done(self, query: str, hits: list[Hit], path: SearchPath) -> RetrievedList:
        self.metrics.path.labels(path=path).inc()
        return RetrievedList(query=query, hits=hits, path=path)

    async def search(
        self,
        *,
        queries: Sequence[str] | None,
        messages: Sequence[ChatMessage] | None,
        collection_names: Sequence[str],
        k: int,
        template: str | None = None,
    ) -> SearchOutcome:
        """Run the whole linear pipeline for one request."""
        resolved = await resolve_queries(
            queries,
            messages,
            generator=self.generator,
            metrics=self.metrics,
            template=template or self.settings.retrieval_query_generation_prompt_template,
        )
        if not resolved.queries:
            return SearchOutcome(result_sets=[[]], resolved=resolved, paths=[])
        fetch_k = k * self.settings.initial_retrieval_multiplier if self.reranker is not None else k
        retrieved: list[RetrievedList | None] = [None] * len(resolved.queries)

        async def one(index: int, query: str) -> None:
            retrieved[index] = await self.retrieve(query, collection_names, fetch_k)

        try:
            async with anyio.create_task_group() as group:
                for index, query in enumerate(resolved.queries):
                    group.start_soon(one, index, query)
        except BaseExceptionGroup as group_error:
            # Surface the first typed failure so it maps to its wire code.
            raise _first_leaf(group_error) from None
        lists = [item for item in retrieved if item is not None]
        paths = [item.path for item in lists]
        if self.settings.search_result_sets == "per_query":
            sets = [await self._finish(item.hits, item.query, k) for item in lists]
            return SearchOutcome(result_sets=sets, resolved=resolved, paths=paths)
        merged = self.merge([item.hits for item in lists], fetch_k)
        primary = resolved.primary or resolved.queries[0]
        return SearchOutcome(result_sets=[await self._finish(merged, primary, k)], resolved=resolved, paths=paths)

    def merge(self, rankings: Sequence[Sequence[Hit]], limit: int) -> list[Hit]:
        """One list from several queries' lists: RRF across queries, dedup by content hash."""
        if len(rankings) == 1:
            return top_k(rankings[0], limit)
        return rrf_fuse(rankings, k=self.settings.multi_query_rrf_k, limit=limit)

    async def _finish(self, candidates: Sequence[Hit], query: str, k: int) -> list[Hit]:
        unique = top_k(candidates, len(candidates))
        if self.reranker is not None:
            return top_k(await rerank(self.reranker, query, unique, k, self.metrics), k)
        return [replace(hit) for hit in unique[:k]]


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first

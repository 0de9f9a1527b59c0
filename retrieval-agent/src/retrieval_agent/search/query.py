"""Pure builders of the store requests the pipeline sends; no store involved.

Every leg carries the tenant filter (committed points of the requested tenants only), so fusion
never sees another tenant's chunk or a run's pending points. The sparse leg (when its vector has
the IDF modifier) and the BM25 legs also compute IDF over that filter, so the documents of one
tenant never shift another tenant's scores in the shared collection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from qdrant_client import models

from rag_runtime.embedding import SparseVectorData
from rag_runtime.store import committed_filter
from retrieval_agent.search.scope import scoped_filter
from shared_contract import DENSE_VECTOR, MULTILINGUAL_VECTOR, PAYLOAD_CONTENT, PAYLOAD_META, SPARSE_VECTOR

# The lexical copies (``lexical_<code>``) duplicate ``content``: never read them back.
RESULT_PAYLOAD = (PAYLOAD_CONTENT, PAYLOAD_META)


FusionMethod = Literal["zscore", "rrf"]


@dataclass(frozen=True, slots=True)
class FusionParams:
    """How the hybrid legs are fused: ``zscore`` (weighted standardised scores, fused by the service:
    :mod:`retrieval_agent.search.fusion`) or ``rrf`` (Qdrant's weighted RRF in one request,
    ``sum(1 / ((rank + 1) / w + k - 1))`` over 0-based ranks; ``k`` applies to it only).

    A leg whose weight is 0 would add nothing but zero-score candidates, so it is not sent.
    """

    k: int
    dense_weight: float
    sparse_weight: float
    lexical_weight: float  # the BM25 leg's weight
    prefetch_limit: int
    bm25_k1: float | None = None  # None: the engine's default (1.2)
    bm25_b: float | None = None  # None: the engine's default (0.75)
    method: FusionMethod = "rrf"
    multilingual_weight: float = 0.0  # the ``text-dense-multilingual`` leg's weight


def idf_scope(selector: models.Filter) -> models.SearchParams:
    """IDF over the points ``selector`` matches instead of the whole shared collection."""
    # model_construct: validating ``idf`` tries the IdfScope enum first, whose failure formats the
    # whole filter into an error message (~50 µs per request); the parts are validated models already.
    return models.SearchParams.model_construct(idf=models.IdfCorpusParams(corpus=selector))


def text_query(text: str, params: FusionParams) -> models.TextQuery:
    """A BM25 text query; k1/b are sent only when configured."""
    if params.bm25_k1 is None and params.bm25_b is None:
        return models.TextQuery(text=text)
    return models.TextQuery(
        text=models.TextQueryInput(
            query=text, scoring=models.Bm25Scoring(bm25=models.Bm25Params(k=params.bm25_k1, b=params.bm25_b))
        )
    )


def lexical_prefetch(
    query: models.TextQuery,
    fields: Sequence[str],
    selector: models.Filter,
    idf: models.SearchParams,
    limit: int,
) -> models.Prefetch:
    """The BM25 leg: one text query per lexical field, merged by raw BM25 score into one ranking.

    Each chunk lives in exactly one language field, so the sum of the fields' scores is the
    chunk's own BM25 score, and the fields share one IDF corpus (the tenants). Fusing the fields
    by rank instead would put the best chunk of a tiny field (nine Danish chunks in a Norwegian
    tenant) level with the best Norwegian one: that cost 0.13 nDCG@10 on NorQuAD dev.
    """
    legs = [models.Prefetch(query=query, using=field, filter=selector, params=idf, limit=limit) for field in fields]
    if len(legs) == 1:
        return legs[0]
    scores: list[models.Expression] = [f"$score[{index}]" for index in range(len(legs))]
    return models.Prefetch(
        prefetch=legs,
        query=models.FormulaQuery(
            formula=models.SumExpression(sum=scores), defaults={f"$score[{index}]": 0.0 for index in range(len(legs))}
        ),
        limit=limit,
    )


# Past this many tenants a nearest-neighbour leg scans their points exactly instead of searching
# each tenant's graph (each graph search is a request part carrying the whole query vector).
PER_TENANT_GRAPH_SEARCHES = 16

# ``text-dense`` has int8 copies (the layout's DENSE_QUANTIZATION): a graph search walks them, takes
# twice the candidates it returns and rescores those with the original vectors, so every hit keeps
# its exact cosine (the fusion and the calibrated relevance use it). On SciFact's 300 test queries
# the top 20 matched the unquantized graph's in 297 (docs/benchmarks.md).
DENSE_SEARCH: Final = models.SearchParams(quantization=models.QuantizationSearchParams(rescore=True, oversampling=2.0))
# An exact scan or a read of known points scores on the originals alone.
EXACT_DENSE: Final = models.SearchParams(exact=True, quantization=models.QuantizationSearchParams(ignore=True))
ORIGINAL_VECTORS: Final = models.SearchParams(quantization=models.QuantizationSearchParams(ignore=True))


def nearest_leg(
    vector: Sequence[float],
    using: str,
    collection_names: Sequence[str],
    limit: int,
    conditions: Sequence[models.Condition] = (),
    *,
    live_key: bool = False,
) -> models.Prefetch:
    """Nearest neighbours on ``using`` among the tenants' committed points (raw cosine scores).

    The collection builds one HNSW graph per tenant and no global one (``m=0, payload_m=16``), so a
    graph search whose filter spans several tenants walks one tenant's links only: over two
    5k-chunk tenants it found 2 % of the true top 20 (docs/benchmarks.md). Several tenants are
    therefore searched one by one, each on its own graph, and the union is scored by the same
    vector (the exact top ``limit``); past PER_TENANT_GRAPH_SEARCHES tenants their points are
    scanned exactly. Filters small enough for the engine's full scan take that path either way.
    """
    tenants = list(dict.fromkeys(collection_names))
    graph = DENSE_SEARCH if using == DENSE_VECTOR else None
    if len(tenants) == 1:
        return models.Prefetch(
            query=list(vector),
            using=using,
            filter=scoped_filter(tenants, conditions, live_key=live_key),
            params=graph,
            limit=limit,
        )
    if len(tenants) > PER_TENANT_GRAPH_SEARCHES:
        return models.Prefetch(
            query=list(vector),
            using=using,
            filter=scoped_filter(tenants, conditions, live_key=live_key),
            params=EXACT_DENSE if using == DENSE_VECTOR else models.SearchParams(exact=True),
            limit=limit,
        )
    return models.Prefetch(
        prefetch=[
            models.Prefetch(
                query=list(vector),
                using=using,
                filter=scoped_filter([tenant], conditions, live_key=live_key),
                params=graph,
                limit=limit,
            )
            for tenant in tenants
        ],
        query=list(vector),
        using=using,
        # The union of the tenants' hits, scored again: on the originals.
        params=ORIGINAL_VECTORS if using == DENSE_VECTOR else None,
        limit=limit,
    )


def dense_request(
    dense: Sequence[float],
    collection_names: Sequence[str],
    limit: int,
    *,
    conditions: Sequence[models.Condition] = (),
    live_key: bool = False,
) -> models.QueryRequest:
    """Nearest neighbours on ``text-dense`` (:func:`nearest_leg`); ``conditions`` narrow the tenants' points."""
    leg = nearest_leg(dense, DENSE_VECTOR, collection_names, limit, conditions, live_key=live_key)
    return models.QueryRequest(
        prefetch=leg.prefetch,
        query=leg.query,
        using=leg.using,
        filter=leg.filter,
        params=leg.params,
        limit=limit,
        with_payload=list(RESULT_PAYLOAD),
    )


@dataclass(frozen=True, slots=True)
class HybridLegs:
    """The legs of one hybrid search and their fusion weights, in order: dense, multilingual, sparse, BM25."""

    legs: list[models.Prefetch]
    weights: list[float]

    def then(self, other: HybridLegs) -> HybridLegs:
        """These legs followed by ``other``'s, with their weights."""
        return HybridLegs(legs=[*self.legs, *other.legs], weights=[*self.weights, *other.weights])

    def fuses(self) -> bool:
        """Whether there is a leg besides ``text-dense`` (else the plain dense request serves)."""
        return any(leg.using != DENSE_VECTOR for leg in self.legs)


@dataclass(frozen=True, slots=True)
class LegPlan:
    """What one hybrid search's legs share: the query text, tenants, filters and fusion parameters.

    The term legs are built before the dense vector exists (they are sent while the dense model
    runs), the vector legs after. Each leg fetches ``params.prefetch_limit`` candidates; zero-weight
    legs are left out. ``conditions`` (the request's ``filter``, the agent's metadata filters) narrow
    every leg; IDF stays over the whole tenants, so a filter changes which chunks compete, not how a
    term is weighted. ``live_key``: filter as :func:`scoped_filter` does in a contract 3.x store.
    """

    text: str
    collection_names: Sequence[str]
    params: FusionParams
    sparse_idf: bool
    conditions: Sequence[models.Condition] = ()
    live_key: bool = False

    def vectors(self, dense: Sequence[float], multilingual: Sequence[float] | None) -> HybridLegs:
        """The nearest-neighbour legs, in order: ``text-dense``, and ``text-dense-multilingual`` when
        ``multilingual`` is the query's vector of that model."""
        params, names, conditions, live_key = self.params, self.collection_names, self.conditions, self.live_key
        legs: list[models.Prefetch] = []
        weights: list[float] = []
        if params.dense_weight > 0:
            legs.append(nearest_leg(dense, DENSE_VECTOR, names, params.prefetch_limit, conditions, live_key=live_key))
            weights.append(params.dense_weight)
        if multilingual is not None and params.multilingual_weight > 0:
            legs.append(
                nearest_leg(
                    multilingual, MULTILINGUAL_VECTOR, names, params.prefetch_limit, conditions, live_key=live_key
                )
            )
            weights.append(params.multilingual_weight)
        return HybridLegs(legs=legs, weights=weights)

    def terms(self, sparse: SparseVectorData | None, lexical_fields: Sequence[str]) -> HybridLegs:
        """The term legs, in order: ``text-sparse`` (when ``sparse`` has terms) and the BM25 leg over
        ``lexical_fields`` (:func:`lexical_prefetch`)."""
        params = self.params
        tenants = committed_filter(self.collection_names, live_key=self.live_key)
        idf = idf_scope(tenants)
        selector = (
            scoped_filter(self.collection_names, self.conditions, live_key=self.live_key)
            if self.conditions
            else tenants
        )
        legs: list[models.Prefetch] = []
        weights: list[float] = []
        if sparse is not None and sparse.indices and params.sparse_weight > 0:
            legs.append(
                models.Prefetch(
                    query=models.SparseVector(indices=list(sparse.indices), values=list(sparse.values)),
                    using=SPARSE_VECTOR,
                    filter=selector,
                    params=idf if self.sparse_idf else None,
                    limit=params.prefetch_limit,
                )
            )
            weights.append(params.sparse_weight)
        if params.lexical_weight > 0 and self.text.strip() and lexical_fields:
            legs.append(
                lexical_prefetch(text_query(self.text, params), lexical_fields, selector, idf, params.prefetch_limit)
            )
            weights.append(params.lexical_weight)
        return HybridLegs(legs=legs, weights=weights)


def hybrid_legs(
    *,
    dense: Sequence[float],
    sparse: SparseVectorData | None,
    text: str,
    lexical_fields: Sequence[str],
    collection_names: Sequence[str],
    params: FusionParams,
    sparse_idf: bool,
    conditions: Sequence[models.Condition] = (),
    multilingual: Sequence[float] | None = None,
    live_key: bool = False,
) -> HybridLegs | None:
    """Every leg of a hybrid search: the :class:`LegPlan`'s vector legs, then its term legs.

    None when no leg but the dense one remains (the caller runs the plain dense request instead,
    with its cosine scale). ``live_key``: filter as :func:`scoped_filter` does in a contract 3.x store.
    """
    plan = LegPlan(
        text=text,
        collection_names=collection_names,
        params=params,
        sparse_idf=sparse_idf,
        conditions=conditions,
        live_key=live_key,
    )
    legs = plan.vectors(dense, multilingual).then(plan.terms(sparse, lexical_fields))
    return legs if legs.fuses() else None


def hybrid_request(
    *,
    dense: Sequence[float],
    sparse: SparseVectorData | None,
    text: str,
    lexical_fields: Sequence[str],
    collection_names: Sequence[str],
    limit: int,
    params: FusionParams,
    sparse_idf: bool,
    conditions: Sequence[models.Condition] = (),
    live_key: bool = False,
) -> models.QueryRequest | None:
    """One request: the :func:`hybrid_legs` fused with Qdrant's weighted RRF (k ``params.k``).

    None when no leg but the dense one remains.
    """
    legs = hybrid_legs(
        dense=dense,
        sparse=sparse,
        text=text,
        lexical_fields=lexical_fields,
        collection_names=collection_names,
        params=params,
        sparse_idf=sparse_idf,
        conditions=conditions,
        live_key=live_key,
    )
    return None if legs is None else rrf_request(legs, k=params.k, limit=limit)


def rrf_request(legs: HybridLegs, *, k: int, limit: int) -> models.QueryRequest:
    """The legs fused in the store with Qdrant's weighted RRF: one request."""
    return models.QueryRequest(
        prefetch=legs.legs,
        query=models.RrfQuery(rrf=models.Rrf(k=k, weights=legs.weights)),
        limit=limit,
        with_payload=list(RESULT_PAYLOAD),
        # The dense vector of each fused hit: its cosine to the query feeds the calibrated relevance.
        with_vector=[DENSE_VECTOR],
    )


def leg_requests(legs: HybridLegs) -> list[models.QueryRequest]:
    """Each leg as its own request for one batch: ids and raw scores only (the service fuses them)."""
    return [
        models.QueryRequest(
            prefetch=leg.prefetch,
            query=leg.query,
            using=leg.using,
            filter=leg.filter,
            params=leg.params,
            limit=leg.limit,
            with_payload=False,
        )
        for leg in legs.legs
    ]


def fused_points_request(
    dense: Sequence[float],
    point_ids: Sequence[str],
    collection_names: Sequence[str],
    conditions: Sequence[models.Condition] = (),
    *,
    live_key: bool = False,
) -> models.QueryRequest:
    """The payloads of the fused hits and their dense cosine to the query (the score of this request).

    A dense query over exactly these points: one call reads what the result needs, and the cosine
    feeds the calibrated relevance. The tenant filter stays, so an id can never reach outside it.
    Exact, because a sharded server otherwise asks each shard for a share of a large limit
    (undersampling) and could leave out an id that must come back.
    """
    return models.QueryRequest(
        query=list(dense),
        using=DENSE_VECTOR,
        filter=models.Filter(
            must=[
                models.HasIdCondition(has_id=list(point_ids)),
                scoped_filter(collection_names, conditions, live_key=live_key),
            ]
        ),
        params=EXACT_DENSE,
        limit=len(point_ids),
        with_payload=list(RESULT_PAYLOAD),
    )

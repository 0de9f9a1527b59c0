from __future__ import annotations

import dataclasses

import pytest
from qdrant_client import models

from rag_runtime.embedding import SparseVectorData
from rag_runtime.store import tenant_filter
from retrieval_agent.search.query import (
    PER_TENANT_GRAPH_SEARCHES,
    FusionParams,
    HybridLegs,
    dense_request,
    fused_points_request,
    hybrid_legs,
    hybrid_request,
    text_query,
)
from retrieval_agent.search.scope import scoped_filter

# Committed points of the requested tenant: what every leg filters on.
TENANT = models.Filter(
    must=[models.FieldCondition(key="meta.collection_name", match=models.MatchAny(any=["kb-1"]))],
    must_not=[models.FieldCondition(key="meta.ingest_state", match=models.MatchValue(value="pending"))],
)
IDF = models.SearchParams(idf=models.IdfCorpusParams(corpus=TENANT))
# A graph search on text-dense walks its int8 copies and rescores twice the hits with the originals;
# a scan or a rescoring of known points uses the originals alone.
RESCORED = models.SearchParams(quantization=models.QuantizationSearchParams(rescore=True, oversampling=2.0))
ORIGINALS = models.SearchParams(quantization=models.QuantizationSearchParams(ignore=True))
PARAMS = FusionParams(k=60, dense_weight=1.0, sparse_weight=0.5, lexical_weight=2.0, prefetch_limit=40)
SPARSE = SparseVectorData(indices=[3, 9], values=[0.5, 0.25])


def build(**overrides: object) -> models.QueryRequest | None:
    values: dict[str, object] = {
        "dense": [0.1],
        "sparse": SPARSE,
        "text": "zebra stripes",
        "lexical_fields": ["lexical_en", "lexical_no"],
        "collection_names": ["kb-1"],
        "limit": 10,
        "params": PARAMS,
        "sparse_idf": True,
    }
    values.update(overrides)
    return hybrid_request(**values)  # type: ignore[arg-type]


def test_dense_request() -> None:
    request = dense_request([0.1, 0.2], ["kb-1"], 7)
    assert request == models.QueryRequest(
        query=[0.1, 0.2], using="text-dense", filter=TENANT, params=RESCORED, limit=7, with_payload=["content", "meta"]
    )


def one_tenant(name: str) -> models.Filter:
    return models.Filter(
        must=[models.FieldCondition(key="meta.collection_name", match=models.MatchAny(any=[name]))],
        must_not=[models.FieldCondition(key="meta.ingest_state", match=models.MatchValue(value="pending"))],
    )


def test_a_dense_request_over_several_tenants_searches_each_tenant_and_scores_the_union() -> None:
    request = dense_request([0.1, 0.2], ["kb-1", "kb-2", "kb-1"], 7)
    assert request == models.QueryRequest(
        prefetch=[
            models.Prefetch(query=[0.1, 0.2], using="text-dense", filter=one_tenant("kb-1"), params=RESCORED, limit=7),
            models.Prefetch(query=[0.1, 0.2], using="text-dense", filter=one_tenant("kb-2"), params=RESCORED, limit=7),
        ],
        query=[0.1, 0.2],
        using="text-dense",
        params=ORIGINALS,
        limit=7,
        with_payload=["content", "meta"],
    )


def test_past_the_per_tenant_searches_the_tenants_points_are_scanned_exactly() -> None:
    names = [f"kb-{index}" for index in range(PER_TENANT_GRAPH_SEARCHES + 1)]
    request = dense_request([0.1, 0.2], names, 7)
    assert request.prefetch is None
    assert request.params == models.SearchParams(exact=True, quantization=models.QuantizationSearchParams(ignore=True))
    assert request.filter == tenant_filter(names)


FILE_F1 = models.FieldCondition(key="meta.file_id", match=models.MatchValue(value="f-1"))


def two_tenant_legs(**overrides: object) -> HybridLegs:
    """The legs of a search over kb-1 and kb-2 narrowed to file f-1."""
    values: dict[str, object] = {
        "dense": [0.1],
        "sparse": SPARSE,
        "text": "zebra",
        "lexical_fields": ["lexical_en"],
        "collection_names": ["kb-1", "kb-2"],
        "params": PARAMS,
        "sparse_idf": True,
        "conditions": [FILE_F1],
    }
    values.update(overrides)
    legs = hybrid_legs(**values)  # type: ignore[arg-type]
    assert legs is not None
    return legs


def test_the_hybrid_dense_legs_over_several_tenants_search_each_tenant_with_the_request_filter() -> None:
    condition = FILE_F1
    legs = two_tenant_legs(params=dataclasses.replace(PARAMS, multilingual_weight=0.5), multilingual=[0.3])
    dense, multilingual, sparse, bm25 = legs.legs
    # Only text-dense has int8 copies: the multilingual vector is searched as stored.
    for leg, vector, using, graph, union in (
        (dense, [0.1], "text-dense", RESCORED, ORIGINALS),
        (multilingual, [0.3], "text-dense-multilingual", None, None),
    ):
        assert (leg.query, leg.using, leg.filter, leg.params, leg.limit) == (vector, using, None, union, 40)
        assert leg.prefetch == [
            models.Prefetch(
                query=vector, using=using, filter=scoped_filter([name], [condition]), params=graph, limit=40
            )
            for name in ("kb-1", "kb-2")
        ]
    # The sparse and BM25 legs are no graph searches: one filter over both tenants.
    assert sparse.filter == bm25.filter == scoped_filter(["kb-1", "kb-2"], [condition])


def test_hybrid_request_has_every_leg_filtered_idf_scoped_and_weighted() -> None:
    assert build() == models.QueryRequest(
        prefetch=[
            models.Prefetch(query=[0.1], using="text-dense", filter=TENANT, params=RESCORED, limit=40),
            models.Prefetch(
                query=models.SparseVector(indices=[3, 9], values=[0.5, 0.25]),
                using="text-sparse",
                filter=TENANT,
                params=IDF,
                limit=40,
            ),
            # One BM25 leg: the language fields merged by raw BM25 score (each chunk is in one field).
            models.Prefetch(
                prefetch=[
                    models.Prefetch(
                        query=models.TextQuery(text="zebra stripes"),
                        using="lexical_en",
                        filter=TENANT,
                        params=IDF,
                        limit=40,
                    ),
                    models.Prefetch(
                        query=models.TextQuery(text="zebra stripes"),
                        using="lexical_no",
                        filter=TENANT,
                        params=IDF,
                        limit=40,
                    ),
                ],
                query=models.FormulaQuery(
                    formula=models.SumExpression(sum=["$score[0]", "$score[1]"]),
                    defaults={"$score[0]": 0.0, "$score[1]": 0.0},
                ),
                limit=40,
            ),
        ],
        query=models.RrfQuery(rrf=models.Rrf(k=60, weights=[1.0, 0.5, 2.0])),
        limit=10,
        with_payload=["content", "meta"],
        with_vector=["text-dense"],
    )


def test_wire_form_a_qdrant_server_receives() -> None:
    request = build()
    assert request is not None
    wire = request.model_dump(exclude_none=True)
    assert wire["query"] == {"rrf": {"k": 60, "weights": [1.0, 0.5, 2.0]}}
    tenant = TENANT.model_dump(exclude_none=True)
    dense, sparse, bm25 = wire["prefetch"]
    text_legs = bm25["prefetch"]
    assert all(leg["filter"] == tenant for leg in [dense, sparse, *text_legs])
    assert dense["params"] == {
        "exact": False,
        "quantization": {"ignore": False, "rescore": True, "oversampling": 2.0},
        "indexed_only": False,
    }
    assert [leg["params"]["idf"] for leg in [sparse, *text_legs]] == [{"corpus": tenant}] * 3
    assert [dense["using"], sparse["using"]] == ["text-dense", "text-sparse"]
    assert [leg["using"] for leg in text_legs] == ["lexical_en", "lexical_no"]
    assert text_legs[0]["query"] == {"text": "zebra stripes"}
    assert bm25["query"] == {
        "formula": {"sum": ["$score[0]", "$score[1]"]},
        "defaults": {"$score[0]": 0.0, "$score[1]": 0.0},
    }


# In a contract 3.x store: the same points, one condition.
LIVE = models.Filter(must=[models.FieldCondition(key="meta.live_in", match=models.MatchAny(any=["kb-1"]))])


def test_in_a_live_key_store_every_leg_and_idf_corpus_filter_on_the_live_key_alone() -> None:
    request = build(live_key=True)
    assert request is not None
    wire = request.model_dump(exclude_none=True)
    live = LIVE.model_dump(exclude_none=True)
    dense, sparse, bm25 = wire["prefetch"]
    text_legs = bm25["prefetch"]
    assert all(leg["filter"] == live for leg in [dense, sparse, *text_legs])
    assert [leg["params"]["idf"] for leg in [sparse, *text_legs]] == [{"corpus": live}] * 3


def test_in_a_live_key_store_the_request_filter_narrows_the_live_key() -> None:
    condition = FILE_F1
    dense, sparse, bm25 = two_tenant_legs(live_key=True).legs
    live_in = models.FieldCondition(key="meta.live_in", match=models.MatchAny(any=["kb-1", "kb-2"]))
    assert sparse.filter == bm25.filter == models.Filter(must=[live_in, condition])
    # IDF stays over the whole tenants' committed points.
    assert sparse.params == models.SearchParams(idf=models.IdfCorpusParams(corpus=models.Filter(must=[live_in])))
    assert isinstance(dense.prefetch, list)
    assert [leg.filter for leg in dense.prefetch] == [
        scoped_filter([name], [condition], live_key=True) for name in ("kb-1", "kb-2")
    ]
    assert dense_request([0.1], ["kb-1"], 7, live_key=True).filter == LIVE
    read = fused_points_request([0.1], ["p-1"], ["kb-1"], live_key=True)
    assert read.filter == models.Filter(must=[models.HasIdCondition(has_id=["p-1"]), LIVE])


def test_the_read_of_the_fused_hits_is_exact_on_the_original_vectors() -> None:
    read = fused_points_request([0.1], ["p-1", "p-2"], ["kb-1"])
    # Exact: no per-shard share of the limit that could drop an id; the cosine on the originals.
    assert read.params == models.SearchParams(exact=True, quantization=models.QuantizationSearchParams(ignore=True))
    assert read.limit == 2


def test_one_lexical_field_is_a_plain_text_leg() -> None:
    request = build(lexical_fields=["lexical_no"])
    assert request is not None
    assert isinstance(request.prefetch, list)
    assert request.prefetch[2] == models.Prefetch(
        query=models.TextQuery(text="zebra stripes"), using="lexical_no", filter=TENANT, params=IDF, limit=40
    )


def test_sparse_vector_without_idf_modifier_gets_no_idf_scope() -> None:
    request = build(sparse_idf=False)
    assert request is not None
    assert isinstance(request.prefetch, list)
    assert request.prefetch[1].using == "text-sparse"
    assert request.prefetch[1].params is None
    bm25 = request.prefetch[2].prefetch
    assert isinstance(bm25, list)
    assert {leg.params == IDF for leg in bm25} == {True}  # BM25 legs always compute IDF per tenant


@pytest.mark.parametrize(
    ("overrides", "fields", "weights"),
    [
        ({"sparse": None}, ["text-dense", "bm25"], [1.0, 2.0]),
        ({"sparse": SparseVectorData(indices=[], values=[])}, ["text-dense", "bm25"], [1.0, 2.0]),
        ({"lexical_fields": []}, ["text-dense", "text-sparse"], [1.0, 0.5]),
        ({"text": "   "}, ["text-dense", "text-sparse"], [1.0, 0.5]),
        (
            {"params": FusionParams(k=2, dense_weight=0.0, sparse_weight=0.0, lexical_weight=1.0, prefetch_limit=5)},
            ["bm25"],
            [1.0],
        ),
        (
            {"params": FusionParams(k=2, dense_weight=1.0, sparse_weight=1.0, lexical_weight=0.0, prefetch_limit=5)},
            ["text-dense", "text-sparse"],
            [1.0, 1.0],
        ),
    ],
)
def test_legs_present_only_when_they_can_score(
    overrides: dict[str, object], fields: list[str], weights: list[float]
) -> None:
    request = build(**overrides)
    assert request is not None
    assert isinstance(request.prefetch, list)
    assert [leg.using or "bm25" for leg in request.prefetch] == fields
    assert isinstance(request.query, models.RrfQuery)
    assert request.query.rrf.weights == weights


@pytest.mark.parametrize(
    "overrides",
    [
        {"sparse": None, "lexical_fields": []},
        {"params": FusionParams(k=2, dense_weight=1.0, sparse_weight=0.0, lexical_weight=0.0, prefetch_limit=5)},
        {"params": FusionParams(k=2, dense_weight=0.0, sparse_weight=0.0, lexical_weight=0.0, prefetch_limit=5)},
    ],
)
def test_nothing_but_dense_means_the_dense_request(overrides: dict[str, object]) -> None:
    assert build(**overrides) is None


def test_bm25_parameters_are_sent_only_when_configured() -> None:
    assert text_query("q", PARAMS) == models.TextQuery(text="q")
    tuned = FusionParams(
        k=2, dense_weight=1, sparse_weight=1, lexical_weight=1, prefetch_limit=5, bm25_k1=0.9, bm25_b=0.4
    )
    assert text_query("q", tuned) == models.TextQuery(
        text=models.TextQueryInput(query="q", scoring=models.Bm25Scoring(bm25=models.Bm25Params(k=0.9, b=0.4)))
    )
    only_b = FusionParams(k=2, dense_weight=1, sparse_weight=1, lexical_weight=1, prefetch_limit=5, bm25_b=0.3)
    query = text_query("q", only_b)
    assert query.model_dump(exclude_none=True) == {"text": {"query": "q", "scoring": {"bm25": {"b": 0.3}}}}


def multilingual_legs(multilingual: list[float] | None, weight: float) -> list[tuple[str | None, float]]:
    """(using, weight) of each leg of a Norwegian-tenant search with this multilingual vector and weight."""
    params = FusionParams(
        k=60, dense_weight=0.3, sparse_weight=0.5, lexical_weight=1.0, prefetch_limit=40, multilingual_weight=weight
    )
    legs = hybrid_legs(
        dense=[0.1],
        sparse=SPARSE,
        text="hund",
        lexical_fields=["lexical_no"],
        collection_names=["kb-1"],
        params=params,
        sparse_idf=True,
        multilingual=multilingual,
    )
    assert legs is not None
    if multilingual is not None and weight > 0:
        assert legs.legs[1] == models.Prefetch(
            query=multilingual, using="text-dense-multilingual", filter=TENANT, limit=40
        )
    return [(leg.using, weight) for leg, weight in zip(legs.legs, legs.weights, strict=True)]


def test_the_multilingual_leg_follows_the_dense_leg_with_the_same_filter_and_depth() -> None:
    assert multilingual_legs([0.2, 0.3], 0.9) == [
        ("text-dense", 0.3),
        ("text-dense-multilingual", 0.9),
        ("text-sparse", 0.5),
        ("lexical_no", 1.0),
    ]
    # Without the query's vector, or with weight 0, there is no such leg.
    assert multilingual_legs([0.2, 0.3], 0.0) == [("text-dense", 0.3), ("text-sparse", 0.5), ("lexical_no", 1.0)]
    assert multilingual_legs(None, 0.9) == [("text-dense", 0.3), ("text-sparse", 0.5), ("lexical_no", 1.0)]

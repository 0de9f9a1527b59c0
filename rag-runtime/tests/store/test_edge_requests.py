"""qdrant-client request models -> qdrant-edge objects: each supported model, and a typed refusal
of everything else. qdrant-edge objects have no equality, so results are compared with the object
qdrant-edge builds from the expected arguments (by their repr) or through their properties."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest
import qdrant_edge as edge
from qdrant_client import models

from rag_runtime.lexical import text_index_params
from rag_runtime.store import tenant_filter
from rag_runtime.store.edge_requests import (
    SERVER_DEFAULT_RRF_K,
    to_edge_condition,
    to_edge_expression,
    to_edge_filter,
    to_edge_index,
    to_edge_match,
    to_edge_params,
    to_edge_prefetch,
    to_edge_quantization,
    to_edge_query,
    to_edge_request,
    to_edge_with_payload,
)
from shared_contract import StoreRequestError

UUID_A = "5b1f2f2e-0d6c-4a55-9a8f-2a3f0a4f1c01"


def same(actual: Any, expected: Any) -> None:
    assert repr(actual) == repr(expected)
    assert "object at 0x" not in repr(expected)  # a repr that shows the contents


def same_condition(actual: Any, expected: Any) -> None:
    """Conditions and matches show their contents only inside a filter."""
    same(edge.Filter(must=[actual]), edge.Filter(must=[expected]))


EDGE_TENANT_FILTER = edge.Filter(
    must=[edge.FieldCondition("meta.collection_name", match=edge.MatchAny(["t1", "t2"]))],
    must_not=[edge.FieldCondition("meta.ingest_state", match=edge.MatchValue("pending"))],
)


# -- filters --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("match", "expected"),
    [
        (models.MatchValue(value="pdf"), edge.MatchValue("pdf")),
        (models.MatchValue(value=7), edge.MatchValue(7)),
        (models.MatchValue(value=True), edge.MatchValue(True)),
        (models.MatchAny(any=["a", "b"]), edge.MatchAny(["a", "b"])),
        (models.MatchAny(any=[1, 2]), edge.MatchAny([1, 2])),
        # One value: the engine's faster path for the same points (asserted in test_behaviour).
        (models.MatchAny(any=["a"]), edge.MatchValue("a")),
        (models.MatchAny(any=[7]), edge.MatchValue(7)),
        (models.MatchExcept(**{"except": ["x"]}), edge.MatchExcept(["x"])),
        (models.MatchText(text="hund"), edge.MatchText("hund")),
    ],
)
def test_matches_translate(match: Any, expected: Any) -> None:
    same_condition(edge.FieldCondition("k", match=to_edge_match(match)), edge.FieldCondition("k", match=expected))


@pytest.mark.parametrize("match", [models.MatchPhrase(phrase="two words"), models.MatchTextAny(text_any="a b"), "pdf"])
def test_other_matches_are_refused(match: Any) -> None:
    with pytest.raises(StoreRequestError, match="does not support"):
        to_edge_match(match)


def test_the_tenant_filter_translates() -> None:
    same(to_edge_filter(tenant_filter(["t1", "t2"])), EDGE_TENANT_FILTER)


def test_no_filter_stays_none() -> None:
    assert to_edge_filter(None) is None


def test_a_single_condition_and_should_clauses_translate() -> None:
    selector = models.Filter(
        must=models.FieldCondition(key="meta.file_id", match=models.MatchValue(value="f1")),
        should=[
            models.FieldCondition(key="meta.page", match=models.MatchValue(value=1)),
            models.Filter(must=[models.FieldCondition(key="meta.page", match=models.MatchValue(value=2))]),
        ],
    )
    same(
        to_edge_filter(selector),
        edge.Filter(
            must=[edge.FieldCondition("meta.file_id", match=edge.MatchValue("f1"))],
            should=[
                edge.FieldCondition("meta.page", match=edge.MatchValue(1)),
                edge.Filter(must=[edge.FieldCondition("meta.page", match=edge.MatchValue(2))]),
            ],
        ),
    )


def test_a_range_condition_translates_every_bound() -> None:
    condition = to_edge_condition(models.FieldCondition(key="meta.ingest_seq", range=models.Range(gte=3, lt=9)))
    assert condition.key == "meta.ingest_seq"
    assert (condition.range.gte, condition.range.gt, condition.range.lte, condition.range.lt) == (3.0, None, None, 9.0)
    other = to_edge_condition(models.FieldCondition(key="meta.ingest_seq", range=models.Range(gt=1, lte=2)))
    assert (other.range.gte, other.range.gt, other.range.lte, other.range.lt) == (None, 1.0, 2.0, None)


def test_emptiness_conditions_translate() -> None:
    same_condition(
        to_edge_condition(models.FieldCondition(key="meta.ingest_state", is_empty=True)),
        edge.FieldCondition("meta.ingest_state", is_empty=True),
    )
    same_condition(
        to_edge_condition(models.IsEmptyCondition(is_empty=models.PayloadField(key="meta.ingest_state"))),
        edge.IsEmptyCondition("meta.ingest_state"),
    )


def test_datetime_ranges_translate_to_iso_bounds() -> None:
    condition = to_edge_condition(
        models.FieldCondition(
            key="meta.indexed_at",
            range=models.DatetimeRange(gte=datetime(2026, 1, 2, tzinfo=UTC), lt=date(2026, 2, 1)),
        )
    )
    assert condition.key == "meta.indexed_at"
    # The engine renders the bounds its own way ("2026-01-02 00:00:00 UTC"); the instant is what counts.
    assert condition.range.gte.startswith("2026-01-02 00:00:00")
    assert condition.range.lt.startswith("2026-02-01 00:00:00")
    assert condition.range.gt is None


def test_float_and_datetime_indexes_translate() -> None:
    assert isinstance(to_edge_index(models.FloatIndexParams(type=models.FloatIndexType.FLOAT)), edge.FloatIndexParams)
    assert isinstance(
        to_edge_index(models.DatetimeIndexParams(type=models.DatetimeIndexType.DATETIME)), edge.DatetimeIndexParams
    )


def test_point_id_conditions_keep_uuids_and_integers() -> None:
    condition = to_edge_condition(models.HasIdCondition(has_id=[UUID_A, 42]))
    assert {str(point_id) for point_id in condition.point_ids} == {UUID_A, "42"}


@pytest.mark.parametrize(
    "condition",
    [
        models.IsNullCondition(is_null=models.PayloadField(key="meta.page")),
        models.HasVectorCondition(has_vector="text-sparse"),
        models.NestedCondition(nested=models.Nested(key="meta.headers", filter=models.Filter())),
        models.FieldCondition(key="meta.page", values_count=models.ValuesCount(gt=1)),
        models.FieldCondition(
            key="meta.place", geo_radius=models.GeoRadius(center=models.GeoPoint(lon=0.0, lat=0.0), radius=1.0)
        ),
    ],
)
def test_other_conditions_are_refused(condition: Any) -> None:
    with pytest.raises(StoreRequestError, match="does not support"):
        to_edge_condition(condition)


def test_min_should_is_refused() -> None:
    selector = models.Filter(
        min_should=models.MinShould(
            conditions=[models.FieldCondition(key="meta.page", match=models.MatchValue(value=1))], min_count=1
        )
    )
    with pytest.raises(StoreRequestError, match="min_should"):
        to_edge_filter(selector)


# -- search params and queries --------------------------------------------------------------


def test_the_idf_corpus_translates() -> None:
    params = to_edge_params(
        models.SearchParams(idf=models.IdfCorpusParams(corpus=tenant_filter(["t1", "t2"])), hnsw_ef=64, exact=True)
    )
    same(params, edge.SearchParams(hnsw_ef=64, exact=True, idf=edge.IdfParams(corpus=EDGE_TENANT_FILTER)))


def test_global_idf_and_no_params() -> None:
    same(to_edge_params(models.SearchParams(idf=models.IdfScope.GLOBAL)), edge.SearchParams())
    assert to_edge_params(None) is None


def test_quantization_search_params_translate() -> None:
    rescored = models.SearchParams(quantization=models.QuantizationSearchParams(rescore=True, oversampling=2.0))
    same(
        to_edge_params(rescored),
        edge.SearchParams(quantization=edge.QuantizationSearchParams(ignore=False, rescore=True, oversampling=2.0)),
    )
    ignored = models.SearchParams(exact=True, quantization=models.QuantizationSearchParams(ignore=True))
    same(
        to_edge_params(ignored),
        edge.SearchParams(exact=True, quantization=edge.QuantizationSearchParams(ignore=True)),
    )


def test_int8_scalar_quantization_translates_and_other_kinds_are_refused() -> None:
    int8 = models.ScalarQuantization(
        scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, quantile=0.99, always_ram=True)
    )
    same(
        to_edge_quantization(int8),
        edge.ScalarQuantizationConfig(type=edge.ScalarType.Int8, quantile=0.99, always_ram=True),
    )
    assert to_edge_quantization(None) is None
    binary = models.BinaryQuantization(binary=models.BinaryQuantizationConfig(always_ram=True))
    with pytest.raises(StoreRequestError, match="quantization"):
        to_edge_quantization(binary)


def test_dense_and_sparse_nearest_queries_translate() -> None:
    same(to_edge_query([0.5, 1, 0.0], "text-dense"), edge.Query.Nearest([0.5, 1.0, 0.0], using="text-dense"))
    same(
        to_edge_query(models.NearestQuery(nearest=[0.5, 0.25]), "text-dense"),
        edge.Query.Nearest([0.5, 0.25], using="text-dense"),
    )
    same(
        to_edge_query(models.SparseVector(indices=[3, 9], values=[0.5, 1.5]), "text-sparse"),
        edge.Query.Nearest(edge.SparseVector([3, 9], [0.5, 1.5]), using="text-sparse"),
    )
    same(
        to_edge_query(models.NearestQuery(nearest=models.SparseVector(indices=[1], values=[1.0])), "text-sparse"),
        edge.Query.Nearest(edge.SparseVector([1], [1.0]), using="text-sparse"),
    )


def test_text_queries_translate_with_their_field_and_bm25_parameters() -> None:
    same(to_edge_query(models.TextQuery(text="hund bro"), "lexical_no"), edge.TextQuery("lexical_no", "hund bro"))
    tuned = models.TextQuery(
        text=models.TextQueryInput(query="hund", scoring=models.Bm25Scoring(bm25=models.Bm25Params(k=0.9, b=0.4)))
    )
    query = to_edge_query(tuned, "lexical_no")
    assert (query.field, query.query) == ("lexical_no", "hund")
    assert (query.scoring.k, query.scoring.b) == pytest.approx((0.9, 0.4))
    same(
        to_edge_query(models.TextQuery(text=models.TextQueryInput(query="hund")), "lexical_no"),
        edge.TextQuery("lexical_no", "hund"),
    )


def test_a_text_query_without_a_field_is_refused() -> None:
    with pytest.raises(StoreRequestError, match="using"):
        to_edge_query(models.TextQuery(text="hund"), None)


def test_fusions_translate_with_the_servers_default_k() -> None:
    assert SERVER_DEFAULT_RRF_K == 2
    same(
        to_edge_query(models.RrfQuery(rrf=models.Rrf(k=60, weights=[1.0, 0.5])), None),
        edge.Fusion.Rrf(k=60, weights=[1.0, 0.5]),
    )
    same(
        to_edge_query(models.RrfQuery(rrf=models.Rrf(weights=[2.0, 1.0])), None),
        edge.Fusion.Rrf(k=2, weights=[2.0, 1.0]),
    )
    same(to_edge_query(models.RrfQuery(rrf=models.Rrf(k=5)), None), edge.Fusion.Rrf(k=5))
    same(to_edge_query(models.FusionQuery(fusion=models.Fusion.RRF), None), edge.Fusion.Rrf(k=2))
    same(to_edge_query(models.FusionQuery(fusion=models.Fusion.DBSF), None), edge.Fusion.Dbsf())
    assert to_edge_query(None, None) is None


@pytest.mark.parametrize(
    "query",
    [
        models.OrderByQuery(order_by="meta.ingest_seq"),
        models.Document(text="hund", model="Qdrant/bm25"),
        models.RecommendQuery(recommend=models.RecommendInput(positive=[[1.0, 0.0]])),
        models.SampleQuery(sample=models.Sample.RANDOM),
    ],
)
def test_other_queries_are_refused(query: Any) -> None:
    with pytest.raises(StoreRequestError, match="does not support"):
        to_edge_query(query, "text-dense")


# -- formula expressions --------------------------------------------------------------------
# Nested expressions read back as the bare Expression type (qdrant-edge 0.9.0), so only the top
# of a translated tree can be inspected; test_formula.py runs whole trees on the engine.


def variant(expression: Any) -> str:
    """An expression's variant: the stub declares them as factories, at runtime each is a subclass."""
    return type(expression).__name__


def test_datetime_expressions_translate() -> None:
    constant = to_edge_expression(models.DatetimeExpression(datetime="2026-06-01T12:00:00Z"))
    assert variant(constant) == "Datetime"
    assert constant.date_time == "2026-06-01T12:00:00Z"
    key = to_edge_expression(models.DatetimeKeyExpression(datetime_key="meta.updated_at"))
    assert variant(key) == "DatetimeKey"
    assert key.path == "meta.updated_at"


@pytest.mark.parametrize(
    ("expression", "kind"),
    [
        (models.ExpDecayExpression(exp_decay=models.DecayParamsExpression(x="x")), edge.DecayKind.Exp),
        (models.GaussDecayExpression(gauss_decay=models.DecayParamsExpression(x="x")), edge.DecayKind.Gauss),
        (models.LinDecayExpression(lin_decay=models.DecayParamsExpression(x="x")), edge.DecayKind.Lin),
    ],
)
def test_decays_translate_their_kind_and_leave_unset_parameters_to_the_engine(expression: Any, kind: Any) -> None:
    decay = to_edge_expression(expression)
    assert variant(decay) == "Decay"
    assert (decay.kind, decay.target, decay.midpoint, decay.scale) == (kind, None, None, None)


def test_a_datetime_decay_translates_its_target_midpoint_and_scale() -> None:
    decay = to_edge_expression(
        models.ExpDecayExpression(
            exp_decay=models.DecayParamsExpression(
                x=models.DatetimeKeyExpression(datetime_key="meta.updated_at"),
                target=models.DatetimeExpression(datetime="2026-06-01T12:00:00Z"),
                scale=86_400.0,
                midpoint=0.25,
            )
        )
    )
    assert (decay.kind, decay.midpoint, decay.scale) == (edge.DecayKind.Exp, 0.25, 86_400.0)
    assert isinstance(decay.x, edge.Expression)
    assert isinstance(decay.target, edge.Expression)


def test_an_unsupported_expression_inside_a_decay_is_refused() -> None:
    decay = models.LinDecayExpression(lin_decay=models.DecayParamsExpression(x=models.SqrtExpression(sqrt="x")))
    with pytest.raises(StoreRequestError, match="does not support this expression: SqrtExpression"):
        to_edge_expression(decay)


def test_a_prefetch_leg_translates_with_its_filter_params_and_threshold() -> None:
    leg = models.Prefetch(
        query=models.TextQuery(text="hund"),
        using="lexical_no",
        filter=tenant_filter(["t1", "t2"]),
        params=models.SearchParams(idf=models.IdfCorpusParams(corpus=tenant_filter(["t1", "t2"]))),
        score_threshold=0.5,
        limit=40,
    )
    same(
        to_edge_prefetch(leg),
        edge.Prefetch(
            limit=40,
            query=edge.TextQuery("lexical_no", "hund"),
            params=edge.SearchParams(idf=edge.IdfParams(corpus=EDGE_TENANT_FILTER)),
            filter=EDGE_TENANT_FILTER,
            score_threshold=0.5,
        ),
    )


def test_nested_prefetches_and_the_default_limit() -> None:
    leg = models.Prefetch(
        prefetch=models.Prefetch(query=[1.0, 0.0], using="text-dense", limit=100),
        query=models.FusionQuery(fusion=models.Fusion.RRF),
    )
    same(
        to_edge_prefetch(leg),
        edge.Prefetch(
            limit=10,
            query=edge.Fusion.Rrf(k=2),  # type: ignore[arg-type]  # the stub says `Fusion`; fusions are `Fusion.Rrf`/`Fusion.Dbsf`
            prefetches=[edge.Prefetch(limit=100, query=edge.Query.Nearest([1.0, 0.0], using="text-dense"))],
        ),
    )


def test_a_hybrid_request_translates_whole() -> None:
    tenant = tenant_filter(["t1", "t2"])
    request = models.QueryRequest(
        prefetch=[
            models.Prefetch(query=[1.0, 0.0], using="text-dense", filter=tenant, limit=40),
            models.Prefetch(query=models.SparseVector(indices=[7], values=[1.0]), using="text-sparse", limit=40),
        ],
        query=models.RrfQuery(rrf=models.Rrf(k=60, weights=[1.0, 0.5])),
        filter=tenant,
        params=models.SearchParams(idf=models.IdfCorpusParams(corpus=tenant)),
        limit=8,
        offset=2,
        score_threshold=0.01,
        with_payload=["content", "meta"],
    )
    same(
        to_edge_request(request),
        edge.QueryRequest(
            limit=8,
            offset=2,
            query=edge.Fusion.Rrf(k=60, weights=[1.0, 0.5]),  # type: ignore[arg-type]  # the stub says `Fusion`; fusions are `Fusion.Rrf`/`Fusion.Dbsf`
            prefetches=[
                edge.Prefetch(
                    limit=40, query=edge.Query.Nearest([1.0, 0.0], using="text-dense"), filter=EDGE_TENANT_FILTER
                ),
                edge.Prefetch(limit=40, query=edge.Query.Nearest(edge.SparseVector([7], [1.0]), using="text-sparse")),
            ],
            with_payload=["content", "meta"],
            with_vector=False,
            filter=EDGE_TENANT_FILTER,
            score_threshold=0.01,
            params=edge.SearchParams(idf=edge.IdfParams(corpus=EDGE_TENANT_FILTER)),
        ),
    )


def test_request_defaults_match_the_server() -> None:
    request = to_edge_request(models.QueryRequest(query=[1.0], using="text-dense"))
    assert request.limit == 10
    assert request.with_payload is True
    assert request.with_vector is False


@pytest.mark.parametrize(
    ("selector", "expected"), [(None, True), (True, True), (False, False), (["meta.file_id"], ["meta.file_id"])]
)
def test_payload_selectors_translate(selector: Any, expected: Any) -> None:
    assert to_edge_with_payload(selector) == expected


def test_other_payload_selectors_are_refused() -> None:
    with pytest.raises(StoreRequestError, match="does not support"):
        to_edge_with_payload(models.PayloadSelectorExclude(exclude=["content"]))


# -- payload indexes ------------------------------------------------------------------------


def test_keyword_and_integer_indexes_translate() -> None:
    keyword = to_edge_index(models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True))
    assert isinstance(keyword, edge.KeywordIndexParams)
    assert keyword.is_tenant is True
    plain = to_edge_index(models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD))
    assert plain.is_tenant is None
    assert plain.enable_hnsw is None
    filter_only = to_edge_index(models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, enable_hnsw=False))
    assert filter_only.enable_hnsw is False
    integer = to_edge_index(models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER, lookup=False, range=True))
    assert isinstance(integer, edge.IntegerIndexParams)
    assert (integer.lookup, integer.range) == (False, True)


def test_a_stemmed_text_index_translates() -> None:
    index = to_edge_index(text_index_params("no"))
    assert isinstance(index, edge.TextIndexParams)
    assert index.tokenizer == edge.TokenizerType.Word
    assert index.lowercase is True
    assert index.stopwords == edge.Language.Norwegian
    assert isinstance(index.stemmer, edge.SnowballParams)
    assert index.stemmer.language == edge.SnowballLanguage.Norwegian
    assert index.scoring is not None
    assert index.scoring.type == edge.TextScoringType.Bm25


def test_the_fallback_text_index_translates_without_stemmer_or_stop_words() -> None:
    index = to_edge_index(text_index_params("any"))
    assert index.tokenizer == edge.TokenizerType.Multilingual
    assert index.stopwords is None
    assert index.stemmer is None
    assert index.scoring is not None


def test_a_text_index_without_scoring_translates_without_it() -> None:
    index = to_edge_index(models.TextIndexParams(type=models.TextIndexType.TEXT, tokenizer=models.TokenizerType.WORD))
    assert index.scoring is None


@pytest.mark.parametrize(
    "schema",
    [
        models.BoolIndexParams(type=models.BoolIndexType.BOOL),
        models.PayloadSchemaType.KEYWORD,
        models.TextIndexParams(
            type=models.TextIndexType.TEXT, stopwords=models.StopwordsSet(languages=[models.Language.ENGLISH])
        ),
    ],
)
def test_other_index_schemas_are_refused(schema: Any) -> None:
    # Bool: the engine matches True as the integer 1 (qdrant-edge 0.9.0), so no bool index is offered.
    with pytest.raises(StoreRequestError, match="does not support"):
        to_edge_index(schema)


@pytest.mark.parametrize("language", list(models.Language))
def test_every_stop_word_language_has_its_engine_counterpart(language: models.Language) -> None:
    index = to_edge_index(models.TextIndexParams(type=models.TextIndexType.TEXT, stopwords=language))
    assert index.stopwords == getattr(edge.Language, language.value.capitalize())


@pytest.mark.parametrize("language", list(models.SnowballLanguage))
def test_every_stemmer_language_has_its_engine_counterpart(language: models.SnowballLanguage) -> None:
    stemmer = models.SnowballParams(type=models.Snowball.SNOWBALL, language=language)
    index = to_edge_index(models.TextIndexParams(type=models.TextIndexType.TEXT, stemmer=stemmer))
    assert index.stemmer.language == getattr(edge.SnowballLanguage, language.value.capitalize())


@pytest.mark.parametrize("tokenizer", list(models.TokenizerType))
def test_every_tokenizer_has_its_engine_counterpart(tokenizer: models.TokenizerType) -> None:
    index = to_edge_index(models.TextIndexParams(type=models.TextIndexType.TEXT, tokenizer=tokenizer))
    assert index.tokenizer == getattr(edge.TokenizerType, tokenizer.value.capitalize())

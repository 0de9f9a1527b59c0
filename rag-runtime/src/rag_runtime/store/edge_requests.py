"""qdrant-client request models -> qdrant-edge objects (pure), for the subset the services send.

The port speaks qdrant-client's models, so the server adapter passes them through and this
module is the only place that knows qdrant-edge's request types. Anything outside the subset
raises ``StoreRequestError`` instead of being guessed at.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from typing import Any

import qdrant_edge as edge
from qdrant_client import models

from shared_contract.errors import StoreRequestError

# Qdrant's server uses k=2 when a plain `{"fusion": "rrf"}` names no k; qdrant-edge needs it explicitly.
SERVER_DEFAULT_RRF_K = 2


def _unsupported(what: str, value: object) -> StoreRequestError:
    return StoreRequestError(f"the embedded store does not support {what}: {type(value).__name__}")


def to_edge_match(match: object) -> Any:
    if isinstance(match, models.MatchValue):
        return edge.MatchValue(match.value)
    if isinstance(match, models.MatchAny):
        values: list[Any] = list(match.any)
        if len(values) == 1:
            # The same points, served on the engine's faster one-value path: with the one-tenant
            # filter search sends most of the time, the BM42 and BM25 legs' per-tenant IDF takes
            # ~0.75 ms less each on 10k chunks (`benchmarks.stages`, docs/benchmarks.md).
            return edge.MatchValue(values[0])
        return edge.MatchAny(values)
    if isinstance(match, models.MatchExcept):
        excluded: list[Any] = list(match.except_)
        return edge.MatchExcept(excluded)
    if isinstance(match, models.MatchText):
        return edge.MatchText(match.text)
    raise _unsupported("this match", match)


def _iso(value: datetime | date | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return datetime(value.year, value.month, value.day, tzinfo=UTC).isoformat()


def to_edge_condition(condition: object) -> Any:
    if isinstance(condition, models.Filter):
        return to_edge_filter(condition)
    if isinstance(condition, models.FieldCondition):
        if condition.range is not None:
            if isinstance(condition.range, models.DatetimeRange):
                dates = condition.range
                return edge.FieldCondition(
                    condition.key,
                    range=edge.RangeDateTime(
                        gte=_iso(dates.gte), gt=_iso(dates.gt), lte=_iso(dates.lte), lt=_iso(dates.lt)
                    ),
                )
            if not isinstance(condition.range, models.Range):
                raise _unsupported("this range", condition.range)
            bounds = condition.range
            return edge.FieldCondition(
                condition.key, range=edge.RangeFloat(gte=bounds.gte, gt=bounds.gt, lte=bounds.lte, lt=bounds.lt)
            )
        if condition.match is not None:
            return edge.FieldCondition(condition.key, match=to_edge_match(condition.match))
        if condition.is_empty is not None:
            return edge.FieldCondition(condition.key, is_empty=condition.is_empty)
        raise _unsupported("this field condition", condition)
    if isinstance(condition, models.HasIdCondition):
        # Integer ids stay integers: the engine parses every string id as a UUID.
        return edge.HasIdCondition(
            {point_id if isinstance(point_id, int) else str(point_id) for point_id in condition.has_id}
        )
    if isinstance(condition, models.IsEmptyCondition):
        return edge.IsEmptyCondition(condition.is_empty.key)
    raise _unsupported("this condition", condition)


def _conditions(conditions: object) -> list[Any] | None:
    if conditions is None:
        return None
    items = conditions if isinstance(conditions, list) else [conditions]
    return [to_edge_condition(item) for item in items]


def to_edge_filter(selector: models.Filter | None) -> Any:
    """A qdrant-client Filter as a qdrant-edge Filter (None stays None)."""
    if selector is None:
        return None
    if selector.min_should is not None:
        raise _unsupported("min_should", selector.min_should)
    return edge.Filter(
        must=_conditions(selector.must), should=_conditions(selector.should), must_not=_conditions(selector.must_not)
    )


FilterConverter = Callable[[models.Filter | None], Any]


def _once_per_filter() -> FilterConverter:
    """:func:`to_edge_filter` that converts each Filter object once: one request repeats its
    tenant filter in every leg and IDF scope (the engine copies what it is given)."""
    converted: dict[int, Any] = {}
    kept: list[models.Filter] = []  # keeps each id() taken valid while the cache lives

    def convert(selector: models.Filter | None) -> Any:
        if selector is None:
            return None
        key = id(selector)
        if key not in converted:
            converted[key] = to_edge_filter(selector)
            kept.append(selector)
        return converted[key]

    return convert


def to_edge_params(params: models.SearchParams | None, filters: FilterConverter = to_edge_filter) -> Any:
    if params is None:
        return None
    idf = None
    if isinstance(params.idf, models.IdfCorpusParams):
        idf = edge.IdfParams(corpus=filters(params.idf.corpus))
    elif params.idf is not None and params.idf != models.IdfScope.GLOBAL:
        raise _unsupported("this IDF scope", params.idf)
    quantization = None
    if params.quantization is not None:
        quantization = edge.QuantizationSearchParams(
            ignore=bool(params.quantization.ignore),
            rescore=params.quantization.rescore,
            oversampling=params.quantization.oversampling,
        )
    return edge.SearchParams(hnsw_ef=params.hnsw_ef, exact=bool(params.exact), quantization=quantization, idf=idf)


def to_edge_quantization(config: object) -> Any:
    """A vector's quantization: int8 scalar quantization only (what the layout uses)."""
    if config is None:
        return None
    if isinstance(config, models.ScalarQuantization) and config.scalar.type == models.ScalarType.INT8:
        return edge.ScalarQuantizationConfig(
            type=edge.ScalarType.Int8, quantile=config.scalar.quantile, always_ram=config.scalar.always_ram
        )
    raise _unsupported("this quantization", config)


def _vector(query: object, using: str | None) -> Any:
    if isinstance(query, models.NearestQuery):
        query = query.nearest
    if isinstance(query, models.SparseVector):
        return edge.Query.Nearest(edge.SparseVector(list(query.indices), list(query.values)), using=using)
    # A dense vector: qdrant-client's model validated the floats already; only the shape is checked.
    if isinstance(query, list) and query and isinstance(query[0], int | float):
        return edge.Query.Nearest(query, using=using)
    return None


def to_edge_query(query: object, using: str | None) -> Any:
    """A scoring query: nearest dense/sparse, BM25 text, or RRF/DBSF fusion."""
    if query is None:
        return None
    vector = _vector(query, using)
    if vector is not None:
        return vector
    if isinstance(query, models.TextQuery):
        if using is None:
            raise StoreRequestError("a text query needs `using` (the text-indexed payload field)")
        if isinstance(query.text, str):
            return edge.TextQuery(using, query.text)
        scoring = query.text.scoring
        bm25 = edge.Bm25Params(k=scoring.bm25.k, b=scoring.bm25.b) if scoring is not None else None
        return edge.TextQuery(using, query.text.query, bm25)
    if isinstance(query, models.RrfQuery):
        k = query.rrf.k if query.rrf.k is not None else SERVER_DEFAULT_RRF_K
        return edge.Fusion.Rrf(k=k, weights=list(query.rrf.weights) if query.rrf.weights else None)
    if isinstance(query, models.FusionQuery):
        if query.fusion == models.Fusion.RRF:
            return edge.Fusion.Rrf(k=SERVER_DEFAULT_RRF_K)
        return edge.Fusion.Dbsf()
    if isinstance(query, models.FormulaQuery):
        return edge.Formula(to_edge_expression(query.formula), defaults=dict(query.defaults or {}))
    raise _unsupported("this query", query)


def to_edge_expression(expression: object) -> Any:
    """Formula expressions: constants, variables (``$score[i]``, payload keys), sums, products, max, min,
    datetimes (constants and payload keys) and the exp/gauss/lin decays."""
    if isinstance(expression, bool):
        raise _unsupported("this expression", expression)
    if isinstance(expression, int | float):
        return edge.Expression.Constant(float(expression))
    if isinstance(expression, str):
        return edge.Expression.Variable(expression)
    if isinstance(expression, models.SumExpression):
        return edge.Expression.Sum([to_edge_expression(item) for item in expression.sum])
    if isinstance(expression, models.MultExpression):
        return edge.Expression.Mult([to_edge_expression(item) for item in expression.mult])
    if isinstance(expression, models.MaxExpression):
        return edge.Expression.Max([to_edge_expression(item) for item in expression.max])
    if isinstance(expression, models.MinExpression):
        return edge.Expression.Min([to_edge_expression(item) for item in expression.min])
    if isinstance(expression, models.DatetimeExpression):
        return edge.Expression.Datetime(expression.datetime)
    if isinstance(expression, models.DatetimeKeyExpression):
        return edge.Expression.DatetimeKey(expression.datetime_key)
    if isinstance(expression, models.ExpDecayExpression):
        return _decay(edge.DecayKind.Exp, expression.exp_decay)
    if isinstance(expression, models.GaussDecayExpression):
        return _decay(edge.DecayKind.Gauss, expression.gauss_decay)
    if isinstance(expression, models.LinDecayExpression):
        return _decay(edge.DecayKind.Lin, expression.lin_decay)
    raise _unsupported("this expression", expression)


def _decay(kind: Any, params: models.DecayParamsExpression) -> Any:
    # Unset target/midpoint/scale stay None: the engine applies the server's defaults (0, 0.5, 1.0).
    # qdrant-edge 0.9.0 takes all five arguments, although its stub marks the last three optional.
    target = None if params.target is None else to_edge_expression(params.target)
    return edge.Expression.Decay(
        kind, to_edge_expression(params.x), target=target, midpoint=params.midpoint, scale=params.scale
    )


def to_edge_prefetch(prefetch: models.Prefetch, filters: FilterConverter = to_edge_filter) -> Any:
    return edge.Prefetch(
        limit=prefetch.limit if prefetch.limit is not None else 10,
        query=to_edge_query(prefetch.query, prefetch.using),
        prefetches=to_edge_prefetches(prefetch.prefetch, filters),
        params=to_edge_params(prefetch.params, filters),
        filter=filters(prefetch.filter),
        score_threshold=prefetch.score_threshold,
    )


def to_edge_prefetches(
    prefetch: models.Prefetch | Sequence[models.Prefetch] | None, filters: FilterConverter = to_edge_filter
) -> list[Any] | None:
    if prefetch is None:
        return None
    items = [prefetch] if isinstance(prefetch, models.Prefetch) else list(prefetch)
    return [to_edge_prefetch(item, filters) for item in items]


def to_edge_with_payload(with_payload: object) -> Any:
    if with_payload is None:
        return True
    if isinstance(with_payload, bool):
        return with_payload
    if isinstance(with_payload, list) and all(isinstance(key, str) for key in with_payload):
        return list(with_payload)
    raise _unsupported("this payload selector", with_payload)


def to_edge_with_vector(with_vector: object) -> Any:
    if with_vector is None:
        return False
    if isinstance(with_vector, bool):
        return with_vector
    if isinstance(with_vector, list) and all(isinstance(name, str) for name in with_vector):
        return list(with_vector)
    raise _unsupported("this vector selector", with_vector)


def to_edge_request(request: models.QueryRequest) -> Any:
    """A whole Query API request."""
    filters = _once_per_filter()
    return edge.QueryRequest(
        limit=request.limit if request.limit is not None else 10,
        offset=request.offset,
        query=to_edge_query(request.query, request.using),
        prefetches=to_edge_prefetches(request.prefetch, filters),
        with_payload=to_edge_with_payload(request.with_payload),
        with_vector=to_edge_with_vector(request.with_vector),
        filter=filters(request.filter),
        score_threshold=request.score_threshold,
        params=to_edge_params(request.params, filters),
    )


def to_edge_index(schema: object) -> Any:
    """Payload index params: keyword, integer, float, datetime or full-text (with stemmer, stop words, scoring)."""
    if isinstance(schema, models.KeywordIndexParams):
        return edge.KeywordIndexParams(is_tenant=schema.is_tenant, enable_hnsw=schema.enable_hnsw)
    if isinstance(schema, models.IntegerIndexParams):
        return edge.IntegerIndexParams(lookup=schema.lookup, range=schema.range)
    if isinstance(schema, models.FloatIndexParams):
        return edge.FloatIndexParams()
    if isinstance(schema, models.DatetimeIndexParams):
        return edge.DatetimeIndexParams()
    if isinstance(schema, models.TextIndexParams):
        return edge.TextIndexParams(
            tokenizer=_tokenizer(schema.tokenizer),
            lowercase=schema.lowercase,
            stopwords=_stopwords(schema.stopwords),
            stemmer=_stemmer(schema.stemmer),
            scoring=schema.scoring is not None and schema.scoring is not False,
        )
    raise _unsupported("this payload index", schema)


def _enum_member(enum_type: Any, value: str) -> Any:
    """qdrant-edge enums use CamelCase member names for qdrant-client's lower-case values."""
    for name in dir(enum_type):
        if name.lower() == value.replace("_", "").lower():
            return getattr(enum_type, name)
    raise StoreRequestError(f"the embedded store has no {enum_type.__name__} {value!r}")


def _tokenizer(tokenizer: models.TokenizerType | None) -> Any:
    return None if tokenizer is None else _enum_member(edge.TokenizerType, tokenizer.value)


def _stopwords(stopwords: object) -> Any:
    if stopwords is None:
        return None
    if isinstance(stopwords, models.Language):
        return _enum_member(edge.Language, stopwords.value)
    raise _unsupported("these stop words", stopwords)


def _stemmer(stemmer: object) -> Any:
    if stemmer is None:
        return None
    if isinstance(stemmer, models.SnowballParams):
        return edge.SnowballParams(_enum_member(edge.SnowballLanguage, stemmer.language.value))
    raise _unsupported("this stemmer", stemmer)

"""Fast path for the request shapes we send, over the embedded store's memory (local mode only).

qdrant-client's local mode filters by evaluating the payload filter in Python for every point on
every prefetch leg and scores sparse vectors one by one in Python: ~380 ms for one hybrid query over
10k points. This module answers the same requests from numpy arrays built once per store write
generation (``shared_contract.embedded_backend``) and gives the results local mode gives:

- dense (cosine): the query normalised like local mode, float64 scores; candidates are screened
  with a float32 product, then rescored exactly;
- sparse: the IDF modifier exactly as ``_rescore_idf`` (collection-wide corpus: live points with
  the vector; document frequencies read from the store's own counters), dot products summed in
  term order in float64 and rounded to float32, as ``sparse_dot_product`` does; no overlap is no hit;
- ranking: local mode sorts the whole score array with ``np.argsort(...)[::-1]``, whose order of
  equal scores is arbitrary; when scores tie where it matters, the whole array is ranked the same
  way, so ties come out as local mode orders them;
- fusion: qdrant-client's own ``reciprocal_rank_fusion`` (k, weights, stable order of equal scores).

Anything else (other filters, thresholds, offsets, text queries, another distance, invalid vectors)
returns None and the caller sends the request to local mode itself, which also raises its errors.
The store's lock is held only to build a snapshot and to copy the payloads of the final hits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from copy import deepcopy
from dataclasses import dataclass
from itertools import chain
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from qdrant_client import QdrantClient, models
from qdrant_client.hybrid.fusion import reciprocal_rank_fusion
from qdrant_client.local.payload_value_extractor import value_by_key

from shared_contract import embedded_backend

Rows = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

# Local mode's zero-norm guard (qdrant_client.local.distances.EPSILON).
_EPSILON = 1.1920929e-7
# float32 screening error of a 384-d unit-vector dot product is far below this.
_SCREEN_MARGIN = 1e-4
# Dense scores this close may be equal in local mode's own float64 product: rank them its way.
_DENSE_TIE = 1e-12
_MAX_ATTEMPTS = 3
_DEFAULT_LIMIT = 10


@dataclass(frozen=True, slots=True)
class _DenseIndex:
    matrix: npt.NDArray[Any]  # every row as stored (deleted too), normalised as local mode does
    screen: npt.NDArray[np.float32]
    usable: Mask  # alive and has the vector


@dataclass(frozen=True, slots=True)
class _SparseIndex:
    terms: npt.NDArray[np.int64]  # sorted distinct term ids
    starts: npt.NDArray[np.int64]  # column j is rows[starts[j]:starts[j + 1]]
    rows: Rows
    values: npt.NDArray[np.float64]
    usable: Mask
    document_frequencies: dict[int, int] | None  # None: no IDF modifier (or no counters yet)
    corpus_size: int


@dataclass(frozen=True, slots=True)
class _Snapshot:
    generation: int
    size: int
    ids: list[models.ExtendedPointId]
    tenants: dict[str, Rows]
    dense: dict[str, _DenseIndex]
    sparse: dict[str, _SparseIndex]


@dataclass(frozen=True, slots=True)
class _Leg:
    using: str
    dense: npt.NDArray[np.float64] | None
    sparse: models.SparseVector | None
    tenants: tuple[str, ...] | None
    limit: int


@dataclass(frozen=True, slots=True)
class _Plan:
    legs: list[_Leg]
    fusion: models.Rrf | None  # None: a single leg, no fusion
    limit: int


class EmbeddedIndex:
    """Answers supported Query API requests on the embedded store from cached numpy arrays."""

    def __init__(self, client: QdrantClient, collection: str, tenant_key: str) -> None:
        self.client = client
        self.collection = collection
        self.tenant_key = tenant_key
        self._snapshot: _Snapshot | None = None

    def query(self, request: models.QueryRequest) -> list[models.ScoredPoint] | None:
        """The points local mode would return, or None when this request is not ours to answer."""
        plan = self._plan(request)
        if plan is None:
            return None
        for _ in range(_MAX_ATTEMPTS):
            snapshot = self.snapshot()
            if snapshot is None:
                return None
            ranked = _run(plan, snapshot)
            if ranked is None:
                return None
            points = self._with_payloads(snapshot, ranked)
            if points is not None:
                return points
        return None  # writes kept landing between snapshot and payload copy

    def snapshot(self) -> _Snapshot | None:
        """The arrays for the current generation (rebuilt under the store's lock when stale)."""
        with embedded_backend(self.client) as handle:
            if handle is None:
                return None
            backend, generation = handle
            cached = self._snapshot
            if cached is not None and cached.generation == generation:
                return cached
            collection = _collection(backend, self.collection)
            if collection is None:
                return None
            built = _build(collection, generation, self.tenant_key)
            self._snapshot = built
            return built

    def _with_payloads(self, snapshot: _Snapshot, ranked: list[tuple[int, float]]) -> list[models.ScoredPoint] | None:
        with embedded_backend(self.client) as handle:
            if handle is None or handle[1] != snapshot.generation:
                return None
            collection = _collection(handle[0], self.collection)
            if collection is None:
                return None
            payloads: list[dict[str, Any]] = [deepcopy(collection.payload[row]) for row, _ in ranked]
        return [
            models.ScoredPoint(id=snapshot.ids[row], version=0, score=score, payload=payload)
            for (row, score), payload in zip(ranked, payloads, strict=True)
        ]

    def _plan(self, request: models.QueryRequest) -> _Plan | None:
        if (
            request.score_threshold is not None
            or request.offset
            or request.params is not None
            or request.lookup_from is not None
            or request.with_vector not in (None, False)
            or request.with_payload not in (None, True)
        ):
            return None
        limit = request.limit or _DEFAULT_LIMIT
        if not request.prefetch:
            leg = self._leg(request.query, request.using, request.filter, limit)
            return None if leg is None else _Plan(legs=[leg], fusion=None, limit=limit)
        if request.filter is not None:
            return None
        fusion: models.Rrf
        if isinstance(request.query, models.RrfQuery):
            fusion = request.query.rrf
        elif isinstance(request.query, models.FusionQuery) and request.query.fusion == models.Fusion.RRF:
            fusion = models.Rrf()
        else:
            return None
        prefetches = request.prefetch if isinstance(request.prefetch, list) else [request.prefetch]
        legs: list[_Leg] = []
        for prefetch in prefetches:
            if (
                prefetch.prefetch
                or prefetch.score_threshold is not None
                or prefetch.params is not None
                or prefetch.lookup_from is not None
            ):
                return None
            leg = self._leg(prefetch.query, prefetch.using, prefetch.filter, prefetch.limit or _DEFAULT_LIMIT)
            if leg is None:
                return None
            legs.append(leg)
        if fusion.weights is not None and len(fusion.weights) != len(legs):
            return None
        return _Plan(legs=legs, fusion=fusion, limit=limit)

    def _leg(self, query: Any, using: str | None, flt: models.Filter | None, limit: int) -> _Leg | None:
        if using is None:
            return None
        tenants = self._tenants(flt)
        if tenants is None:
            return None
        scope = None if tenants == "all" else tenants
        if isinstance(query, models.NearestQuery) and query.mmr is None:
            query = query.nearest
        if isinstance(query, models.SparseVector):
            return _Leg(using=using, dense=None, sparse=query, tenants=scope, limit=limit)
        if isinstance(query, list) and query and all(isinstance(value, float) for value in query):
            # local mode turns the list into a float64 array: score in float64 like it does
            return _Leg(using=using, dense=np.array(query, dtype=np.float64), sparse=None, tenants=scope, limit=limit)
        return None

    def _tenants(self, flt: models.Filter | None) -> tuple[str, ...] | Literal["all"] | None:
        """The tenant names of ``must=[key MatchAny/MatchValue]``, "all" without a filter, None for others."""
        if flt is None:
            return "all"
        if flt.should is not None or flt.must_not is not None or flt.min_should is not None:
            return None
        must = flt.must if isinstance(flt.must, list) else [flt.must]
        if len(must) != 1:
            return None
        condition = must[0]
        if not isinstance(condition, models.FieldCondition) or condition.key != self.tenant_key:
            return None
        if any(
            value is not None
            for value in (
                condition.range,
                condition.geo_bounding_box,
                condition.geo_radius,
                condition.geo_polygon,
                condition.values_count,
                condition.is_empty,
                condition.is_null,
            )
        ):
            return None
        match = condition.match
        if isinstance(match, models.MatchAny) and all(isinstance(name, str) for name in match.any):
            return tuple(str(name) for name in match.any)
        if isinstance(match, models.MatchValue) and isinstance(match.value, str):
            return (match.value,)
        return None


# ---------------------------------------------------------------------------------------------
# Snapshot


def _collection(backend: Any, name: str) -> Any | None:
    if getattr(backend, "closed", False):
        return None
    collections: dict[str, Any] = backend.collections
    aliases: dict[str, str] = getattr(backend, "aliases", {})
    if name in collections:
        return collections[name]
    if name in aliases:
        return collections.get(aliases[name])
    return None


def _build(collection: Any, generation: int, tenant_key: str) -> _Snapshot:
    """Copies what the queries read; called with the store's lock held."""
    size = len(collection.payload)
    alive: Mask = ~np.asarray(collection.deleted[:size], dtype=np.bool_)
    dense: dict[str, _DenseIndex] = {}
    for name, params in collection.vectors_config.items():
        if params.distance != models.Distance.COSINE:
            continue  # not ours: local mode answers
        stored = np.array(collection.vectors[name][:size])  # a copy: local mode writes rows in place
        norms = np.linalg.norm(stored, axis=-1)[:, np.newaxis]
        stored /= np.where(norms != 0.0, norms, _EPSILON)
        usable = alive & ~np.asarray(collection.deleted_per_vector[name][:size], dtype=np.bool_)
        screen = stored if stored.dtype == np.float32 else stored.astype(np.float32)
        dense[name] = _DenseIndex(matrix=stored, screen=screen, usable=usable)
    sparse: dict[str, _SparseIndex] = {}
    for name, vectors in collection.sparse_vectors.items():
        usable = alive & ~np.asarray(collection.deleted_per_vector[name][:size], dtype=np.bool_)
        params = collection.config.sparse_vectors[name]
        store = collection.sparse_vectors_idf.get(name)
        frequencies = dict(store) if params.modifier == models.Modifier.IDF and store is not None else None
        sparse[name] = _sparse_index(vectors[:size], usable, frequencies)
    return _Snapshot(
        generation=generation,
        size=size,
        ids=list(collection.ids_inv[:size]),
        tenants=_tenant_rows(collection.payload[:size], tenant_key),
        dense=dense,
        sparse=sparse,
    )


def _sparse_index(vectors: Sequence[Any], usable: Mask, frequencies: dict[int, int] | None) -> _SparseIndex:
    lengths = np.fromiter((len(vector.indices) for vector in vectors), dtype=np.int64, count=len(vectors))
    total = int(lengths.sum())
    terms_flat = np.fromiter(chain.from_iterable(vector.indices for vector in vectors), dtype=np.int64, count=total)
    values_flat = np.fromiter(chain.from_iterable(vector.values for vector in vectors), dtype=np.float64, count=total)
    rows_flat = np.repeat(np.arange(len(vectors), dtype=np.int64), lengths)
    order = np.argsort(terms_flat, kind="stable")
    sorted_terms = terms_flat[order]
    terms, first = np.unique(sorted_terms, return_index=True)
    starts = np.append(first, total).astype(np.int64)
    return _SparseIndex(
        terms=terms.astype(np.int64),
        starts=starts,
        rows=rows_flat[order],
        values=values_flat[order],
        usable=usable,
        document_frequencies=frequencies,
        corpus_size=int(np.count_nonzero(usable)),
    )


_PLAIN_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _tenant_rows(payloads: Sequence[dict[str, Any]], key: str) -> dict[str, Rows]:
    """Rows per string value at ``key``, extracted the way local mode's filter does."""
    path = key.split(".") if _PLAIN_PATH.match(key) else None
    members: dict[str, list[int]] = {}
    for row, payload in enumerate(payloads):
        value = _plain_value(payload, path) if path is not None else None
        if isinstance(value, str):
            members.setdefault(value, []).append(row)
            continue
        # arrays, odd paths: local mode's own extractor (10x slower, exact)
        values = value_by_key(payload, key) or []
        for found in {found for found in values if isinstance(found, str)}:
            members.setdefault(found, []).append(row)
    return {name: np.array(rows, dtype=np.int64) for name, rows in members.items()}


def _plain_value(payload: Any, path: list[str]) -> Any:
    for part in path:
        if not isinstance(payload, dict):
            return None
        payload = payload.get(part)
    return payload


# ---------------------------------------------------------------------------------------------
# Query


def _run(plan: _Plan, snapshot: _Snapshot) -> list[tuple[int, float]] | None:
    results: list[list[tuple[int, float]]] = []
    for leg in plan.legs:
        ranked = _run_leg(leg, snapshot)
        if ranked is None:
            return None
        results.append(ranked)
    if plan.fusion is None:
        return results[0][: plan.limit]
    responses = [
        [models.ScoredPoint.model_construct(id=row, version=0, score=score) for row, score in ranked]
        for ranked in results
    ]
    fused = reciprocal_rank_fusion(
        responses=responses, limit=plan.limit, ranking_constant_k=plan.fusion.k, weights=plan.fusion.weights
    )
    return [(int(point.id), float(point.score)) for point in fused]


def _scope(snapshot: _Snapshot, tenants: tuple[str, ...] | None, usable: Mask) -> Mask:
    if tenants is None:
        return usable
    selected = np.zeros(snapshot.size, dtype=np.bool_)
    for name in tenants:
        rows = snapshot.tenants.get(name)
        if rows is not None:
            selected[rows] = True
    return selected & usable


def _run_leg(leg: _Leg, snapshot: _Snapshot) -> list[tuple[int, float]] | None:
    if leg.dense is not None:
        index = snapshot.dense.get(leg.using)
        if index is None or leg.dense.shape != (index.matrix.shape[1],) or bool(np.isnan(leg.dense).any()):
            return None
        return _dense(leg.dense, index, _scope(snapshot, leg.tenants, index.usable), leg.limit)
    if leg.sparse is not None:
        sparse_index = snapshot.sparse.get(leg.using)
        if sparse_index is None:
            return None
        return _sparse(leg.sparse, sparse_index, _scope(snapshot, leg.tenants, sparse_index.usable), leg.limit)
    return None


def _dense(query: npt.NDArray[np.float64], index: _DenseIndex, mask: Mask, limit: int) -> list[tuple[int, float]]:
    norm = np.linalg.norm(query)
    unit = query / np.where(norm != 0.0, norm, _EPSILON)
    rows: Rows = np.flatnonzero(mask).astype(np.int64)
    if rows.size == 0:
        return []
    if rows.size * 4 >= mask.size:
        screened = (index.screen @ unit.astype(np.float32))[rows]
    else:
        screened = index.screen[rows] @ unit.astype(np.float32)
    if rows.size > limit:
        kth = np.partition(screened, rows.size - limit)[rows.size - limit]
        rows = rows[screened >= kth - _SCREEN_MARGIN]
    exact = index.matrix[rows].astype(np.float64, copy=False) @ unit
    order = np.argsort(-exact, kind="stable")[: limit + 1]
    head = exact[order]
    if head.size > 1 and bool(np.any(np.abs(np.diff(head)) <= _DENSE_TIE)):
        return _rank_like_local(np.dot(index.matrix, unit), mask, limit)
    return [(int(rows[i]), float(exact[i])) for i in order[:limit]]


def _sparse(query: models.SparseVector, index: _SparseIndex, mask: Mask, limit: int) -> list[tuple[int, float]] | None:
    indices = [int(i) for i in query.indices]
    values = [float(v) for v in query.values]
    if (
        len(indices) != len(values)
        or len(set(indices)) != len(indices)
        or any(math.isnan(v) for v in values)
        or any(i < 0 or i > 0xFFFFFFFF for i in indices)
    ):
        return None  # local mode rejects it: let it say so
    frequencies = index.document_frequencies
    if frequencies is not None:
        values = [
            value * _idf(frequencies.get(term, 0), index.corpus_size)
            for term, value in zip(indices, values, strict=True)
        ]
    size = mask.size
    sums = np.zeros(size, dtype=np.float64)
    touched = np.zeros(size, dtype=np.bool_)
    # Term order, like sparse_dot_product over sorted indices: the same float64 sums.
    for term, value in sorted(zip(indices, values, strict=True)):
        column = int(np.searchsorted(index.terms, term))
        if column >= index.terms.size or int(index.terms[column]) != term:
            continue
        start, end = int(index.starts[column]), int(index.starts[column + 1])
        rows = index.rows[start:end]
        sums[rows] += value * index.values[start:end]
        touched[rows] = True
    scores = np.full(size, -np.inf, dtype=np.float32)
    scores[touched] = sums[touched].astype(np.float32)
    candidates: Rows = np.flatnonzero(touched & mask).astype(np.int64)
    order = np.argsort(-scores[candidates], kind="stable")[: limit + 1]
    head = scores[candidates[order]]
    if head.size > 1 and bool(np.any(head[1:] == head[:-1])):
        return _rank_like_local(scores, mask & touched, limit)
    return [(int(candidates[i]), float(scores[candidates[i]])) for i in order[:limit]]


def _idf(document_frequency: int, corpus_size: int) -> float:
    # LocalCollection._compute_idf
    return math.log((corpus_size - document_frequency + 0.5) / (document_frequency + 0.5) + 1)


def _rank_like_local(scores: npt.NDArray[Any], mask: Mask, limit: int) -> list[tuple[int, float]]:
    """Local mode's own ranking of the whole array, so equal scores keep its (arbitrary) order."""
    order = np.argsort(scores)[::-1]
    kept = order[mask[order]][:limit]
    return [(int(row), float(scores[row])) for row in kept]

"""Translation between the port's types and qdrant-edge's: the collection config, points, records and the
engine's error messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import qdrant_edge as edge
from qdrant_client import models

from rag_runtime.embedding.types import SparseVectorData
from rag_runtime.store.edge_requests import to_edge_quantization
from rag_runtime.store.layout import CollectionSpec
from rag_runtime.store.port import ChunkPoint, PointRecord
from shared_contract.errors import StoreRequestError
from shared_contract.manifest import CollectionManifest
from shared_contract.schema import DENSE_VECTOR, MULTILINGUAL_VECTOR, SPARSE_VECTOR

# How qdrant-edge reports that WAL lock: a bare Exception naming the OS error.
WAL_LOCKED = "Kind(WouldBlock)"


def is_rejection(message: str) -> bool:
    """The engine's messages for an invalid request (its Wrong input / validation errors), not I/O."""
    lowered = message.lower()
    markers = ("wrong input", "validation failed", "dimension error", "not existing vector", "bad request")
    return any(marker in lowered for marker in markers)


def is_text_index_problem(message: str) -> bool:
    lowered = message.lower()
    return "text index" in lowered or "scoring" in lowered or "full text" in lowered or "full-text" in lowered


def edge_config(spec: CollectionSpec, *, search_threads: int) -> Any:
    """The engine's config for ``spec``: its vectors, graphs and int8 copies, and the search pool size."""
    hnsw = edge.HnswIndexConfig(
        m=spec.hnsw_config.m or 0,
        ef_construct=spec.hnsw_config.ef_construct or 100,
        full_scan_threshold=spec.hnsw_config.full_scan_threshold or 10_000,
        payload_m=spec.hnsw_config.payload_m,
    )
    return edge.EdgeConfig(
        vectors={
            name: edge.EdgeVectorParams(
                size=params.size,
                distance=edge.Distance.Cosine,
                hnsw_config=hnsw,
                quantization_config=to_edge_quantization(params.quantization_config),
                memory=edge.Memory.Cold if params.memory == models.Memory.COLD else None,
            )
            for name, params in spec.vectors_config.items()
        },
        sparse_vectors=None if spec.sparse_idf is None else sparse_params(idf=spec.sparse_idf),
        max_search_threads=search_threads,
    )


def sparse_params(*, idf: bool) -> dict[str, Any]:
    return {SPARSE_VECTOR: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf if idf else None)}


def read_vectors(vector: Any) -> dict[str, list[float] | SparseVectorData]:
    named: dict[str, list[float] | SparseVectorData] = {}
    for name, value in (vector or {}).items():
        if isinstance(value, edge.SparseVector):
            named[name] = SparseVectorData(indices=list(value.indices), values=list(value.values))
        else:
            named[name] = [float(x) for x in value]
    return named


def check_dims(point: ChunkPoint, manifest: CollectionManifest) -> None:
    """A StoreRequestError for a vector the collection cannot hold (as the server answers 400)."""
    if len(point.dense) != manifest.dense_dim:
        raise StoreRequestError(
            f"embedded store rejected upsert: point {point.point_id} has a {len(point.dense)}-d dense "
            f"vector, the collection holds {manifest.dense_dim}-d vectors"
        )
    if point.multilingual is not None and len(point.multilingual) != manifest.multilingual_dim:
        held = "no such vector" if manifest.multilingual_dim is None else f"{manifest.multilingual_dim}-d vectors"
        raise StoreRequestError(
            f"embedded store rejected upsert: point {point.point_id} has a {len(point.multilingual)}-d "
            f"{MULTILINGUAL_VECTOR} vector, the collection holds {held}"
        )


def edge_vectors(point: ChunkPoint) -> dict[str, Any]:
    vectors: dict[str, Any] = {DENSE_VECTOR: [float(value) for value in point.dense]}
    if point.sparse is not None:
        vectors[SPARSE_VECTOR] = edge.SparseVector(list(point.sparse.indices), list(point.sparse.values))
    if point.multilingual is not None:
        vectors[MULTILINGUAL_VECTOR] = [float(value) for value in point.multilingual]
    return vectors


def scored_records(points: Sequence[Any], *, with_vectors: bool) -> list[PointRecord]:
    return [
        PointRecord(
            point_id=str(point.id),
            payload=point.payload or {},
            score=point.score,
            vectors=read_vectors(point.vector) if with_vectors else None,
        )
        for point in points
    ]


def plain_records(records: Sequence[Any], *, with_vectors: bool) -> list[PointRecord]:
    """A scroll page's records (no scores)."""
    return [
        PointRecord(
            point_id=str(record.id),
            payload=record.payload or {},
            vectors=read_vectors(record.vector) if with_vectors else None,
        )
        for record in records
    ]


def bm25_fields(schema: Mapping[str, Any]) -> frozenset[str]:
    """The payload fields whose text index scores (BM25), from the shard's payload schema."""
    return frozenset(
        name
        for name, index in schema.items()
        if index.data_type == edge.PayloadSchemaType.Text
        and index.params is not None
        and getattr(index.params, "scoring", None) is not None
    )

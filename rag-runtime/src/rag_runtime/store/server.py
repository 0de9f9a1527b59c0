"""The storage port on a Qdrant server, through qdrant-client's async client."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx
from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from rag_runtime.embedding.types import SparseVectorData
from rag_runtime.store.layout import CollectionSpec, lexical_indexes_for
from rag_runtime.store.port import ChunkPoint, FacetCount, PointRecord, StoreInfo, StoreKind
from shared_contract.errors import (
    CollectionMissingError,
    ManifestMissingError,
    QdrantUnavailableError,
    StoreIncompatibleError,
    StoreRequestError,
)
from shared_contract.manifest import MANIFEST_METADATA_KEY, CollectionManifest
from shared_contract.schema import DENSE_VECTOR, MULTILINGUAL_VECTOR, SPARSE_VECTOR

logger = logging.getLogger(__name__)

T = TypeVar("T")

# The lexical legs need a text index with `scoring` (BM25 via TextQuery) and a per-query IDF
# corpus; we require the release qdrant-client 1.20's models (which have both) were generated from.
MIN_SERVER_VERSION = (1, 20, 0)

# A file's versions are switched by filter-based writes (claim, publish, sweep) that can reach the
# cluster through different peers. The server's default ("weak") lets replicas apply such writes in
# different orders, so two replicas of a shard could disagree on which version is live; "medium"
# sends every write of a shard through one leader, so all replicas apply them in one order.
WRITE_ORDERING = models.WriteOrdering.MEDIUM


def _is_text_index_problem(message: str) -> bool:
    lowered = message.lower()
    return "text index" in lowered or "scoring" in lowered or "full-text" in lowered


def parse_version(version: str) -> tuple[int, int, int]:
    """``"1.17.1"`` -> ``(1, 17, 1)``; pre-release and build suffixes are ignored."""
    parts = version.split("-", 1)[0].split("+", 1)[0].split(".")
    numbers = [int(part) if part.isdigit() else 0 for part in parts[:3]]
    while len(numbers) < 3:
        numbers.append(0)
    return numbers[0], numbers[1], numbers[2]


class ServerStore:
    """A Qdrant server collection. Requests go out as qdrant-client builds them (asserted in tests)."""

    def __init__(
        self,
        url: str,
        collection: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        extra: dict[str, Any] = {} if transport is None else {"transport": transport}
        # No version probe at construction (a network call); readiness checks the version instead.
        self._client = AsyncQdrantClient(
            url=url, api_key=api_key, timeout=int(timeout), check_compatibility=False, **extra
        )
        self._collection = collection
        self._indexed: set[str] | None = None  # payload fields with an index (read once, then kept)

    @property
    def kind(self) -> StoreKind:
        return "server"

    @property
    def collection(self) -> str:
        return self._collection

    async def _call(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        try:
            return await call()
        except UnexpectedResponse as exc:
            message = exc.content.decode("utf-8", "replace")[:500] if exc.content else str(exc)
            if exc.status_code == 404:
                raise CollectionMissingError(self._collection) from exc
            if exc.status_code is not None and 400 <= exc.status_code < 500:
                raise StoreRequestError(
                    f"qdrant rejected {operation} ({exc.status_code}): {message}",
                    missing_text_index=_is_text_index_problem(message),
                ) from exc
            raise QdrantUnavailableError(f"qdrant {operation} failed: HTTP {exc.status_code}") from exc
        except (ResponseHandlingException, httpx.HTTPError, ConnectionError, TimeoutError) as exc:
            raise QdrantUnavailableError(f"qdrant {operation} failed: {type(exc).__name__}") from exc

    async def check_version(self) -> str:
        """The server's version; StoreIncompatibleError when it predates BM25 text queries."""
        info = await self._call("version", self._client.info)
        if parse_version(info.version) < MIN_SERVER_VERSION:
            wanted = ".".join(str(part) for part in MIN_SERVER_VERSION)
            raise StoreIncompatibleError(
                f"Qdrant {info.version} is too old: the lexical search needs Qdrant >= {wanted} "
                "(text index scoring and per-query IDF)"
            )
        return info.version

    async def collection_exists(self) -> bool:
        return await self._call("collection_exists", lambda: self._client.collection_exists(self._collection))

    async def create_collection(self, spec: CollectionSpec) -> bool:
        if await self.collection_exists():
            return False
        try:
            await self._client.create_collection(
                collection_name=spec.name,
                vectors_config=spec.vectors_config,
                sparse_vectors_config=spec.sparse_vectors_config,
                hnsw_config=spec.hnsw_config,
                metadata=spec.metadata,
                shard_number=spec.shard_number,
                replication_factor=spec.replication_factor,
                write_consistency_factor=spec.write_consistency_factor,
            )
        except UnexpectedResponse as exc:
            # Another replica may have created it between the check and the call.
            if await self.collection_exists():
                return False
            if exc.status_code is not None and 400 <= exc.status_code < 500:
                # The server refused the layout (e.g. shard or replication settings it cannot honour):
                # a configuration problem to show the operator, not an outage to wait out.
                message = exc.content.decode("utf-8", "replace")[:500] if exc.content else str(exc)
                raise StoreRequestError(f"qdrant rejected create_collection ({exc.status_code}): {message}") from exc
            raise QdrantUnavailableError(f"qdrant create_collection failed: HTTP {exc.status_code}") from exc
        except (ResponseHandlingException, httpx.HTTPError, ConnectionError, TimeoutError) as exc:
            raise QdrantUnavailableError(f"qdrant create_collection failed: {type(exc).__name__}") from exc
        return True

    async def ensure_indexes(self, spec: CollectionSpec) -> None:
        info = await self._call("get_collection", lambda: self._client.get_collection(self._collection))
        await self._ensure_dense_copies(info, spec)
        existing = info.payload_schema
        for index in spec.payload_indexes:
            if index.field_name in existing:
                continue
            await self._call(
                "create_payload_index",
                lambda index=index: self._client.create_payload_index(  # type: ignore[misc]
                    collection_name=self._collection,
                    field_name=index.field_name,
                    field_schema=index.schema,
                    wait=True,
                ),
            )

    async def _ensure_dense_copies(self, info: models.CollectionInfo, spec: CollectionSpec) -> None:
        """The layout's int8 copies of ``text-dense`` for a collection created before it had them; the
        server builds them in the background and searches go on meanwhile. A quantization the
        collection already has, on the vector or collection-wide (an operator's choice), stays."""
        wanted = spec.vectors_config[DENSE_VECTOR].quantization_config
        vectors = info.config.params.vectors
        if wanted is None or not isinstance(vectors, dict) or DENSE_VECTOR not in vectors:
            return
        if vectors[DENSE_VECTOR].quantization_config is not None or info.config.quantization_config is not None:
            return
        await self._call(
            "update_collection",
            lambda: self._client.update_collection(
                collection_name=self._collection,
                vectors_config={DENSE_VECTOR: models.VectorParamsDiff(quantization_config=wanted)},
            ),
        )
        logger.info(
            "collection %s: int8 copies of %s requested; the server builds them", self._collection, DENSE_VECTOR
        )

    async def read_manifest(self) -> CollectionManifest:
        if not await self.collection_exists():
            raise CollectionMissingError(self._collection)
        info = await self._call("get_collection", lambda: self._client.get_collection(self._collection))
        raw = (info.config.metadata or {}).get(MANIFEST_METADATA_KEY)
        if not isinstance(raw, dict):
            raise ManifestMissingError(self._collection)
        return CollectionManifest.model_validate(raw)

    async def info(self) -> StoreInfo:
        info = await self._call("get_collection", lambda: self._client.get_collection(self._collection))
        sparse = info.config.params.sparse_vectors or {}
        text_fields = frozenset(
            name
            for name, schema in info.payload_schema.items()
            if schema.data_type == models.PayloadSchemaType.TEXT
            and isinstance(schema.params, models.TextIndexParams)
            and schema.params.scoring is not None
            and schema.params.scoring is not False
        )
        dense = info.config.params.vectors
        return StoreInfo(
            has_sparse=SPARSE_VECTOR in sparse,
            text_index_fields=text_fields,
            has_multilingual=isinstance(dense, dict) and MULTILINGUAL_VECTOR in dense,
        )

    async def upsert(self, points: Sequence[ChunkPoint]) -> None:
        if not points:
            return
        await self._index_lexical_fields(points)
        structs = [
            models.PointStruct(id=point.point_id, vector=_vectors(point), payload=dict(point.payload))
            for point in points
        ]
        await self._call(
            "upsert",
            lambda: self._client.upsert(
                collection_name=self._collection, points=structs, wait=True, ordering=WRITE_ORDERING
            ),
        )

    async def _index_lexical_fields(self, points: Sequence[ChunkPoint]) -> None:
        """Create the BM25 index of each lexical field this batch writes for the first time
        (another replica creating the same index meanwhile is harmless: creation is idempotent)."""
        if self._indexed is None:
            info = await self._call("get_collection", lambda: self._client.get_collection(self._collection))
            self._indexed = set(info.payload_schema)
        for index in lexical_indexes_for((point.payload for point in points), self._indexed):
            await self._call(
                "create_payload_index",
                lambda index=index: self._client.create_payload_index(  # type: ignore[misc]
                    collection_name=self._collection, field_name=index.field_name, field_schema=index.schema, wait=True
                ),
            )
            self._indexed.add(index.field_name)

    async def set_payload(self, selector: models.Filter, payload: Mapping[str, Any], *, key: str | None = None) -> None:
        await self._call(
            "set_payload",
            lambda: self._client.set_payload(
                collection_name=self._collection,
                payload=dict(payload),
                points=models.FilterSelector(filter=selector),
                key=key,
                wait=True,
                ordering=WRITE_ORDERING,
            ),
        )

    async def delete(self, selector: models.Filter) -> None:
        await self._call(
            "delete",
            lambda: self._client.delete(
                collection_name=self._collection,
                points_selector=models.FilterSelector(filter=selector),
                wait=True,
                ordering=WRITE_ORDERING,
            ),
        )

    async def query(self, request: models.QueryRequest) -> list[PointRecord]:
        response = await self._call(
            "query_points",
            lambda: self._client.query_points(
                collection_name=self._collection,
                query=request.query,
                using=request.using,
                prefetch=request.prefetch,
                query_filter=request.filter,
                search_params=request.params,
                score_threshold=request.score_threshold,
                limit=request.limit or 10,
                with_payload=request.with_payload if request.with_payload is not None else True,
                with_vectors=request.with_vector if request.with_vector is not None else False,
            ),
        )
        return _scored_records(response.points, with_vectors=request.with_vector not in (None, False))

    async def query_batch(self, requests: Sequence[models.QueryRequest]) -> list[list[PointRecord]]:
        if not requests:
            return []
        # Defaults as query() sends them, so a request means the same in either call.
        sent = [
            request.model_copy(
                update={
                    "limit": request.limit or 10,
                    "with_payload": request.with_payload if request.with_payload is not None else True,
                    "with_vector": request.with_vector if request.with_vector is not None else False,
                }
            )
            for request in requests
        ]
        responses = await self._call(
            "query_batch_points",
            lambda: self._client.query_batch_points(collection_name=self._collection, requests=sent),
        )
        return [
            _scored_records(response.points, with_vectors=request.with_vector not in (None, False))
            for request, response in zip(sent, responses, strict=True)
        ]

    async def scroll(
        self,
        selector: models.Filter | None,
        *,
        limit: int,
        offset: str | None = None,
        with_payload: bool | Sequence[str] = True,
        with_vectors: bool = False,
    ) -> tuple[list[PointRecord], str | None]:
        records, next_offset = await self._call(
            "scroll",
            lambda: self._client.scroll(
                collection_name=self._collection,
                scroll_filter=selector,
                limit=limit,
                offset=offset,
                with_payload=with_payload if isinstance(with_payload, bool) else list(with_payload),
                with_vectors=with_vectors,
            ),
        )
        page = [
            PointRecord(
                point_id=str(record.id),
                payload=dict(record.payload or {}),
                vectors=_read_vectors(record.vector) if with_vectors else None,
            )
            for record in records
        ]
        return page, None if next_offset is None else str(next_offset)

    async def retrieve(
        self, point_ids: Sequence[str], *, with_payload: bool | Sequence[str] = True
    ) -> list[PointRecord]:
        if not point_ids:
            return []
        records = await self._call(
            "retrieve",
            lambda: self._client.retrieve(
                collection_name=self._collection,
                ids=list(point_ids),
                with_payload=with_payload if isinstance(with_payload, bool) else list(with_payload),
                with_vectors=False,
            ),
        )
        return [PointRecord(point_id=str(record.id), payload=dict(record.payload or {})) for record in records]

    async def count(self, selector: models.Filter | None) -> int:
        result = await self._call(
            "count",
            lambda: self._client.count(collection_name=self._collection, count_filter=selector, exact=True),
        )
        return int(result.count)

    async def facet(self, key: str, selector: models.Filter | None, *, limit: int) -> list[FacetCount]:
        response = await self._call(
            "facet",
            lambda: self._client.facet(
                collection_name=self._collection, key=key, facet_filter=selector, limit=limit, exact=True
            ),
        )
        return [FacetCount(value=hit.value, count=int(hit.count)) for hit in response.hits]

    async def close(self) -> None:
        await self._client.close()


def _read_vectors(vector: object) -> dict[str, list[float] | SparseVectorData]:
    named: dict[str, list[float] | SparseVectorData] = {}
    if not isinstance(vector, dict):
        return named
    for name, value in vector.items():
        if isinstance(value, models.SparseVector):
            named[str(name)] = SparseVectorData(indices=list(value.indices), values=list(value.values))
        elif isinstance(value, list):
            named[str(name)] = [float(x) for x in value]
    return named


def _vectors(point: ChunkPoint) -> dict[str, Any]:
    vectors: dict[str, Any] = {DENSE_VECTOR: list(point.dense)}
    if point.sparse is not None:
        vectors[SPARSE_VECTOR] = models.SparseVector(
            indices=list(point.sparse.indices), values=list(point.sparse.values)
        )
    if point.multilingual is not None:
        vectors[MULTILINGUAL_VECTOR] = list(point.multilingual)
    return vectors


def _scored_records(points: Sequence[models.ScoredPoint], *, with_vectors: bool) -> list[PointRecord]:
    return [
        PointRecord(
            point_id=str(point.id),
            payload=dict(point.payload or {}),
            score=float(point.score),
            vectors=_read_vectors(point.vector) if with_vectors else None,
        )
        for point in points
    ]

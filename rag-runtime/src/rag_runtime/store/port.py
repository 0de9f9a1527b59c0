"""The storage port: every operation the two services need from Qdrant, written once.

Two adapters implement it: :class:`~rag_runtime.store.server.ServerStore` (a Qdrant server
through qdrant-client's async client) and :class:`~rag_runtime.store.edge.EdgeStore`
(Qdrant's own engine in-process, qdrant-edge). Requests and filters are qdrant-client's models,
the lingua franca of both; results are the small value types below. Failures arrive as the
contract's typed errors: ``QdrantUnavailableError`` (unreachable, I/O), ``StoreRequestError``
(a call the store rejected), ``CollectionMissingError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from qdrant_client import models

from rag_runtime.embedding.types import SparseVectorData
from rag_runtime.store.layout import CollectionSpec
from shared_contract.manifest import CollectionManifest

StoreKind = Literal["server", "embedded"]


@dataclass(frozen=True, slots=True)
class ChunkPoint:
    """One point to write: the contract's named vectors and a Haystack-shaped payload."""

    point_id: str
    dense: Sequence[float]
    sparse: SparseVectorData | None
    payload: Mapping[str, Any]
    # ``text-dense-multilingual``: only for chunks outside the dense model's languages.
    multilingual: Sequence[float] | None = None


@dataclass(frozen=True, slots=True)
class PointRecord:
    """One point read back: id, payload and (for queries) the score."""

    point_id: str
    payload: dict[str, Any] = field(default_factory=lambda: dict[str, Any]())
    score: float = 0.0
    # Named vectors (dense as a list, sparse as SparseVectorData); only when the read asked for them.
    vectors: dict[str, list[float] | SparseVectorData] | None = None


@dataclass(frozen=True, slots=True)
class FacetCount:
    """One value of a faceted payload key and how many points carry it."""

    value: str | int | bool
    count: int


@dataclass(frozen=True, slots=True)
class StoreInfo:
    """What the collection offers the search paths."""

    has_sparse: bool
    text_index_fields: frozenset[str]
    has_multilingual: bool = False  # the collection has ``text-dense-multilingual``


class ChunkStore(Protocol):
    """The shared collection, as both services use it. Every method is a coroutine."""

    @property
    def kind(self) -> StoreKind:
        """``server`` or ``embedded``."""
        ...

    @property
    def collection(self) -> str:
        """The physical collection's name (QDRANT_INDEX)."""
        ...

    async def collection_exists(self) -> bool:
        """Whether the collection exists."""
        ...

    async def create_collection(self, spec: CollectionSpec) -> bool:
        """Create the collection with ``spec`` unless it exists; True when this call created it."""
        ...

    async def ensure_indexes(self, spec: CollectionSpec) -> None:
        """Create the payload indexes of ``spec`` the collection lacks (idempotent). On a server, a
        collection whose ``text-dense`` has no quantization also gains the layout's int8 copies (the
        embedded engine builds them in ``rag optimize``, :meth:`EdgeStore.optimize`)."""
        ...

    async def read_manifest(self) -> CollectionManifest:
        """The stored contract manifest (CollectionMissingError / ManifestMissingError)."""
        ...

    async def info(self) -> StoreInfo:
        """Vectors and text indexes the collection has (read live)."""
        ...

    async def upsert(self, points: Sequence[ChunkPoint]) -> None:
        """Write points; one call is one batch (all or nothing on the embedded engine).

        The BM25 text index of a ``lexical_<code>`` field is created before the first batch that
        writes that field (bootstrap creates none: a loaded text index costs ~35 MB of memory in
        the embedded engine whatever it holds, so a store indexes only the languages it has).
        """
        ...

    async def set_payload(self, selector: models.Filter, payload: Mapping[str, Any], *, key: str | None = None) -> None:
        """Set payload keys (under ``key`` when given) on every point ``selector`` matches, in one operation."""
        ...

    async def delete(self, selector: models.Filter) -> None:
        """Delete every point ``selector`` matches."""
        ...

    async def query(self, request: models.QueryRequest) -> list[PointRecord]:
        """One Query API request (prefetch legs, fusion, filters, text queries, IDF scope)."""
        ...

    async def query_batch(self, requests: Sequence[models.QueryRequest]) -> list[list[PointRecord]]:
        """Several Query API requests in one call (one planned pass); one result list per request, in order."""
        ...

    async def scroll(
        self,
        selector: models.Filter | None,
        *,
        limit: int,
        offset: str | None = None,
        with_payload: bool | Sequence[str] = True,
        with_vectors: bool = False,
    ) -> tuple[list[PointRecord], str | None]:
        """One page of points in id order, and the offset of the next page (None at the end)."""
        ...

    async def retrieve(
        self, point_ids: Sequence[str], *, with_payload: bool | Sequence[str] = True
    ) -> list[PointRecord]:
        """The points with these ids that exist (no filter, no vectors), in no set order."""
        ...

    async def count(self, selector: models.Filter | None) -> int:
        """Exact number of points ``selector`` matches."""
        ...

    async def facet(self, key: str, selector: models.Filter | None, *, limit: int) -> list[FacetCount]:
        """Distinct values of an indexed keyword ``key`` among the matched points, with counts."""
        ...

    async def close(self) -> None:
        """Release the connection or the engine."""
        ...

"""Qdrant access for search: thread-offloaded calls, typed errors, a short-lived capability cache."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import anyio.to_thread
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from retrieval_agent.adapters.embedded_index import EmbeddedIndex
from retrieval_agent.errors import LexicalIndexMissingError, SearchBackendError
from retrieval_agent.search.query import tenant_filter
from retrieval_agent.settings import Settings
from shared_contract import (
    PAYLOAD_CONTENT,
    PAYLOAD_META,
    CollectionManifest,
    CollectionMissingError,
    MetaKey,
    call_qdrant,
    collection_has_sparse,
    meta_path,
    verify_collection,
)

T = TypeVar("T")

_SCROLL_PAGE = 256


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the collection offers the search paths."""

    has_sparse: bool


def _is_text_index_problem(message: str) -> bool:
    lowered = message.lower()
    return "text index" in lowered or "scoring" in lowered


class QdrantSearch:
    """Search-side Qdrant calls; every call runs in a worker thread."""

    def __init__(self, client: QdrantClient, settings: Settings) -> None:
        self.client = client
        self.settings = settings
        self.collection = settings.qdrant_index
        self._capabilities: tuple[float, Capabilities] | None = None
        # Embedded store only (a server client makes it answer None): same results, numpy speed.
        self.embedded = EmbeddedIndex(client, self.collection, meta_path(MetaKey.COLLECTION_NAME))

    async def _run(self, operation: str, fn: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(lambda: call_qdrant(operation, fn))

    async def capabilities(self) -> Capabilities:
        """Whether the collection has ``text-sparse``; cached for CAPABILITY_CACHE_TTL_SECONDS.

        Raises CollectionMissingError while the collection does not exist (never cached).
        """
        now = time.monotonic()
        cached = self._capabilities
        if cached is not None and now - cached[0] < self.settings.capability_cache_ttl_seconds:
            return cached[1]
        exists = await self._run("collection_exists", lambda: self.client.collection_exists(self.collection))
        if not exists:
            self._capabilities = None
            raise CollectionMissingError(self.collection)
        has_sparse = await self._run("get_collection", lambda: collection_has_sparse(self.client, self.collection))
        capabilities = Capabilities(has_sparse=has_sparse)
        self._capabilities = (now, capabilities)
        return capabilities

    def forget_capabilities(self) -> None:
        """Drop the cached capabilities (after an error that suggests the collection changed)."""
        self._capabilities = None

    async def query(self, request: models.QueryRequest, *, lexical: bool = False) -> list[models.ScoredPoint]:
        """Run one Query API request against the shared collection.

        Transport failures raise QdrantUnavailableError; a request Qdrant rejects raises
        SearchBackendError (or LexicalIndexMissingError for a text query without a scoring index).
        """

        def run() -> list[models.ScoredPoint]:
            try:
                fast = self.embedded.query(request)
                if fast is not None:
                    return fast
                response = self.client.query_points(
                    collection_name=self.collection,
                    query=request.query,
                    using=request.using,
                    prefetch=request.prefetch,
                    query_filter=request.filter,
                    limit=request.limit or 10,
                    with_payload=request.with_payload if request.with_payload is not None else True,
                )
            except UnexpectedResponse as exc:
                if exc.status_code == 404:
                    self.forget_capabilities()
                    raise CollectionMissingError(self.collection) from exc
                if exc.status_code is not None and 400 <= exc.status_code < 500:
                    message = exc.content.decode("utf-8", "replace") if exc.content else str(exc)
                    if lexical and _is_text_index_problem(message):
                        raise LexicalIndexMissingError(message) from exc
                    raise SearchBackendError(
                        f"qdrant rejected the search ({exc.status_code}): {message[:300]}"
                    ) from exc
                raise
            except (ValueError, NotImplementedError) as exc:
                # The embedded store reports request problems as ValueError.
                if lexical and _is_text_index_problem(str(exc)):
                    raise LexicalIndexMissingError(str(exc)) from exc
                raise SearchBackendError(f"qdrant rejected the search: {exc}") from exc
            return response.points

        return await self._run("query_points", run)

    async def scroll_contents(self, collection_names: Sequence[str], max_docs: int) -> list[models.Record]:
        """Up to ``max_docs`` points of the given tenants, payload only (for the BM25 last resort)."""

        def run() -> list[models.Record]:
            records: list[models.Record] = []
            offset: models.ExtendedPointId | None = None
            flt = tenant_filter(collection_names)
            while len(records) < max_docs:
                page, offset = self.client.scroll(
                    collection_name=self.collection,
                    scroll_filter=flt,
                    limit=min(_SCROLL_PAGE, max_docs - len(records)),
                    offset=offset,
                    with_payload=[PAYLOAD_CONTENT, PAYLOAD_META],
                    with_vectors=False,
                )
                records.extend(page)
                if offset is None:
                    break
            return records

        return await self._run("scroll", run)

    async def verify(self) -> CollectionManifest:
        """Qdrant answers and the collection's manifest matches these settings (readiness)."""
        return await self._run(
            "verify_collection", lambda: verify_collection(self.client, self.settings, require_sparse=False)
        )

"""The storage port on Qdrant's own engine in-process (qdrant-edge), the embedded default.

The directory it keeps (layout, lock, free space, manifest file) is :mod:`edge_directory`; the
translation of configs, points and records is :mod:`edge_points` and of requests :mod:`edge_requests`.

Facts that shape this adapter (qdrant-edge 0.9.0, pinned):
- Every call holds the GIL, so running one in a worker thread frees nothing. Reads take well under
  a millisecond and run inline; writes (batches of at most a few hundred points) and the manifest
  file go through a worker thread, which keeps their file I/O off the event loop.
- One update is all or nothing and survives kill -9 once acknowledged (WAL).
- A second open of the same directory fails, so a process shares one instance per directory
  (:mod:`rag_runtime.store.factory`).
- Errors are bare ``Exception``; they become the contract's typed errors here.
- ``optimize()`` (HNSW build) freezes the process for seconds: never on a request path.
- The engine's search pool defaults to 8 threads even on 2 CPUs; this adapter sizes it
  (QDRANT_SEARCH_THREADS) on every create and load (:func:`search_threads`).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import anyio.to_thread
import qdrant_edge as edge
from qdrant_client import models

from rag_runtime.store.edge_directory import (
    MANIFEST_FILE,
    MIN_FREE_BYTES,
    SHARD_DIR,
    STORE_IN_USE,
    check_free_space,
    collection_dir,
    drop_unfinished_builds,
    hold_lock,
    load_manifest,
    search_threads,
    store_in_use,
    tree_bytes,
    write_manifest,
)
from rag_runtime.store.edge_points import (
    WAL_LOCKED,
    bm25_fields,
    check_dims,
    edge_config,
    edge_vectors,
    is_rejection,
    is_text_index_problem,
    plain_records,
    scored_records,
    sparse_params,
)
from rag_runtime.store.edge_requests import to_edge_filter, to_edge_index, to_edge_request, to_edge_with_payload
from rag_runtime.store.layout import CollectionSpec, lexical_indexes_for, vector_layout
from rag_runtime.store.port import ChunkPoint, FacetCount, PointRecord, StoreInfo, StoreKind
from shared_contract.errors import CollectionMissingError, QdrantUnavailableError, StoreRequestError
from shared_contract.manifest import MANIFEST_METADATA_KEY, CollectionManifest

__all__ = [
    "MANIFEST_FILE",
    "SHARD_DIR",
    "STORE_IN_USE",
    "EdgeStore",
    "collection_dir",
    "search_threads",
    "store_in_use",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class EdgeStore:
    """One collection as one qdrant-edge shard. Build it through :func:`open_store`."""

    def __init__(
        self,
        root: Path,
        collection: str,
        *,
        temporary: bool = False,
        search_threads: int = 1,
        min_free_bytes: int = MIN_FREE_BYTES,
    ) -> None:
        self._root = root
        self._min_free_bytes = min_free_bytes
        self._collection = collection
        self._dir = collection_dir(root, collection)
        self._temporary = temporary
        self._search_threads = search_threads
        self._shard: Any | None = None
        self._closed = False
        self._indexed: set[str] | None = None  # payload fields with an index (read once, then kept)
        self._manifest: CollectionManifest | None = None
        self._lock: BinaryIO | None = None

    @classmethod
    def in_memory(cls, collection: str, *, search_threads: int = 1) -> EdgeStore:
        """A throwaway store in a temporary directory, removed on close (QDRANT_URI=':memory:')."""
        return cls(
            Path(tempfile.mkdtemp(prefix="qdrant-edge-")), collection, temporary=True, search_threads=search_threads
        )

    @property
    def kind(self) -> StoreKind:
        return "embedded"

    @property
    def collection(self) -> str:
        return self._collection

    @property
    def path(self) -> Path:
        """The collection's directory."""
        return self._dir

    # -- engine access ----------------------------------------------------------------------

    def _open_shard(self) -> Any:
        if self._closed:
            raise QdrantUnavailableError(f"the embedded store at {self._dir} was closed")
        if self._shard is None:
            if not (self._dir / MANIFEST_FILE).is_file():
                raise CollectionMissingError(self._collection)
            config = self._load_config()
            self._hold_lock()
            try:
                self._shard = edge.EdgeShard.load(str(self._dir / SHARD_DIR), config)
            except Exception as exc:  # qdrant-edge raises bare Exception; opening is I/O
                if WAL_LOCKED in str(exc):
                    raise QdrantUnavailableError(
                        f"embedded store at {self._dir} {STORE_IN_USE}: one process per directory ({exc})"
                    ) from exc
                raise QdrantUnavailableError(f"embedded store at {self._dir} could not be opened: {exc}") from exc
            drop_unfinished_builds(self._dir)
        return self._shard

    def _hold_lock(self) -> None:
        if self._lock is None:
            self._lock = hold_lock(self._dir)

    def _release_lock(self) -> None:
        handle, self._lock = self._lock, None
        if handle is not None:
            handle.close()  # closing the file releases the flock

    def _load_config(self) -> Any:
        """The pool size to load with, or None. The engine takes no config without vectors in it and
        checks stated vectors against the stored ones: restating the sparse vector the manifest
        records is exact (dense ones are inherited). A store created without one keeps the pool size
        it was created with (:meth:`_create` states it too)."""
        if self._manifest is None:
            self._manifest = self._load_manifest()
        manifest = self._manifest
        if manifest.sparse_model is None:
            return None
        return edge.EdgeConfig(
            sparse_vectors=sparse_params(idf=manifest.sparse_modifier == "idf"),
            max_search_threads=self._search_threads,
        )

    def _read(self, operation: str, call: Callable[[Any], T]) -> T:
        shard = self._open_shard()
        try:
            return call(shard)
        except Exception as exc:  # qdrant-edge raises bare Exception: a rejected read
            message = str(exc)
            if "not initialized" in message.lower():
                raise QdrantUnavailableError(f"embedded store {operation} failed: the store is closed") from exc
            raise StoreRequestError(
                f"embedded store rejected {operation}: {message[:500]}",
                missing_text_index=is_text_index_problem(message),
            ) from exc

    def _update(self, operation: str, build: Callable[[], Any]) -> None:
        shard = self._open_shard()
        check_free_space(self._dir, operation, self._min_free_bytes)
        try:
            shard.update(build())
        except StoreRequestError:
            raise
        except Exception as exc:  # qdrant-edge raises bare Exception: the batch was not applied
            message = str(exc)
            if is_rejection(message):  # a call the engine refused, as the server answers 4xx
                raise StoreRequestError(f"embedded store rejected {operation}: {message[:500]}") from exc
            raise QdrantUnavailableError(f"embedded store {operation} failed: {message[:500]}") from exc

    async def _write(self, operation: str, build: Callable[[], Any]) -> None:
        await anyio.to_thread.run_sync(self._update, operation, build)

    # -- collection -------------------------------------------------------------------------

    async def collection_exists(self) -> bool:
        return await anyio.to_thread.run_sync((self._dir / MANIFEST_FILE).is_file)

    async def create_collection(self, spec: CollectionSpec) -> bool:
        return await anyio.to_thread.run_sync(self._create, spec)

    def _create(self, spec: CollectionSpec) -> bool:
        if (self._dir / MANIFEST_FILE).is_file():
            return False
        self._hold_lock()
        if (self._dir / MANIFEST_FILE).is_file():  # another process created it before we held the lock
            return False
        shard_dir = self._dir / SHARD_DIR
        config = edge_config(spec, search_threads=self._search_threads)
        try:
            if shard_dir.exists():
                # A create that died before writing the manifest: start that shard afresh.
                shutil.rmtree(shard_dir)
            shard_dir.mkdir(parents=True, exist_ok=True)
            self._shard = edge.EdgeShard.create(str(shard_dir), config)
        except Exception as exc:  # qdrant-edge raises bare Exception; creating is I/O
            raise QdrantUnavailableError(f"embedded store at {self._dir} could not be created: {exc}") from exc
        # The manifest goes last and atomically: its presence means the collection exists.
        write_manifest(self._dir, spec.metadata[MANIFEST_METADATA_KEY])
        return True

    async def ensure_indexes(self, spec: CollectionSpec) -> None:
        existing = set(self._read("info", lambda shard: shard.info().payload_schema))
        for index in spec.payload_indexes:
            if index.field_name in existing:
                continue
            schema = to_edge_index(index.schema)
            await self._write(
                "create_field_index",
                lambda index=index, schema=schema: edge.UpdateOperation.create_field_index(  # type: ignore[misc]
                    index.field_name, schema
                ),
            )

    async def read_manifest(self) -> CollectionManifest:
        if self._manifest is None:
            self._manifest = await anyio.to_thread.run_sync(self._load_manifest)
        return self._manifest

    def _load_manifest(self) -> CollectionManifest:
        return load_manifest(self._dir, self._collection)

    async def info(self) -> StoreInfo:
        manifest = await self.read_manifest()
        schema = self._read("info", lambda shard: shard.info().payload_schema)
        return StoreInfo(
            has_sparse=manifest.sparse_model is not None,
            text_index_fields=bm25_fields(schema),
            has_multilingual=manifest.multilingual_model is not None,
        )

    # -- points -----------------------------------------------------------------------------

    async def upsert(self, points: Sequence[ChunkPoint]) -> None:
        if not points:
            return
        await self._index_lexical_fields(points)
        # The engine applies the points before a wrong-sized one and then fails: check sizes first.
        manifest = await self.read_manifest()
        for point in points:
            check_dims(point, manifest)
        # Built in the write's thread: converting a batch's vectors is Python work the loop need not do.
        await self._write(
            "upsert",
            lambda: edge.UpdateOperation.upsert_points(
                [edge.Point(point.point_id, edge_vectors(point), dict(point.payload)) for point in points]
            ),
        )

    async def _index_lexical_fields(self, points: Sequence[ChunkPoint]) -> None:
        """Create the BM25 index of each lexical field this batch writes for the first time."""
        if self._indexed is None:
            self._indexed = set(self._read("info", lambda shard: shard.info().payload_schema))
        for index in lexical_indexes_for((point.payload for point in points), self._indexed):
            schema = to_edge_index(index.schema)
            await self._write(
                "create_field_index",
                lambda index=index, schema=schema: edge.UpdateOperation.create_field_index(  # type: ignore[misc]
                    index.field_name, schema
                ),
            )
            self._indexed.add(index.field_name)

    async def set_payload(self, selector: models.Filter, payload: Mapping[str, Any], *, key: str | None = None) -> None:
        edge_filter = to_edge_filter(selector)
        await self._write(
            "set_payload", lambda: edge.UpdateOperation.set_payload_by_filter(edge_filter, dict(payload), key=key)
        )

    async def delete(self, selector: models.Filter) -> None:
        edge_filter = to_edge_filter(selector)
        await self._write("delete", lambda: edge.UpdateOperation.delete_points_by_filter(edge_filter))

    async def query(self, request: models.QueryRequest) -> list[PointRecord]:
        edge_request = to_edge_request(request)
        points = self._read("query", lambda shard: shard.query(edge_request))
        return scored_records(points, with_vectors=edge_request.with_vector is not False)

    async def query_batch(self, requests: Sequence[models.QueryRequest]) -> list[list[PointRecord]]:
        if not requests:
            return []
        edge_requests = [to_edge_request(request) for request in requests]
        batch = edge.QueryBatchRequest(edge_requests)
        results = self._read("query batch", lambda shard: shard.query_batch(batch))
        return [
            scored_records(points, with_vectors=edge_request.with_vector is not False)
            for edge_request, points in zip(edge_requests, results, strict=True)
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
        request = edge.ScrollRequest(
            offset=offset,
            limit=limit,
            filter=to_edge_filter(selector),
            with_payload=to_edge_with_payload(with_payload if isinstance(with_payload, bool) else list(with_payload)),
            with_vector=with_vectors,
        )

        def read_page() -> tuple[list[PointRecord], str | None]:
            records, next_offset = self._read("scroll", lambda shard: shard.scroll(request))
            return plain_records(records, with_vectors=with_vectors), None if next_offset is None else str(next_offset)

        if with_vectors:
            # A page of vectors becomes Python floats: hundreds of milliseconds, in a thread.
            return await anyio.to_thread.run_sync(read_page)
        return read_page()

    async def retrieve(
        self, point_ids: Sequence[str], *, with_payload: bool | Sequence[str] = True
    ) -> list[PointRecord]:
        if not point_ids:
            return []
        selected = to_edge_with_payload(with_payload if isinstance(with_payload, bool) else list(with_payload))
        records = self._read("retrieve", lambda shard: shard.retrieve(list(point_ids), selected, False))
        return plain_records(records, with_vectors=False)

    async def count(self, selector: models.Filter | None) -> int:
        request = edge.CountRequest(filter=to_edge_filter(selector), exact=True)
        return int(self._read("count", lambda shard: shard.count(request)))

    async def facet(self, key: str, selector: models.Filter | None, *, limit: int) -> list[FacetCount]:
        request = edge.FacetRequest(key, limit=limit, exact=True, filter=to_edge_filter(selector))
        response = self._read("facet", lambda shard: shard.facet(request))
        return [FacetCount(value=hit.value, count=int(hit.count)) for hit in response.hits]

    def optimize(self) -> bool:
        """Bring the shard's vectors to the layout, build HNSW graphs and int8 copies, merge segments.

        Blocks the whole process for seconds: maintenance only. A store created before the layout
        gave ``text-dense`` its int8 copies gains them here: the shard is reloaded with the layout's
        vectors stated (the engine checks them against the stored ones and keeps them), and the
        optimizer rebuilds each segment whose config differs. True when any segment changed.
        """
        self._restate_layout()
        # Rebuilt segments are written beside the old ones before those go: room for a second copy.
        check_free_space(self._dir, "optimize", tree_bytes(self._dir / SHARD_DIR) + self._min_free_bytes)
        return bool(self._read("optimize", lambda shard: shard.optimize()))

    def _restate_layout(self) -> None:
        self._open_shard()  # CollectionMissingError / QdrantUnavailableError as for any other call
        shard, self._shard = self._shard, None
        assert shard is not None
        try:
            shard.flush()
            shard.close()
        except Exception as exc:  # qdrant-edge raises bare Exception; the WAL still holds every batch
            raise QdrantUnavailableError(f"embedded store at {self._dir} could not be closed: {exc}") from exc
        assert self._manifest is not None  # _open_shard read it to load the shard
        config = edge_config(vector_layout(self._collection, self._manifest), search_threads=self._search_threads)
        try:
            self._shard = edge.EdgeShard.load(str(self._dir / SHARD_DIR), config)
        except Exception as exc:  # qdrant-edge raises bare Exception: the shard stays as it was
            raise QdrantUnavailableError(
                f"embedded store at {self._dir} could not be reloaded with the vectors its manifest names: {exc}"
            ) from exc

    def points_count(self) -> int:
        """Points in the shard (all tenants, pending included)."""
        return int(self._read("info", lambda shard: shard.info().points_count))

    async def close(self) -> None:
        await anyio.to_thread.run_sync(self.close_sync)

    def close_sync(self) -> None:
        """Flush and release the shard (and remove a temporary store)."""
        shard, self._shard = self._shard, None
        self._closed = True
        if shard is not None:
            try:
                shard.flush()
                shard.close()
            except Exception as exc:  # qdrant-edge raises bare Exception; the WAL still holds every batch
                logger.warning("closing the embedded store at %s failed: %s", self._dir, exc)
        self._release_lock()
        if self._temporary:
            shutil.rmtree(self._root, ignore_errors=True)

"""The storage port on Qdrant's own engine in-process (qdrant-edge), the embedded default.

Layout under QDRANT_PATH: ``collections/<QDRANT_INDEX>/shard/`` (the engine's WAL and segments)
and ``collections/<QDRANT_INDEX>/manifest.json`` (the contract manifest; a shard has no metadata).

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

import fcntl
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import anyio.to_thread
import qdrant_edge as edge
from qdrant_client import models

from rag_runtime.embedding.types import SparseVectorData
from rag_runtime.store.edge_requests import (
    to_edge_filter,
    to_edge_index,
    to_edge_quantization,
    to_edge_request,
    to_edge_with_payload,
)
from rag_runtime.store.layout import CollectionSpec, lexical_indexes_for, vector_layout
from rag_runtime.store.port import ChunkPoint, FacetCount, PointRecord, StoreInfo, StoreKind
from shared_contract.errors import (
    CollectionMissingError,
    ManifestMissingError,
    QdrantUnavailableError,
    StoreRequestError,
)
from shared_contract.manifest import MANIFEST_METADATA_KEY, CollectionManifest
from shared_contract.schema import DENSE_VECTOR, MULTILINGUAL_VECTOR, SPARSE_VECTOR

logger = logging.getLogger(__name__)

T = TypeVar("T")

MANIFEST_FILE = "manifest.json"
SHARD_DIR = "shard"
# What a store another process holds says (one process per directory); callers may look for it.
STORE_IN_USE = "is in use by another process"
# Held (flock) by the process that has the directory open. The engine's own lock is its WAL's, which
# a load takes only after it has opened the segments, and opening them applies and empties their
# journals: a second process refused at the WAL had already emptied the first one's, whose next
# flush then failed ("tracker_journal.dat is shorter than expected").
LOCK_FILE = ".lock"
# How qdrant-edge reports that WAL lock: a bare Exception naming the OS error.
_WAL_LOCKED = "Kind(WouldBlock)"
# The engine grows its WAL (32 MiB segments) and its segment files through memory mappings; a write
# into a full disk through a mapping kills the whole process (SIGBUS) instead of failing the call.
# So writes stop, with a typed error, while less than this is free on the store's disk.
MIN_FREE_BYTES = 256 * 1024 * 1024
# Where the engine builds an optimize's new segments; it does not clear what a killed optimize left.
_TEMP_SEGMENTS = "temp_segments"
_MIB = 1024 * 1024


def collection_dir(root: Path, collection: str) -> Path:
    """Where one collection lives under QDRANT_PATH."""
    return root / "collections" / collection


def _is_rejection(message: str) -> bool:
    """The engine's messages for an invalid request (its Wrong input / validation errors), not I/O."""
    lowered = message.lower()
    markers = ("wrong input", "validation failed", "dimension error", "not existing vector", "bad request")
    return any(marker in lowered for marker in markers)


def _is_text_index_problem(message: str) -> bool:
    lowered = message.lower()
    return "text index" in lowered or "scoring" in lowered or "full text" in lowered or "full-text" in lowered


def search_threads(configured: int) -> int:
    """The engine's search pool size: ``configured``, or for 0 one thread fewer than the CPUs this
    process may run on (at least one), leaving a CPU for the query model and the event loop."""
    if configured > 0:
        return configured
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cpus - 1)


def store_in_use(collection_directory: Path) -> bool:
    """Whether a process, this one included, holds the collection at ``collection_directory`` open.

    An open :class:`EdgeStore` holds an flock on the directory's lock file; flock locks belong to
    one open file, so a second open in the same process sees them too.
    """
    lock = collection_directory / LOCK_FILE
    if not lock.is_file():
        return False
    with lock.open("ab") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return False


def _tree_bytes(directory: Path) -> int:
    """Bytes of the files under ``directory``."""
    return sum((Path(parent) / name).stat().st_size for parent, _, names in os.walk(directory) for name in names)


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
                if _WAL_LOCKED in str(exc):
                    raise QdrantUnavailableError(
                        f"embedded store at {self._dir} {STORE_IN_USE}: one process per directory ({exc})"
                    ) from exc
                raise QdrantUnavailableError(f"embedded store at {self._dir} could not be opened: {exc}") from exc
            self._drop_unfinished_builds()
        return self._shard

    def _hold_lock(self) -> None:
        """Take the directory's lock before the engine opens a file (STORE_IN_USE when another process has it)."""
        if self._lock is not None:
            return
        self._dir.mkdir(parents=True, exist_ok=True)
        handle = (self._dir / LOCK_FILE).open("ab")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise QdrantUnavailableError(
                f"embedded store at {self._dir} {STORE_IN_USE}: one process per directory (it holds {LOCK_FILE})"
            ) from None
        self._lock = handle

    def _release_lock(self) -> None:
        handle, self._lock = self._lock, None
        if handle is not None:
            handle.close()  # closing the file releases the flock

    def _drop_unfinished_builds(self) -> None:
        """Remove the half-built segments of an optimize that was killed (they would stay forever).
        This process holds the shard's WAL lock and no optimize runs during a load, so whatever is
        in the engine's build directory now is dead."""
        temp = self._dir / SHARD_DIR / _TEMP_SEGMENTS
        leftovers = list(temp.iterdir()) if temp.is_dir() else []
        if not leftovers:
            return
        freed = _tree_bytes(temp)
        for entry in leftovers:
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        logger.warning(
            "embedded store at %s: removed %d MiB of segments an interrupted optimize left", self._dir, freed // _MIB
        )

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
            sparse_vectors=_sparse_params(idf=manifest.sparse_modifier == "idf"),
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
                missing_text_index=_is_text_index_problem(message),
            ) from exc

    def _check_free_space(self, operation: str, needed: int) -> None:
        free = shutil.disk_usage(self._dir).free
        if free < needed:
            raise QdrantUnavailableError(
                f"embedded store {operation} refused: {free // _MIB} MiB free on the disk of {self._dir}, "
                f"under the {needed // _MIB} MiB it needs (writing into a full disk would crash the process); "
                "free space there and retry"
            )

    def _update(self, operation: str, build: Callable[[], Any]) -> None:
        shard = self._open_shard()
        self._check_free_space(operation, self._min_free_bytes)
        try:
            shard.update(build())
        except StoreRequestError:
            raise
        except Exception as exc:  # qdrant-edge raises bare Exception: the batch was not applied
            message = str(exc)
            if _is_rejection(message):  # a call the engine refused, as the server answers 4xx
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
        config = _edge_config(spec, search_threads=self._search_threads)
        try:
            if shard_dir.exists():
                # A create that died before writing the manifest: start that shard afresh.
                shutil.rmtree(shard_dir)
            shard_dir.mkdir(parents=True, exist_ok=True)
            self._shard = edge.EdgeShard.create(str(shard_dir), config)
        except Exception as exc:  # qdrant-edge raises bare Exception; creating is I/O
            raise QdrantUnavailableError(f"embedded store at {self._dir} could not be created: {exc}") from exc
        # The manifest goes last and atomically: its presence means the collection exists.
        manifest = spec.metadata[MANIFEST_METADATA_KEY]
        staging = self._dir / f".{MANIFEST_FILE}.tmp"
        staging.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
        os.replace(staging, self._dir / MANIFEST_FILE)
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
        path = self._dir / MANIFEST_FILE
        if not path.is_file():
            raise CollectionMissingError(self._collection)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ManifestMissingError(self._collection) from exc
        if not isinstance(raw, dict):
            raise ManifestMissingError(self._collection)
        return CollectionManifest.model_validate(raw)

    async def info(self) -> StoreInfo:
        manifest = await self.read_manifest()
        schema = self._read("info", lambda shard: shard.info().payload_schema)
        text_fields = frozenset(
            name
            for name, index in schema.items()
            if index.data_type == edge.PayloadSchemaType.Text
            and index.params is not None
            and getattr(index.params, "scoring", None) is not None
        )
        return StoreInfo(
            has_sparse=manifest.sparse_model is not None,
            text_index_fields=text_fields,
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
            _check_dims(point, manifest)
        # Built in the write's thread: converting a batch's vectors is Python work the loop need not do.
        await self._write(
            "upsert",
            lambda: edge.UpdateOperation.upsert_points(
                [edge.Point(point.point_id, _vectors(point), dict(point.payload)) for point in points]
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
        return _scored_records(points, with_vectors=edge_request.with_vector is not False)

    async def query_batch(self, requests: Sequence[models.QueryRequest]) -> list[list[PointRecord]]:
        if not requests:
            return []
        edge_requests = [to_edge_request(request) for request in requests]
        batch = edge.QueryBatchRequest(edge_requests)
        results = self._read("query batch", lambda shard: shard.query_batch(batch))
        return [
            _scored_records(points, with_vectors=edge_request.with_vector is not False)
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
            page = [
                PointRecord(
                    point_id=str(record.id),
                    payload=record.payload or {},
                    vectors=_read_vectors(record.vector) if with_vectors else None,
                )
                for record in records
            ]
            return page, None if next_offset is None else str(next_offset)

        if with_vectors:
            # A page of vectors becomes Python floats: hundreds of milliseconds, in a thread.
            return await anyio.to_thread.run_sync(read_page)
        return read_page()

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
        self._check_free_space("optimize", _tree_bytes(self._dir / SHARD_DIR) + self._min_free_bytes)
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
        config = _edge_config(vector_layout(self._collection, self._manifest), search_threads=self._search_threads)
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


def _edge_config(spec: CollectionSpec, *, search_threads: int) -> Any:
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
        sparse_vectors=None if spec.sparse_idf is None else _sparse_params(idf=spec.sparse_idf),
        max_search_threads=search_threads,
    )


def _sparse_params(*, idf: bool) -> dict[str, Any]:
    return {SPARSE_VECTOR: edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf if idf else None)}


def _read_vectors(vector: Any) -> dict[str, list[float] | SparseVectorData]:
    named: dict[str, list[float] | SparseVectorData] = {}
    for name, value in (vector or {}).items():
        if isinstance(value, edge.SparseVector):
            named[name] = SparseVectorData(indices=list(value.indices), values=list(value.values))
        else:
            named[name] = [float(x) for x in value]
    return named


def _check_dims(point: ChunkPoint, manifest: CollectionManifest) -> None:
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


def _vectors(point: ChunkPoint) -> dict[str, Any]:
    vectors: dict[str, Any] = {DENSE_VECTOR: [float(value) for value in point.dense]}
    if point.sparse is not None:
        vectors[SPARSE_VECTOR] = edge.SparseVector(list(point.sparse.indices), list(point.sparse.values))
    if point.multilingual is not None:
        vectors[MULTILINGUAL_VECTOR] = [float(value) for value in point.multilingual]
    return vectors


def _scored_records(points: Sequence[Any], *, with_vectors: bool) -> list[PointRecord]:
    return [
        PointRecord(
            point_id=str(point.id),
            payload=point.payload or {},
            score=point.score,
            vectors=_read_vectors(point.vector) if with_vectors else None,
        )
        for point in points
    ]

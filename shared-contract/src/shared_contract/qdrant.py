"""Opening Qdrant and bootstrapping the shared collection, identically on both sides."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from shared_contract.errors import (
    CollectionMissingError,
    ManifestMissingError,
    QdrantUnavailableError,
)
from shared_contract.manifest import (
    MANIFEST_METADATA_KEY,
    CollectionManifest,
    manifest_for,
    verify_manifest,
)
from shared_contract.schema import DENSE_VECTOR, PAYLOAD_CONTENT, SPARSE_VECTOR, MetaKey, meta_path
from shared_contract.settings import ContractSettings

# ---------------------------------------------------------------------------------------------
# Clients

T = TypeVar("T")


_MUTATING_CALLS = frozenset(
    {
        "upsert",
        "upload_points",
        "upload_collection",
        "delete",
        "delete_vectors",
        "update_vectors",
        "set_payload",
        "overwrite_payload",
        "delete_payload",
        "clear_payload",
        "batch_update_points",
        "create_collection",
        "recreate_collection",
        "delete_collection",
        "update_collection",
    }
)


class _SerializedBackend:
    """Wraps qdrant-client's local backend so calls from several threads run one at a time.

    The embedded store is plain Python over SQLite and is not thread-safe, while both services
    call Qdrant from worker threads. It also counts writes, so in-process caches built from the
    store's contents know when they are stale.
    """

    def __init__(self, backend: Any, lock: threading.RLock) -> None:
        self._backend = backend
        self._lock = lock
        self.generation = 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._backend, name)
        if not callable(attribute):
            return attribute
        mutating = name in _MUTATING_CALLS

        def serialized(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                if mutating:
                    self.generation += 1
                return attribute(*args, **kwargs)

        return serialized


@contextmanager
def embedded_backend(client: QdrantClient) -> Iterator[tuple[Any, int] | None]:
    """The embedded store's backend and write generation, with the store's lock held.

    Yields None for a server client. For read-only fast paths over the store's in-memory data
    (qdrant-client's ``QdrantLocal``); never write through it.
    """
    wrapper = client._client
    if not isinstance(wrapper, _SerializedBackend):
        yield None
        return
    with wrapper._lock:
        yield wrapper._backend, wrapper.generation


@dataclass
class _SharedLocal:
    client: QdrantClient
    users: int = 0


_LOCAL_CLIENTS: dict[str, _SharedLocal] = {}
_LOCAL_LOCK = threading.Lock()


def _local_key(settings: ContractSettings) -> str:
    if settings.qdrant_uri == ":memory:":
        return ":memory:"
    return str(Path(settings.qdrant_path).resolve())


def open_qdrant(settings: ContractSettings) -> QdrantClient:
    """A client for the configured Qdrant.

    An embedded store can be opened by one process only, so within a process every caller of
    the same store shares one client (``make dev`` hosts both services in one process). Pair
    each call with :func:`close_qdrant`.
    """
    if not settings.embedded_qdrant:
        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        # No version probe at construction: it is a network call that warns when Qdrant is down;
        # readiness reports reachability instead.
        return QdrantClient(
            url=settings.qdrant_uri,
            api_key=api_key,
            timeout=int(settings.qdrant_timeout),
            check_compatibility=False,
        )
    key = _local_key(settings)
    with _LOCAL_LOCK:
        shared = _LOCAL_CLIENTS.get(key)
        if shared is None:
            if key == ":memory:":
                client = QdrantClient(location=":memory:", force_disable_check_same_thread=True)
            else:
                Path(key).mkdir(parents=True, exist_ok=True)
                client = QdrantClient(path=key, force_disable_check_same_thread=True)
            # qdrant-client keeps its backend in `_client`; wrapping it keeps the public type.
            client._client = _SerializedBackend(client._client, threading.RLock())  # type: ignore[assignment]
            shared = _SharedLocal(client=client)
            _LOCAL_CLIENTS[key] = shared
        shared.users += 1
        return shared.client


def close_qdrant(client: QdrantClient) -> None:
    """Release a client from :func:`open_qdrant`; the last user of an embedded store closes it."""
    with _LOCAL_LOCK:
        for key, shared in list(_LOCAL_CLIENTS.items()):
            if shared.client is client:
                shared.users -= 1
                if shared.users <= 0:
                    del _LOCAL_CLIENTS[key]
                    client.close()
                return
    client.close()


def call_qdrant(operation: str, fn: Callable[[], T]) -> T:
    """Run a Qdrant call; transport and server errors become QdrantUnavailableError."""
    try:
        return fn()
    except (UnexpectedResponse, ResponseHandlingException, ConnectionError, TimeoutError) as exc:
        raise QdrantUnavailableError(f"qdrant {operation} failed: {type(exc).__name__}") from exc


# ---------------------------------------------------------------------------------------------
# Collection layout


@dataclass(frozen=True)
class PayloadIndexSpec:
    """One payload index the collection must have."""

    field_name: str
    schema: models.KeywordIndexParams | models.IntegerIndexParams | models.TextIndexParams


@dataclass(frozen=True)
class CollectionSpec:
    """Exactly what bootstrap sends to Qdrant to create the collection."""

    name: str
    vectors_config: dict[str, models.VectorParams]
    sparse_vectors_config: dict[str, models.SparseVectorParams] | None
    hnsw_config: models.HnswConfigDiff
    metadata: dict[str, Any]
    payload_indexes: list[PayloadIndexSpec] = field(default_factory=lambda: list[PayloadIndexSpec]())


def collection_spec(settings: ContractSettings) -> CollectionSpec:
    """The collection layout for ``settings`` (pure: no client involved)."""
    manifest = manifest_for(settings)
    sparse_config: dict[str, models.SparseVectorParams] | None = None
    if manifest.sparse_model is not None:
        modifier = models.Modifier.IDF if manifest.sparse_modifier == "idf" else None
        sparse_config = {SPARSE_VECTOR: models.SparseVectorParams(modifier=modifier)}
    keyword = models.KeywordIndexType.KEYWORD
    indexes = [
        # The tenant key: per-tenant HNSW subgraphs and tenant-grouped storage.
        PayloadIndexSpec(meta_path(MetaKey.COLLECTION_NAME), models.KeywordIndexParams(type=keyword, is_tenant=True)),
        PayloadIndexSpec(meta_path(MetaKey.COLLECTION_TYPE), models.KeywordIndexParams(type=keyword)),
        PayloadIndexSpec(meta_path(MetaKey.LANGUAGES), models.KeywordIndexParams(type=keyword)),
        PayloadIndexSpec(meta_path(MetaKey.FILE_ID), models.KeywordIndexParams(type=keyword)),
        PayloadIndexSpec(meta_path(MetaKey.INGEST_VERSION), models.KeywordIndexParams(type=keyword)),
        # Range filters on the ingest sequence decide which version of a file is newest.
        PayloadIndexSpec(
            meta_path(MetaKey.INGEST_SEQ),
            models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER, lookup=False, range=True),
        ),
    ]
    if sparse_config is None:
        # Lexical fallback for hybrid search when there is no sparse vector: server-side
        # full-text matching instead of copying the collection into memory.
        indexes.append(
            PayloadIndexSpec(
                PAYLOAD_CONTENT,
                models.TextIndexParams(
                    type=models.TextIndexType.TEXT, tokenizer=models.TokenizerType.WORD, lowercase=True
                ),
            )
        )
    return CollectionSpec(
        name=settings.qdrant_index,
        vectors_config={DENSE_VECTOR: models.VectorParams(size=manifest.dense_dim, distance=models.Distance.COSINE)},
        sparse_vectors_config=sparse_config,
        # m=0 disables the global graph; payload_m builds one graph per tenant instead.
        hnsw_config=models.HnswConfigDiff(m=0, payload_m=16),
        metadata={MANIFEST_METADATA_KEY: manifest.model_dump(mode="json")},
        payload_indexes=indexes,
    )


def read_manifest(client: QdrantClient, collection: str) -> CollectionManifest:
    """The manifest stored on ``collection``; typed errors when it or the collection is missing."""
    exists = call_qdrant("collection_exists", lambda: client.collection_exists(collection))
    if not exists:
        raise CollectionMissingError(collection)
    info = call_qdrant("get_collection", lambda: client.get_collection(collection))
    metadata = info.config.metadata or {}
    raw = metadata.get(MANIFEST_METADATA_KEY)
    if not isinstance(raw, dict):
        raise ManifestMissingError(collection)
    return CollectionManifest.model_validate(raw)


def collection_has_sparse(client: QdrantClient, collection: str) -> bool:
    """Whether the collection defines the ``text-sparse`` vector (read live, never cached)."""
    info = call_qdrant("get_collection", lambda: client.get_collection(collection))
    sparse = info.config.params.sparse_vectors or {}
    return SPARSE_VECTOR in sparse


def verify_collection(client: QdrantClient, settings: ContractSettings, *, require_sparse: bool) -> CollectionManifest:
    """Check an existing collection against ``settings``; never creates or changes anything."""
    manifest = read_manifest(client, settings.qdrant_index)
    verify_manifest(settings.qdrant_index, manifest, settings, require_sparse=require_sparse)
    return manifest


def bootstrap_collection(client: QdrantClient, settings: ContractSettings) -> CollectionManifest:
    """Create the collection and its payload indexes when missing, then verify it. Idempotent."""
    spec = collection_spec(settings)
    if not call_qdrant("collection_exists", lambda: client.collection_exists(spec.name)):
        try:
            client.create_collection(
                collection_name=spec.name,
                vectors_config=spec.vectors_config,
                sparse_vectors_config=spec.sparse_vectors_config,
                hnsw_config=spec.hnsw_config,
                metadata=spec.metadata,
            )
        except (UnexpectedResponse, ValueError) as exc:
            # Another replica may have created it between the check and the call.
            if not call_qdrant("collection_exists", lambda: client.collection_exists(spec.name)):
                raise QdrantUnavailableError(f"qdrant create_collection failed: {type(exc).__name__}") from exc
        except (ResponseHandlingException, ConnectionError, TimeoutError) as exc:
            raise QdrantUnavailableError(f"qdrant create_collection failed: {type(exc).__name__}") from exc
    manifest = verify_collection(client, settings, require_sparse=settings.enable_sparse_embeddings)
    existing = call_qdrant("get_collection", lambda: client.get_collection(spec.name)).payload_schema
    for index in spec.payload_indexes:
        if index.field_name in existing:
            continue
        # The embedded store ignores every index but full-text ones (which enable text queries).
        if settings.embedded_qdrant and not isinstance(index.schema, models.TextIndexParams):
            continue
        _create_payload_index(client, spec.name, index)
    return manifest


def _create_payload_index(client: QdrantClient, collection: str, index: PayloadIndexSpec) -> None:
    call_qdrant(
        "create_payload_index",
        lambda: client.create_payload_index(
            collection_name=collection, field_name=index.field_name, field_schema=index.schema, wait=True
        ),
    )

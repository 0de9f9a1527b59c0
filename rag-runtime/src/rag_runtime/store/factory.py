"""Opening the configured store, once per process for the embedded engine; bootstrap and verify."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from rag_runtime.store.edge import EdgeStore, search_threads
from rag_runtime.store.layout import collection_spec
from rag_runtime.store.port import ChunkStore
from rag_runtime.store.server import ServerStore
from shared_contract.errors import LegacyStoreError
from shared_contract.manifest import CollectionManifest, verify_manifest
from shared_contract.settings import ContractSettings, StoreSettings


@dataclass
class _Shared:
    store: EdgeStore
    users: int = 0


_EMBEDDED: dict[str, _Shared] = {}
_LOCK = threading.Lock()


def is_legacy_store(path: Path) -> bool:
    """True when ``path`` holds qdrant-client local-mode files (``meta.json`` + ``collection/``)."""
    return (path / "meta.json").is_file() and (path / "collection").is_dir()


def open_store(settings: StoreSettings) -> ChunkStore:
    """The store the settings name. Pair every call with :func:`close_store`.

    An embedded directory can be opened by one process only, so callers in one process share one
    :class:`EdgeStore` (``rag dev`` hosts both services in one process). ``QDRANT_URI=':memory:'``
    gets a private temporary store per call.
    """
    if not settings.embedded_qdrant:
        assert settings.qdrant_uri is not None
        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        return ServerStore(settings.qdrant_uri, settings.qdrant_index, api_key=api_key, timeout=settings.qdrant_timeout)
    if settings.qdrant_uri == ":memory:":
        return EdgeStore.in_memory(settings.qdrant_index, search_threads=search_threads(settings.qdrant_search_threads))
    root = Path(settings.qdrant_path).resolve()
    if is_legacy_store(root):
        raise LegacyStoreError(str(root))
    key = str(root / "collections" / settings.qdrant_index)
    with _LOCK:
        shared = _EMBEDDED.get(key)
        if shared is None:
            shared = _Shared(
                EdgeStore(root, settings.qdrant_index, search_threads=search_threads(settings.qdrant_search_threads))
            )
            _EMBEDDED[key] = shared
        shared.users += 1
        return shared.store


async def close_store(store: ChunkStore) -> None:
    """Release a store from :func:`open_store`; the last user of an embedded directory closes it."""
    with _LOCK:
        for key, shared in list(_EMBEDDED.items()):
            if shared.store is store:
                shared.users -= 1
                if shared.users > 0:
                    return
                del _EMBEDDED[key]
                break
    await store.close()


async def verify_collection(
    store: ChunkStore, settings: ContractSettings, *, require_sparse: bool
) -> CollectionManifest:
    """Check an existing collection against ``settings``; never creates or changes anything."""
    manifest = await store.read_manifest()
    verify_manifest(settings.qdrant_index, manifest, settings, require_sparse=require_sparse)
    return manifest


async def bootstrap_collection(store: ChunkStore, settings: ContractSettings) -> CollectionManifest:
    """Create the collection and its payload indexes when missing, then verify it. Idempotent."""
    if isinstance(store, ServerStore):
        await store.check_version()
    spec = collection_spec(settings)
    await store.create_collection(spec)
    manifest = await verify_collection(store, settings, require_sparse=settings.enable_sparse_embeddings)
    await store.ensure_indexes(spec)
    return manifest

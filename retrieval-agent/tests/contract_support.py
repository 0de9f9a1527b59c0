"""A collection re-created under a running service with other contract settings, and back: the store's
manifest changes, as a Qdrant server's does when the ingestion service re-creates the collection."""

from __future__ import annotations

from typing import Any

from rag_runtime.store import ChunkStore
from shared_contract import CollectionManifest, ContractSettings, manifest_for

# The setting the tests change, and the value the re-created collection carries.
CHANGED_SETTING = "EMBEDDING_PREFIX_QUERY"
CHANGED_VALUE = "query: "


class RebuildableStore:
    """A ChunkStore whose manifest is the inner store's until :meth:`rebuild` replaces it."""

    def __init__(self, inner: ChunkStore) -> None:
        self.inner = inner
        self._manifest: CollectionManifest | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def kind(self) -> Any:
        return self.inner.kind

    @property
    def collection(self) -> str:
        return self.inner.collection

    async def read_manifest(self) -> CollectionManifest:
        return self._manifest if self._manifest is not None else await self.inner.read_manifest()

    def rebuild(self, **contract: Any) -> None:
        """The collection as re-created with these contract settings (default: a changed query prefix)."""
        values: dict[str, Any] = {"embedding_prefix_query": CHANGED_VALUE, **contract}
        self._manifest = manifest_for(ContractSettings(qdrant_uri=":memory:", **values))

    def restore(self) -> None:
        """The collection as re-created with the service's own settings."""
        self._manifest = None


def names_the_mismatch(message: str) -> bool:
    """Whether ``message`` names the changed setting with the collection's value and the service's."""
    return f"{CHANGED_SETTING}={CHANGED_VALUE!r}" in message and f"{CHANGED_SETTING}=''" in message

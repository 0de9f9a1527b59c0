"""The storage port both services use, its two adapters, and the collection layout."""

from rag_runtime.store.edge import STORE_IN_USE, EdgeStore, store_in_use
from rag_runtime.store.factory import (
    bootstrap_collection,
    close_store,
    is_legacy_store,
    open_store,
    verify_collection,
)
from rag_runtime.store.filters import (
    committed_file_filter,
    committed_filter,
    file_filter,
    live_condition,
    match,
    pending_condition,
    tenant_condition,
    tenant_filter,
)
from rag_runtime.store.layout import CollectionSpec, PayloadIndexSpec, collection_spec
from rag_runtime.store.paging import scroll_pages
from rag_runtime.store.points import chunk_payload, chunk_point, point_id_for
from rag_runtime.store.port import ChunkPoint, ChunkStore, FacetCount, PointRecord, StoreInfo, StoreKind
from rag_runtime.store.server import MIN_SERVER_VERSION, ServerStore
from rag_runtime.store.tenants import KNOWLEDGE_BASES, TenantCount, tenant_counts
from rag_runtime.store.versions import ingested_at, read_newest_version

__all__ = [
    "KNOWLEDGE_BASES",
    "MIN_SERVER_VERSION",
    "STORE_IN_USE",
    "ChunkPoint",
    "ChunkStore",
    "CollectionSpec",
    "EdgeStore",
    "FacetCount",
    "PayloadIndexSpec",
    "PointRecord",
    "ServerStore",
    "StoreInfo",
    "StoreKind",
    "TenantCount",
    "bootstrap_collection",
    "chunk_payload",
    "chunk_point",
    "close_store",
    "collection_spec",
    "committed_file_filter",
    "committed_filter",
    "file_filter",
    "ingested_at",
    "is_legacy_store",
    "live_condition",
    "match",
    "open_store",
    "pending_condition",
    "point_id_for",
    "read_newest_version",
    "scroll_pages",
    "store_in_use",
    "tenant_condition",
    "tenant_counts",
    "tenant_filter",
    "verify_collection",
]

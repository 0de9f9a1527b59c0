"""The storage port both services use, its two adapters, and the collection layout."""

from shared_contract.store.edge import STORE_IN_USE, EdgeStore
from shared_contract.store.factory import (
    bootstrap_collection,
    close_store,
    is_legacy_store,
    open_store,
    verify_collection,
)
from shared_contract.store.filters import (
    committed_file_filter,
    committed_filter,
    file_filter,
    live_condition,
    match,
    pending_condition,
    tenant_condition,
    tenant_filter,
)
from shared_contract.store.layout import CollectionSpec, PayloadIndexSpec, collection_spec
from shared_contract.store.points import chunk_payload, chunk_point, point_id_for
from shared_contract.store.port import ChunkPoint, ChunkStore, FacetCount, PointRecord, StoreInfo, StoreKind
from shared_contract.store.server import MIN_SERVER_VERSION, ServerStore
from shared_contract.store.tenants import KNOWLEDGE_BASES, TenantCount, tenant_counts
from shared_contract.store.versions import ingested_at, read_newest_version

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
    "tenant_condition",
    "tenant_counts",
    "tenant_filter",
    "verify_collection",
]

"""The tenants of the shared collection: which exist and what each holds."""

from __future__ import annotations

from dataclasses import dataclass

from qdrant_client import models

from shared_contract.schema import MetaKey, TenantKind, meta_path, tenant_kind
from shared_contract.store.filters import match, pending_condition
from shared_contract.store.port import ChunkStore


@dataclass(frozen=True)
class TenantCount:
    """One tenant and what it holds (committed points only)."""

    name: str
    kind: TenantKind
    documents: int
    chunks: int


async def tenant_counts(store: ChunkStore, *, limit: int) -> tuple[list[TenantCount], bool]:
    """Every tenant with committed chunks, by name, and whether that is all of them (False: ``limit`` reached).

    Two facets on the tenant index: chunks per tenant, and first chunks (``split_id`` 0, one per
    document version) per tenant. A file between its publish and its sweep counts twice for that instant.
    """
    key = meta_path(MetaKey.COLLECTION_NAME)
    chunks = await store.facet(key, models.Filter(must_not=[pending_condition()]), limit=limit + 1)
    heads = models.Filter(must=[match(MetaKey.SPLIT_ID, 0)], must_not=[pending_condition()])
    documents = {str(hit.value): hit.count for hit in await store.facet(key, heads, limit=limit + 1)}
    counted = sorted(
        (
            TenantCount(
                name=str(hit.value),
                kind=tenant_kind(str(hit.value)),
                documents=documents.get(str(hit.value), 0),
                chunks=hit.count,
            )
            for hit in chunks
        ),
        key=lambda tenant: tenant.name,
    )
    return counted[:limit], len(chunks) <= limit

"""The tenants of the shared collection: which exist and what each holds."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from qdrant_client import models

from rag_runtime.store.filters import match, pending_condition, tenant_condition
from rag_runtime.store.port import ChunkStore
from shared_contract.schema import MetaKey, TenantKind, meta_path, tenant_kind


@dataclass(frozen=True)
class TenantCount:
    """One tenant and what it holds (committed points only)."""

    name: str
    kind: TenantKind
    documents: int
    chunks: int


# What listings show by default: knowledge bases, not Open WebUI's per-file and per-user tenants.
KNOWLEDGE_BASES: tuple[TenantKind, ...] = ("knowledge_base",)
# The most distinct tenants one listing reads while skipping kinds it was not asked for.
MAX_SCANNED_TENANTS = 1_000_000


async def tenant_counts(
    store: ChunkStore, *, limit: int, kinds: Collection[TenantKind] | None = None
) -> tuple[list[TenantCount], bool]:
    """The tenants with committed chunks (of ``kinds``, else all), by name, and whether that is all of
    them (False: more than ``limit``; the ``limit`` largest are listed).

    Two facets on the tenant index: chunks per tenant, then first chunks (``split_id`` 0, one per
    document version) of the tenants listed. A memory fact is one point: its tenant's documents are
    its chunks. Tenants of other kinds do not take a listed one's place: while they fill the facet,
    it is read again, four times as wide (Open WebUI makes a ``file-*`` tenant per upload).
    A file between its publish and its sweep counts twice for that instant.
    """
    key = meta_path(MetaKey.COLLECTION_NAME)
    width = limit + 1
    while True:
        chunks = await store.facet(key, models.Filter(must_not=[pending_condition()]), limit=width)
        wanted = [hit for hit in chunks if kinds is None or tenant_kind(str(hit.value)) in kinds]
        if len(wanted) > limit or len(chunks) < width or width >= MAX_SCANNED_TENANTS:
            break
        width = min(width * 4, MAX_SCANNED_TENANTS)
    listed = sorted(wanted, key=lambda hit: hit.count, reverse=True)[:limit]
    names = [str(hit.value) for hit in listed]
    documents: dict[str, int] = {}
    if names:
        heads = models.Filter(
            must=[match(MetaKey.SPLIT_ID, 0), tenant_condition(names)], must_not=[pending_condition()]
        )
        documents = {str(hit.value): hit.count for hit in await store.facet(key, heads, limit=len(names))}
    counted = []
    for name, hit in zip(names, listed, strict=True):
        kind = tenant_kind(name)
        # A memory fact is one point, with no split_id: its tenant's documents are its chunks.
        documents_of = hit.count if kind == "memory" else documents.get(name, 0)
        counted.append(TenantCount(name=name, kind=kind, documents=documents_of, chunks=hit.count))
    return sorted(counted, key=lambda tenant: tenant.name), len(wanted) <= limit and len(chunks) < width

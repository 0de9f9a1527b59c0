"""Which tenants the shared collection holds, and what each holds (embedded engine)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from rag_runtime.store import (
    KNOWLEDGE_BASES,
    ChunkPoint,
    ChunkStore,
    bootstrap_collection,
    open_store,
    tenant_counts,
)
from shared_contract import ContractSettings, load_settings
from shared_contract.schema import tenant_kind

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def point(tenant: str, file_id: str, split_id: int, *, state: str = "live") -> ChunkPoint:
    meta = {"collection_name": tenant, "file_id": file_id, "split_id": split_id, "ingest_state": state}
    return ChunkPoint(
        point_id=str(uuid.uuid4()), dense=[0.1] * 384, sparse=None, payload={"content": "x", "meta": meta}
    )


def test_open_webui_names_decide_the_kind() -> None:
    assert tenant_kind("file-3f2a") == "file"
    assert tenant_kind("user-memory-u1") == "user_memory"
    assert tenant_kind("memory-u1") == "memory"
    assert tenant_kind("kb-handbook") == "knowledge_base"
    assert tenant_kind("profile-file-x") == "knowledge_base"


async def test_tenants_are_counted_by_documents_and_committed_chunks() -> None:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:", qdrant_index=f"t_{uuid.uuid4().hex[:8]}")
    store = open_store(settings)
    try:
        await bootstrap_collection(store, settings)
        await store.upsert(
            [
                point("kb-b", "f1", 0),
                point("kb-b", "f1", 1),
                point("kb-b", "f2", 0),
                point("file-f3", "f3", 0),
                # A run still writing is nobody's content yet.
                point("kb-a", "f4", 0, state="pending"),
                point("kb-b", "f5", 0, state="pending"),
            ]
        )
        counted, complete = await tenant_counts(store, limit=10)
        assert [(t.name, t.kind, t.documents, t.chunks) for t in counted] == [
            ("file-f3", "file", 1, 1),
            ("kb-b", "knowledge_base", 2, 3),
        ]
        assert complete is True
        capped, complete = await tenant_counts(store, limit=1)
        assert len(capped) == 1
        assert complete is False
    finally:
        await store.close()


@pytest.fixture
async def store() -> AsyncIterator[ChunkStore]:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:", qdrant_index=f"t_{uuid.uuid4().hex[:8]}")
    opened = open_store(settings)
    try:
        await bootstrap_collection(opened, settings)
        yield opened
    finally:
        await opened.close()


async def test_other_kinds_do_not_take_a_knowledge_base_s_place(store: ChunkStore) -> None:
    # Open WebUI makes a file-* tenant per upload: twenty of them, each larger than the one knowledge base.
    uploads = [point(f"file-{n:02}", f"u{n}", split) for n in range(20) for split in range(2)]
    await store.upsert([*uploads, point("kb-small", "f1", 0)])
    listed, complete = await tenant_counts(store, limit=3, kinds=KNOWLEDGE_BASES)
    assert [(t.name, t.documents, t.chunks) for t in listed] == [("kb-small", 1, 1)]
    assert complete is True
    every, complete = await tenant_counts(store, limit=3)
    assert [t.name for t in every] == ["file-00", "file-01", "file-02"]  # the largest, by name
    assert complete is False


async def test_documents_are_counted_for_every_listed_tenant(store: ChunkStore) -> None:
    # The most chunks and the most documents rank tenants differently.
    await store.upsert(
        [
            *(point("kb-long", "long", split) for split in range(5)),
            *(point("kb-many", f"m{n}", 0) for n in range(4)),
            *(point("kb-some", f"s{n}", 0) for n in range(3)),
        ]
    )
    listed, complete = await tenant_counts(store, limit=1)
    assert [(t.name, t.documents, t.chunks) for t in listed] == [("kb-long", 1, 5)]
    assert complete is False


async def test_a_memory_tenant_s_documents_are_its_facts(store: ChunkStore) -> None:
    facts = [
        ChunkPoint(
            point_id=str(uuid.uuid4()),
            dense=[0.1] * 384,
            sparse=None,
            payload={"content": "x", "meta": {"collection_name": "memory-u1", "file_id": f"fact-{n}"}},
        )
        for n in range(3)
    ]
    await store.upsert(facts)
    listed, _ = await tenant_counts(store, limit=10)
    assert [(t.name, t.kind, t.documents, t.chunks) for t in listed] == [("memory-u1", "memory", 3, 3)]

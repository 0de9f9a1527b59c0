"""Which tenants the shared collection holds, and what each holds (embedded engine)."""

from __future__ import annotations

import uuid

import pytest

from shared_contract import ContractSettings, load_settings
from shared_contract.schema import tenant_kind
from shared_contract.store import ChunkPoint, bootstrap_collection, open_store, tenant_counts

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

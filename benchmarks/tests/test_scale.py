"""The scale row's store: copies of real chunks that search treats as distinct chunks."""

from __future__ import annotations

import asyncio
from pathlib import Path

from benchmarks.scale import copy_points
from benchmarks.speed import contract_settings
from rag_runtime.embedding import SparseVectorData
from rag_runtime.store import PointRecord, bootstrap_collection, close_store, open_store, tenant_filter


def original(index: int) -> PointRecord:
    dense = [0.0] * 384
    dense[index] = 1.0
    return PointRecord(
        point_id=f"00000000-0000-0000-0000-00000000000{index}",
        payload={
            "id": f"chunk-{index}",
            "content": f"Original text {index}.",
            "meta": {"collection_name": "bench-scifact", "file_id": f"doc-{index}", "languages": ["en"]},
        },
        vectors={"text-dense": dense, "text-sparse": SparseVectorData(indices=[index], values=[1.0])},
    )


def test_copies_carry_distinct_texts_new_ids_and_the_tenant(tmp_path: Path) -> None:
    path = tmp_path / "qdrant"

    async def build() -> list[PointRecord]:
        store = open_store(contract_settings(path))
        try:
            await bootstrap_collection(store, contract_settings(path))
            written = await copy_points(store, [original(0), original(1)], 5, tenant_of=lambda copy: "bench-scale")
            assert written == 5
            page, _ = await store.scroll(tenant_filter(["bench-scale"]), limit=10)
            return page
        finally:
            await close_store(store)

    copies = asyncio.run(build())
    contents = sorted(record.payload["content"] for record in copies)
    assert contents == [
        "Original text 0.",
        "Original text 0.\n[copy 1]",
        "Original text 0.\n[copy 2]",
        "Original text 1.",
        "Original text 1.\n[copy 1]",
    ]
    assert len({record.point_id for record in copies}) == 5
    assert sorted(record.payload["meta"]["file_id"] for record in copies) == [
        "doc-0-copy0",
        "doc-0-copy1",
        "doc-0-copy2",
        "doc-1-copy0",
        "doc-1-copy1",
    ]
    assert {record.payload["meta"]["live_in"] for record in copies} == {"bench-scale"}

"""Reading every point a filter selects, page by page, through the storage port."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rag_runtime.store import chunk_point, close_store, collection_spec, open_store, scroll_pages, tenant_filter
from shared_contract import ContractSettings, load_settings

pytestmark = pytest.mark.anyio


def settings_at(root: Path) -> ContractSettings:
    return load_settings(
        ContractSettings,
        qdrant_path=root,
        qdrant_index="paging",
        embedding_model="contract-tests/tiny",
        embedding_dim=4,
    )


async def test_every_selected_point_comes_once_in_pages_of_the_given_size(tmp_path: Path) -> None:
    settings = settings_at(tmp_path / "qdrant")
    store = open_store(settings)
    try:
        await store.create_collection(dataclasses.replace(collection_spec(settings), payload_indexes=[]))
        points = [
            chunk_point(f"{tenant}/{n}", "", {"collection_name": tenant}, dense=[1.0, 0.0, 0.0, 0.0], sparse=None)
            for tenant in ("a", "b")
            for n in range(5)
        ]
        await store.upsert(points)

        pages = [page async for page in scroll_pages(store, tenant_filter(["a"]), page_size=2)]

        assert [len(page) for page in pages] == [2, 2, 1]
        ids = [record.point_id for page in pages for record in page]
        assert sorted(ids) == sorted(point.point_id for point in points[:5])  # tenant a's five
        assert len(set(ids)) == 5
    finally:
        await close_store(store)


async def test_an_empty_selection_yields_no_page(tmp_path: Path) -> None:
    settings = settings_at(tmp_path / "qdrant")
    store = open_store(settings)
    try:
        await store.create_collection(dataclasses.replace(collection_spec(settings), payload_indexes=[]))

        assert [page async for page in scroll_pages(store, tenant_filter(["a"]), page_size=2)] == []
    finally:
        await close_store(store)

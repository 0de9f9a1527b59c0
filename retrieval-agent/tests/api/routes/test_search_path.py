"""Documents synced from a folder: /search returns their path and filters by folder, the tools read
a document by its path, always inside the request's tenant."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore, chunk_point, close_store, open_store
from shared_contract.paths import path_folders

from ...conftest import AUTH, chunk_meta, create_collection, make_settings  # noqa: TID252

# (tenant, relative path, text)
FILES: list[tuple[str, str, str]] = [
    ("kb-a", "notes/2024/harbour.md", "The harbour project budget was approved in March."),
    ("kb-a", "notes/2024/q1/ferry.md", "The ferry budget for the first quarter covers fuel."),
    ("kb-a", "notes/2024-old/harbour.md", "An old harbour budget draft, never approved."),
    ("kb-a", "top.md", "The budget overview lists every project."),
    ("kb-b", "notes/2024/secret.md", "Tenant B's secret budget: BANANA."),
]


@pytest.fixture(scope="module")
def synced(embedder: ContractEmbedder) -> Iterator[ChunkStore]:
    """Each file as ingestion writes a synced one: its path and folders on every chunk."""
    settings = make_settings()
    store = open_store(settings)
    vectors = embedder.embed_documents([text for _, _, text in FILES], with_sparse=True)
    points = []
    for index, (tenant, path, text) in enumerate(FILES):
        name = path.rsplit("/", 1)[-1]
        meta = chunk_meta(tenant, name, 0, 0, file_id=f"{tenant}:{path}", path=path, folders=path_folders(path))
        sparse = vectors.sparse[index] if vectors.sparse is not None else None
        points.append(chunk_point(f"{tenant}-{index}", text, meta, dense=vectors.dense[index], sparse=sparse))

    async def seed() -> None:
        await create_collection(store, settings)
        await store.upsert(points)

    anyio.run(seed)
    yield store
    anyio.run(close_store, store)


@pytest.fixture
def api(app_factory: Callable[..., TestClient], synced: ChunkStore) -> TestClient:
    return app_factory(make_settings(), synced)


def _search(api: TestClient, document_filter: dict[str, Any] | None = None, tenant: str = "kb-a") -> Any:
    body: dict[str, Any] = {"queries": ["budget"], "collection_names": [tenant], "k": 20}
    if document_filter is not None:
        body["filter"] = document_filter
    return api.post("/search", json=body, headers=AUTH)


def _paths(response: Any) -> set[str]:
    assert response.status_code == 200, response.text
    return {meta["path"] for meta in response.json()["metadatas"][0]}


def test_search_results_show_each_documents_path(api: TestClient) -> None:
    assert _paths(_search(api)) == {path for tenant, path, _ in FILES if tenant == "kb-a"}


@pytest.mark.parametrize(
    ("folder", "expected"),
    [
        ("notes/2024", {"notes/2024/harbour.md", "notes/2024/q1/ferry.md"}),
        ("notes/2024/", {"notes/2024/harbour.md", "notes/2024/q1/ferry.md"}),
        ("notes\\2024\\q1", {"notes/2024/q1/ferry.md"}),
        (["notes/2024/q1", "notes/2024-old"], {"notes/2024/q1/ferry.md", "notes/2024-old/harbour.md"}),
        ("notes/20", set()),  # whole folder names, never a string prefix
    ],
)
def test_the_folder_filter_keeps_the_documents_under_that_folder(
    api: TestClient, folder: str | list[str], expected: set[str]
) -> None:
    assert _paths(_search(api, {"path_prefix": folder})) == expected


def test_the_folder_filter_stays_inside_the_requested_tenant(api: TestClient) -> None:
    assert _paths(_search(api, {"path_prefix": "notes/2024"}, tenant="kb-b")) == {"notes/2024/secret.md"}


def test_the_paths_filter_keeps_exactly_those_files(api: TestClient) -> None:
    assert _paths(_search(api, {"paths": ["top.md", "notes/2024/harbour.md"]})) == {"top.md", "notes/2024/harbour.md"}


@pytest.mark.parametrize("folder", ["../notes", "/notes", ""])
def test_a_folder_outside_the_synced_root_is_refused(api: TestClient, folder: str) -> None:
    response = _search(api, {"path_prefix": folder})

    assert response.status_code == 422
    assert response.json()["code"] == "INVALID_REQUEST"


def test_the_read_document_tool_reads_a_document_by_its_path(api: TestClient) -> None:
    response = api.post(
        "/tools/read_document", json={"path": "notes/2024/q1/ferry.md", "collection": "kb-a"}, headers=AUTH
    )

    assert response.status_code == 200, response.text
    document = response.json()
    assert (document["file_id"], document["path"]) == ("kb-a:notes/2024/q1/ferry.md", "notes/2024/q1/ferry.md")
    assert "fuel" in document["text"]


def test_reading_by_path_never_reads_another_tenants_document(api: TestClient) -> None:
    response = api.post(
        "/tools/read_document", json={"path": "notes/2024/secret.md", "collection": "kb-a"}, headers=AUTH
    )

    assert response.status_code == 404
    assert response.json()["code"] == "DOCUMENT_NOT_FOUND"


@pytest.mark.parametrize(
    "body",
    [
        {"collection": "kb-a"},
        {"file_id": "kb-a:top.md", "path": "top.md", "collection": "kb-a"},
        {"path": "../top.md", "collection": "kb-a"},
    ],
)
def test_read_document_takes_exactly_one_of_file_id_and_a_relative_path(api: TestClient, body: dict[str, Any]) -> None:
    response = api.post("/tools/read_document", json=body, headers=AUTH)

    assert response.status_code == 422
    assert response.json()["code"] == "INVALID_REQUEST"

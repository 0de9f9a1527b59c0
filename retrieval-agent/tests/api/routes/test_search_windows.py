"""POST /search returns each hit with the document text around it (SEARCH_WINDOW_CHARS)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from qdrant_client import models

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore, point_id_for
from retrieval_agent.settings import Settings
from shared_contract.schema import chunk_id

from ...conftest import AUTH, RecordingStore, add_chunk, chunk_meta, create_collection, make_settings  # noqa: TID252

TENANT = "kb-w"
HANDBOOK = [
    "Chapter 3: Vacation policy",
    "Employees earn 25 days of paid vacation per year.",
    "Ferie kan overføres til næste år efter aftale med lederen.",
    "Unused vacation days expire at the end of March.",
    "Chapter 4: Travel expenses are refunded within thirty days of a claim.",
]
OTHER = "The cafeteria opens at eight and serves breakfast until ten."
# The same file id in another tenant, its split 2 different: never joined to a kb-w window.
FOREIGN_SPLIT_2 = "Tenant X only: the vacation allowance is secret."
QUESTION = "How many days of paid vacation do employees earn?"


def point_key(meta: dict[str, Any], ids: str, name: str) -> str:
    """The chunk's id as ingestion writes it (``contract``), or one another writer chose."""
    return chunk_id(meta, meta["split_id"]) if ids == "contract" else f"{name}-{meta['split_id']}"


# Neighbours are read by id where the hits' ids follow the contract, else by split range.
@pytest.fixture(params=["contract", "other"])
def handbook(
    request: pytest.FixtureRequest,
    store_factory: Callable[..., ChunkStore],
    settings: Settings,
    embedder: ContractEmbedder,
) -> ChunkStore:
    store = store_factory(settings)
    ids: str = request.param

    async def seed() -> None:
        await create_collection(store, settings)
        for index, text in enumerate(HANDBOOK):
            danish = {"languages": ["da"], "language": "da"} if index == 2 else {}
            meta = chunk_meta(TENANT, "handbook.pdf", 1, index, **danish)
            await add_chunk(store, embedder, point_key(meta, ids, "handbook"), text, meta)
        other = chunk_meta(TENANT, "other.pdf", 1, 0)
        await add_chunk(store, embedder, point_key(other, ids, "other"), OTHER, other)
        foreign = chunk_meta("kb-x", "handbook.pdf", 1, 2)
        await add_chunk(store, embedder, point_key(foreign, ids, "foreign"), FOREIGN_SPLIT_2, foreign)

    anyio.run(seed)
    return store


def search(api: TestClient, **overrides: Any) -> tuple[list[str], list[dict[str, Any]]]:
    body: dict[str, Any] = {"queries": [QUESTION], "collection_names": [TENANT], "k": 1, **overrides}
    response = api.post("/search", json=body, headers=AUTH)
    assert response.status_code == 200, response.text
    data = response.json()
    return data["documents"][0], data["metadatas"][0]


def test_a_hit_is_returned_with_the_neighbours_that_fit_in_document_order(
    app_factory: Callable[..., TestClient], handbook: ChunkStore
) -> None:
    # 49 characters of hit, then after (58), before (26): 133; the next after (48) would pass 150.
    api = app_factory(make_settings(search_window_chars=150), handbook)
    documents, metadatas = search(api)
    assert documents == ["\n\n".join(HANDBOOK[0:3])]
    assert metadatas[0]["window"] == [0, 2]
    assert metadatas[0]["file_id"] == "file-handbook.pdf"


def test_a_neighbour_outside_the_request_filter_is_not_joined(
    app_factory: Callable[..., TestClient], handbook: ChunkStore, request: pytest.FixtureRequest
) -> None:
    recording = RecordingStore(handbook)
    api = app_factory(make_settings(search_window_chars=150), recording)
    documents, metadatas = search(api, filter={"languages": ["en"]})
    # The Danish split 2 is outside the filter: the window stops before it and grows backwards only.
    assert documents == ["\n\n".join(HANDBOOK[0:2])]
    assert metadatas[0]["window"] == [0, 1]
    # The neighbour read carries the tenants and the filter.
    tenant = models.FieldCondition(key="meta.live_in", match=models.MatchAny(any=[TENANT]))
    (selector,) = recording.scrolls
    scope = selector.must[0]
    assert tenant in scope.must
    assert any(isinstance(condition, models.Filter) and condition.should for condition in scope.must)
    (branch,) = selector.must[1].should
    by_id = request.node.callspec.params["handbook"] == "contract"
    assert isinstance(branch, models.HasIdCondition if by_id else models.Filter)


def test_results_never_show_a_chunk_twice_and_spare_candidates_fill_k(
    app_factory: Callable[..., TestClient], handbook: ChunkStore
) -> None:
    api = app_factory(make_settings(), handbook)  # the default budget holds the whole handbook
    documents, metadatas = search(api, queries=["vacation days"], k=2)
    assert documents == ["\n\n".join(HANDBOOK), OTHER]
    assert [meta["window"] for meta in metadatas] == [[0, 4], [0, 0]]
    assert not any(FOREIGN_SPLIT_2 in text for text in documents)


def test_a_hit_longer_than_the_budget_is_returned_whole_and_alone(
    app_factory: Callable[..., TestClient], handbook: ChunkStore
) -> None:
    api = app_factory(make_settings(search_window_chars=10), handbook)
    documents, metadatas = search(api)
    assert documents == [HANDBOOK[1]]
    assert metadatas[0]["window"] == [1, 1]


def test_zero_window_chars_returns_the_ranked_chunk_alone(
    app_factory: Callable[..., TestClient], handbook: ChunkStore
) -> None:
    recording = RecordingStore(handbook)
    api = app_factory(make_settings(search_window_chars=0), recording)
    documents, metadatas = search(api)
    assert documents == [HANDBOOK[1]]
    assert "window" not in metadatas[0]
    assert recording.scrolls == []


def test_without_a_filter_neighbours_are_read_by_id_and_a_chunk_still_being_written_is_not_joined(
    app_factory: Callable[..., TestClient],
    store_factory: Callable[..., ChunkStore],
    settings: Settings,
    embedder: ContractEmbedder,
) -> None:
    store = store_factory(settings)
    draft = [
        "Chapter 5: Parental leave",
        "Parents take twenty weeks of paid leave.",
        "Draft: leave rises to thirty weeks.",
    ]

    async def seed() -> None:
        await create_collection(store, settings)
        for index, text in enumerate(draft):
            state = {"ingest_state": "pending"} if index == 2 else {}
            meta = chunk_meta(TENANT, "leave.pdf", 1, index, chunk_count=3, **state)
            await add_chunk(store, embedder, chunk_id(meta, index), text, meta)

    anyio.run(seed)
    recording = RecordingStore(store)
    api = app_factory(make_settings(search_window_chars=500), recording)
    documents, metadatas = search(api, queries=["How many weeks of paid leave do parents take?"])
    assert documents == ["\n\n".join(draft[0:2])]
    assert metadatas[0]["window"] == [0, 1]
    assert recording.scrolls == []
    # Split 0 ranked as well, so only split 2 is read: by id, and left out as still being written.
    pending = chunk_meta(TENANT, "leave.pdf", 1, 2)
    assert recording.retrieves == [[point_id_for(chunk_id(pending, 2))]]

"""/tools: the knowledge-base tools as an OpenAPI tool server, through HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore, point_id_for
from retrieval_agent.settings import Settings
from shared_contract import QdrantUnavailableError
from shared_contract.citations import verify_link

from ...citation_support import (  # noqa: TID252
    HANDBOOK_CHUNKS,
    HANDBOOK_TENANT,
    KEY,
    LEAVE_QUESTION,
    LINKS_ON,
    NOW,
    add_handbook,
    clock,
    page_image_token,
)
from ...conftest import AUTH, RecordingStore, make_settings  # noqa: TID252
from ...contract_support import RebuildableStore, names_the_mismatch  # noqa: TID252

TOOLS = {"search_knowledge_base", "read_document", "list_documents", "list_collections"}


def resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A request body schema with its $ref followed, as a tool server client reads it."""
    ref = schema.get("$ref")
    if ref is None:
        return schema
    name = ref.rsplit("/", 1)[-1]
    resolved: dict[str, Any] = spec["components"]["schemas"][name]
    return resolved


def test_the_tool_document_offers_the_four_tools_and_nothing_else(api: TestClient) -> None:
    response = api.get("/tools/openapi.json", headers=AUTH)
    assert response.status_code == 200
    spec = response.json()
    operations = {
        operation["operationId"]: (path, method, operation)
        for path, methods in spec["paths"].items()
        for method, operation in methods.items()
    }
    assert set(operations) == TOOLS
    for path, method, operation in operations.values():
        assert path.startswith("/tools/")
        assert method == "post"
        assert len(operation["description"]) > 40  # written for a model
    # A tool server client turns the body's properties into the tool's arguments.
    search_path, _, search_operation = operations["search_knowledge_base"]
    body = resolve(spec, search_operation["requestBody"]["content"]["application/json"]["schema"])
    assert set(body["properties"]) == {"query", "collection", "k", "filters"}
    assert set(body["required"]) == {"query", "collection"}
    assert body["properties"]["query"]["description"]
    assert search_path == "/tools/search"


def test_the_main_document_keeps_every_route_and_the_tool_document_needs_the_key(api: TestClient) -> None:
    main = api.get("/openapi.json", headers=AUTH).json()
    assert {"/search", "/tools/search"} <= set(main["paths"])
    assert "/tools/openapi.json" not in main["paths"]
    assert api.get("/tools/openapi.json").status_code == 401


def test_search_finds_the_passage_with_its_page_as_stored_and_as_read(api: TestClient) -> None:
    body = {"query": "When was the Eiffel Tower completed?", "collection": "kb-a", "k": 3}
    response = api.post("/tools/search", json=body, headers=AUTH)
    assert response.status_code == 200, response.text
    data = response.json()
    top = data["passages"][0]
    assert (top["name"], top["file_id"], top["collection"]) == ("paris.pdf", "file-paris.pdf", "kb-a")
    assert (top["page"], top["page_number"]) == (1, 2)
    assert "Eiffel Tower in Paris was completed in 1889" in top["text"]
    # kb-b holds an Eiffel Tower chunk too: never returned for kb-a.
    assert {passage["collection"] for passage in data["passages"]} == {"kb-a"}


def test_read_and_list_a_collections_documents(api: TestClient) -> None:
    listing = api.post("/tools/list_documents", json={"collection": "kb-a"}, headers=AUTH).json()
    names = {document["name"] for document in listing["documents"]}
    assert {"paris.pdf", "biology.pdf", "denmark.pdf", "shared.txt"} == names
    document = api.post(
        "/tools/read_document", json={"file_id": "file-biology.pdf", "collection": "kb-a"}, headers=AUTH
    ).json()
    assert "Photosynthesis" in document["text"]
    assert "Mitochondria" in document["text"]
    collections = api.post("/tools/list_collections", json={}, headers=AUTH).json()
    assert {"kb-a", "kb-b", "kb-c"} <= {collection["name"] for collection in collections["collections"]}


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        ("/tools/read_document", {"file_id": "file-nowhere.pdf", "collection": "kb-a"}, "DOCUMENT_NOT_FOUND"),
        ("/tools/list_documents", {"collection": "kb-empty"}, "COLLECTION_NOT_FOUND"),
        ("/tools/search", {"query": "Eiffel", "collection": "kb-empty"}, "COLLECTION_NOT_FOUND"),
    ],
)
def test_what_is_not_there_is_a_404_with_its_code(api: TestClient, path: str, body: dict[str, Any], code: str) -> None:
    response = api.post(path, json=body, headers=AUTH)
    assert response.status_code == 404
    data = response.json()
    assert (data["status"], data["code"]) == (False, code)
    assert data["hint"]


@pytest.mark.parametrize(
    "body",
    [
        {"query": "   ", "collection": "kb-a"},
        {"query": "Eiffel", "collection": "kb-a", "k": 0},
        {"query": "Eiffel", "collection": "kb-a", "unknown": 1},
        {"query": "Eiffel", "collection": "not a collection name!"},
    ],
)
def test_a_bad_tool_call_is_a_422(api: TestClient, body: dict[str, Any]) -> None:
    response = api.post("/tools/search", json=body, headers=AUTH)
    assert response.status_code == 422
    assert response.json()["code"] == "INVALID_REQUEST"


class _DownStore(RecordingStore):
    async def query(self, request: Any) -> Any:
        raise QdrantUnavailableError("connection refused")

    async def query_batch(self, requests: Any) -> Any:
        raise QdrantUnavailableError("connection refused")


def test_a_store_outage_keeps_its_own_code_and_status(
    app_factory: Callable[..., TestClient], settings: Settings, seeded: ChunkStore
) -> None:
    api = app_factory(settings, _DownStore(seeded))
    response = api.post("/tools/search", json={"query": "Eiffel", "collection": "kb-a"}, headers=AUTH)
    assert response.status_code == 503
    assert response.json()["code"] == "QDRANT_UNAVAILABLE"


def test_a_contract_mismatch_refuses_the_search_tool_naming_the_setting_until_it_is_fixed(
    app_factory: Callable[..., TestClient], settings: Settings, seeded: ChunkStore
) -> None:
    store = RebuildableStore(seeded)
    api = app_factory(settings, store)
    body = {"query": "When was the Eiffel Tower completed?", "collection": "kb-a", "k": 3}
    store.rebuild()
    api.get("/health/ready")
    refused = api.post("/tools/search", json=body, headers=AUTH)
    assert refused.status_code == 503, refused.text
    assert refused.json()["code"] == "COLLECTION_MISMATCH"
    assert names_the_mismatch(refused.json()["error"])
    store.restore()
    assert api.get("/health/ready").status_code == 200
    answered = api.post("/tools/search", json=body, headers=AUTH)
    assert answered.status_code == 200, answered.text
    assert answered.json()["passages"][0]["name"] == "paris.pdf"


def test_search_passages_carry_their_citation_links(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, embedder: ContractEmbedder
) -> None:
    anyio.run(add_handbook, seeded, embedder)
    client = app_factory(make_settings(**LINKS_ON), seeded, clock=clock)
    response = client.post(
        "/tools/search", json={"query": LEAVE_QUESTION, "collection": HANDBOOK_TENANT, "k": 8}, headers=AUTH
    )
    assert response.status_code == 200, response.text
    chunk_id, page, text = HANDBOOK_CHUNKS[0]
    passage = next(passage for passage in response.json()["passages"] if text in passage["text"])
    link = verify_link(page_image_token(passage["citation_url"]), KEY, now=NOW)
    assert (link.point_id, link.page) == (point_id_for(chunk_id), page)
    assert passage["original_url"].endswith(f"/original#page={page + 1}")

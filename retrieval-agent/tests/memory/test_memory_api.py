"""/api/v1/memory over HTTP (TestClient on the real app, embedded engine, real embedder): the files,
the commits and the index move together, and nothing crosses users."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rag_runtime.http import NOT_JSON_MESSAGE
from rag_runtime.store import ChunkStore, tenant_filter

from ..conftest import AUTH, make_settings  # noqa: TID252

MemoryApi = Callable[..., tuple[TestClient, Path]]


@pytest.fixture
def memory_api(app_factory: Callable[..., TestClient], seeded: ChunkStore, tmp_path: Path) -> MemoryApi:
    def build(**overrides: Any) -> tuple[TestClient, Path]:
        root = tmp_path / "memory"
        settings = make_settings(enable_memory=True, memory_path=root, **overrides)
        return app_factory(settings, seeded), root

    return build


def add(client: TestClient, user: str, text: str, **extra: Any) -> dict[str, Any]:
    response = client.post(f"/api/v1/memory/{user}/facts", json={"text": text, **extra}, headers=AUTH)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def subjects(folder: Path) -> list[str]:
    return subprocess.run(
        ["git", "-C", str(folder), "log", "--format=%s"], check=True, capture_output=True, text=True
    ).stdout.splitlines()


def test_create_read_update_delete_each_change_a_file_and_a_commit(memory_api: MemoryApi) -> None:
    client, root = memory_api()
    fact = add(client, "alice", "The user prefers pip for Python packaging.", language="en")
    assert fact["file"] == f"alice/{fact['id']}.md"
    assert (root / "alice" / f"{fact['id']}.md").read_text().endswith("The user prefers pip for Python packaging.\n")

    got = client.get(f"/api/v1/memory/alice/facts/{fact['id']}", headers=AUTH).json()
    assert got["text"] == fact["text"]

    response = client.put(
        f"/api/v1/memory/alice/facts/{fact['id']}", json={"text": "The user prefers poetry."}, headers=AUTH
    )
    assert response.status_code == 200, response.text
    assert response.json()["created_at"] == fact["created_at"]

    response = client.delete(f"/api/v1/memory/alice/facts/{fact['id']}", params={"reason": "wrong"}, headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.json()["file"] == f"alice/deleted/{fact['id']}.md"
    assert response.json()["deleted_reason"] == "wrong"
    assert client.get("/api/v1/memory/alice/facts", headers=AUTH).json()["facts"] == []
    assert subjects(root / "alice")[:3] == [
        "DELETE: The user prefers poetry.",
        "UPDATE: The user prefers poetry.",
        "ADD: The user prefers pip for Python packaging.",
    ]
    log = client.get("/api/v1/memory/alice/log", params={"fact_id": fact["id"]}, headers=AUTH).json()
    assert [commit["subject"].split(":")[0] for commit in log["commits"]] == ["DELETE", "UPDATE", "ADD"]
    assert {commit["author"] for commit in log["commits"]} == {"memory"}


async def _tenant_texts(store: ChunkStore, user: str) -> list[str]:
    records, _ = await store.scroll(tenant_filter([f"memory-{user}"]), limit=100)
    return sorted(str(record.payload["content"]) for record in records)


@pytest.mark.anyio
async def test_the_index_follows_the_files_including_hand_edits(memory_api: MemoryApi, seeded: ChunkStore) -> None:
    client, root = memory_api()
    fact = add(client, "alice", "The user prefers pip.", language="en")
    assert await _tenant_texts(seeded, "alice") == ["The user prefers pip."]
    path = root / "alice" / f"{fact['id']}.md"
    path.write_text(path.read_text().replace("pip", "conda"))
    # The next change (or chat turn) picks the hand edit up: committed as EDIT, re-indexed.
    add(client, "alice", "The user lives in Oslo.", language="en")
    assert await _tenant_texts(seeded, "alice") == ["The user lives in Oslo.", "The user prefers conda."]
    assert "EDIT: " + path.name in subjects(root / "alice")


@pytest.mark.anyio
async def test_wipe_forgets_one_user_and_leaves_the_others(memory_api: MemoryApi, seeded: ChunkStore) -> None:
    client, root = memory_api()
    add(client, "alice", "Alice drinks tea.")
    add(client, "bob", "Bob drinks coffee.")
    response = client.delete("/api/v1/memory/alice", headers=AUTH)
    assert response.json() == {"user": "alice", "wiped": True}
    assert not (root / "alice").exists()
    assert await _tenant_texts(seeded, "alice") == []
    assert await _tenant_texts(seeded, "bob") == ["Bob drinks coffee."]
    assert [f["text"] for f in client.get("/api/v1/memory/bob/facts", headers=AUTH).json()["facts"]] == [
        "Bob drinks coffee."
    ]


def test_errors_are_typed(memory_api: MemoryApi) -> None:
    client, _ = memory_api()
    missing = client.get("/api/v1/memory/alice/facts/00000000-0000-0000-0000-000000000000", headers=AUTH)
    assert (missing.status_code, missing.json()["code"]) == (404, "FACT_NOT_FOUND")
    bad_user = client.get("/api/v1/memory/bad.user/facts", headers=AUTH)
    assert (bad_user.status_code, bad_user.json()["code"]) == (422, "INVALID_REQUEST")
    bad_id = client.get("/api/v1/memory/alice/facts/.hidden", headers=AUTH)
    assert (bad_id.status_code, bad_id.json()["code"]) == (422, "INVALID_REQUEST")
    empty = client.post("/api/v1/memory/alice/facts", json={"text": "   "}, headers=AUTH)
    assert (empty.status_code, empty.json()["code"]) == (422, "INVALID_REQUEST")
    unauthorized = client.get("/api/v1/memory/alice/facts")
    assert unauthorized.status_code == 401
    not_json = client.post(
        "/api/v1/memory/alice/facts", content=b'{"text": "Likes tea."}', headers={**AUTH, "Content-Type": "text/plain"}
    )
    assert (not_json.status_code, not_json.json()["error"]) == (415, NOT_JSON_MESSAGE)
    assert client.get("/api/v1/memory/alice/facts", headers=AUTH).json()["facts"] == []


def test_a_user_folder_that_cannot_be_created_is_memory_failed(memory_api: MemoryApi) -> None:
    client, root = memory_api()
    root.mkdir()
    (root / "alice").write_text("a file where alice's folder goes")
    response = client.post("/api/v1/memory/alice/facts", json={"text": "Likes tea."}, headers=AUTH)
    assert (response.status_code, response.json()["code"]) == (500, "MEMORY_FAILED")


def test_the_fact_routes_declare_their_404(memory_api: MemoryApi) -> None:
    client, _ = memory_api()
    paths = client.get("/openapi.json").json()["paths"]
    for method in ("get", "put", "delete"):
        declared = paths["/api/v1/memory/{user}/facts/{fact_id}"][method]["responses"]["404"]
        assert declared["description"].startswith("FACT_NOT_FOUND"), method


def test_memory_is_off_by_default(app_factory: Callable[..., TestClient], seeded: ChunkStore) -> None:
    client = app_factory(make_settings(), seeded)
    response = client.get("/api/v1/memory/alice/facts", headers=AUTH)
    assert (response.status_code, response.json()["code"]) == (503, "MEMORY_DISABLED")


def test_search_refuses_memory_tenants(memory_api: MemoryApi) -> None:
    client, _ = memory_api()
    add(client, "alice", "Alice drinks tea.")
    response = client.post("/search", json={"queries": ["tea"], "collection_names": ["memory-alice"]}, headers=AUTH)
    assert (response.status_code, response.json()["code"]) == (422, "INVALID_REQUEST")
    assert "reserved for long-term memory" in response.json()["error"]

"""/api/v1/memory over HTTP (TestClient on the real app, embedded engine, real embedder): the files,
the commits and the index move together, and nothing crosses users."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rag_runtime.http import NOT_JSON_MESSAGE
from rag_runtime.store import ChunkStore, tenant_filter
from retrieval_agent.memory.limits import MAX_FACT_FILE_BYTES
from shared_contract import QdrantUnavailableError

from ..conftest import AUTH, make_settings  # noqa: TID252
from .faulty_git import FaultyGit  # noqa: TID252

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


# -- writes answer what was stored -----------------------------------------------------------------


def texts(client: TestClient, user: str = "alice") -> list[str]:
    response = client.get(f"/api/v1/memory/{user}/facts", headers=AUTH)
    assert response.status_code == 200, response.text
    return sorted(fact["text"] for fact in response.json()["facts"])


@pytest.mark.anyio
async def test_a_write_on_a_full_disk_is_memory_failed_and_stores_nothing(
    memory_api: MemoryApi, seeded: ChunkStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faulty_git = FaultyGit(tmp_path / "faulty-git")
    monkeypatch.setenv("PATH", faulty_git.path_env())
    client, root = memory_api()
    add(client, "alice", "The user prefers pip.", language="en")
    faulty_git.disk_full()
    response = client.post("/api/v1/memory/alice/facts", json={"text": "The user lives in Oslo."}, headers=AUTH)
    faulty_git.disk_full(False)
    assert (response.status_code, response.json()["code"]) == (500, "MEMORY_FAILED")
    assert texts(client) == ["The user prefers pip."]
    assert await _tenant_texts(seeded, "alice") == ["The user prefers pip."]
    # The retry stores it once; the next change finds no leftover to commit as a hand edit.
    add(client, "alice", "The user lives in Oslo.", language="en")
    add(client, "alice", "The user drinks tea.", language="en")
    assert texts(client) == ["The user drinks tea.", "The user lives in Oslo.", "The user prefers pip."]
    assert await _tenant_texts(seeded, "alice") == texts(client)
    assert [subject.split(":")[0] for subject in subjects(root / "alice")] == ["ADD", "ADD", "ADD", "INIT"]


class IndexDown:
    """The store, refusing writes while ``down``: Qdrant failing after the fact's commit."""

    def __init__(self, inner: ChunkStore) -> None:
        self.inner = inner
        self.down = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def upsert(self, points: Any) -> Any:
        if self.down:
            raise QdrantUnavailableError("Qdrant is out of disk space")
        return await self.inner.upsert(points)


@pytest.mark.anyio
async def test_a_fact_committed_while_the_index_fails_answers_stored_and_is_indexed_later(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, tmp_path: Path
) -> None:
    store = IndexDown(seeded)
    client = app_factory(make_settings(enable_memory=True, memory_path=tmp_path / "memory"), store)
    add(client, "alice", "The user prefers pip.", language="en")
    store.down = True
    fact = add(client, "alice", "The user lives in Oslo.", language="en")
    assert await _tenant_texts(seeded, "alice") == ["The user prefers pip."]
    store.down = False
    # Stored once, and indexed by the next look at the folder.
    assert texts(client) == ["The user lives in Oslo.", "The user prefers pip."]
    add(client, "alice", "The user drinks tea.", language="en")
    assert await _tenant_texts(seeded, "alice") == [
        "The user drinks tea.",
        "The user lives in Oslo.",
        "The user prefers pip.",
    ]
    got = client.get(f"/api/v1/memory/alice/facts/{fact['id']}", headers=AUTH)
    assert got.json()["text"] == "The user lives in Oslo."


# -- links and long files --------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("target", ["secret", "/etc/passwd"])
async def test_a_link_in_a_users_folder_is_never_served(
    memory_api: MemoryApi, seeded: ChunkStore, tmp_path: Path, target: str
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("The launch code is 0000.\n")
    client, root = memory_api()
    add(client, "alice", "The user prefers pip.", language="en")
    link = root / "alice" / "leak.md"
    link.symlink_to(secret if target == "secret" else Path(target))
    shown = Path(link.readlink()).read_text()
    add(client, "alice", "The user lives in Oslo.", language="en")  # a change indexes the folder
    listing = client.get("/api/v1/memory/alice/facts", headers=AUTH).json()
    assert sorted(fact["text"] for fact in listing["facts"]) == ["The user lives in Oslo.", "The user prefers pip."]
    assert [item["file_name"] for item in listing["unreadable"]] == ["leak.md"]
    assert "symbolic link" in listing["unreadable"][0]["problem"]
    one = client.get("/api/v1/memory/alice/facts/leak", headers=AUTH)
    assert (one.status_code, one.json()["code"]) == (500, "MEMORY_FAILED")
    first_line = shown.splitlines()[0]
    for body in (json.dumps(listing), one.text, "\n".join(await _tenant_texts(seeded, "alice"))):
        assert first_line not in body
    metrics = client.get("/metrics", headers=AUTH).text
    # Counted at each look at the changed folder: the add's before its write and after it.
    assert 'memory_files_refused_total{reason="link"} 2.0' in metrics


def test_a_linked_user_folder_is_refused(memory_api: MemoryApi, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "note.md").write_text("The launch code is 0000.\n")
    client, root = memory_api()
    root.mkdir()
    (root / "alice").symlink_to(outside, target_is_directory=True)
    for response in (
        client.get("/api/v1/memory/alice/facts", headers=AUTH),
        client.get("/api/v1/memory/alice/facts/note", headers=AUTH),
        client.post("/api/v1/memory/alice/facts", json={"text": "The user prefers pip."}, headers=AUTH),
    ):
        assert (response.status_code, response.json()["code"]) == (500, "MEMORY_FAILED")
        assert "launch code" not in response.text
    assert [path.name for path in outside.iterdir()] == ["note.md"]


def test_a_12_mb_hand_written_fact_is_served_as_its_beginning(memory_api: MemoryApi) -> None:
    client, root = memory_api()
    add(client, "alice", "The user prefers pip.", language="en")
    path = root / "alice" / "diary.md"
    path.write_text("The user keeps a long diary. " * 420_000)  # 12 MB
    size = path.stat().st_size
    add(client, "alice", "The user lives in Oslo.", language="en")
    listing = client.get("/api/v1/memory/alice/facts", headers=AUTH).json()
    (diary,) = [fact for fact in listing["facts"] if fact["id"] == "diary"]
    assert diary["truncated"] is True
    assert diary["text"].startswith("The user keeps a long diary.")
    assert len(diary["text"].encode()) <= MAX_FACT_FILE_BYTES
    assert path.stat().st_size == size
    assert all(fact["truncated"] is False for fact in listing["facts"] if fact["id"] != "diary")

"""The ingest's ``path`` field: validated, stored with its folders, listed and filtered on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fastapi.testclient import TestClient

if TYPE_CHECKING:
    from ...conftest import AppFactory, Points  # noqa: TID252

DOCUMENTS = "/api/v1/documents"
TEXT = "# Plan\n\nThe harbour project starts in March and ends before the summer holidays begin.\n"


@pytest.fixture
def client(app_client: AppFactory) -> Iterator[TestClient]:
    with app_client() as test_client:
        yield test_client


@pytest.fixture
def note(tmp_path: Path) -> Path:
    path = tmp_path / "plan.md"
    path.write_text(TEXT, encoding="utf-8")
    return path


def _ingest(client: TestClient, note: Path, file_id: str, path: str) -> Any:
    # The form field ``path`` (the shared ``upload`` fixture takes the file's own path positionally).
    fields = {"file_id": file_id, "filename": note.name, "collection_name": "kb-a", "user_id": "u-1", "path": path}
    with note.open("rb") as handle:
        return client.put("/api/v1/ingest", data=fields, files={"file": (note.name, handle)})


def _listing(client: TestClient, **params: Any) -> list[dict[str, Any]]:
    response = client.get(DOCUMENTS, params={"collection_name": "kb-a", **params})
    assert response.status_code == 200, response.text
    documents: list[dict[str, Any]] = response.json()["documents"]
    return documents


def test_every_chunk_carries_the_normalised_path_and_its_folders(
    client: TestClient, note: Path, points: Points
) -> None:
    response = _ingest(client, note, "f-1", "notes\\2024/./plan.md")
    assert response.status_code == 200, response.text

    stored = points(client, "f-1")
    assert stored
    for record in stored:
        assert record.payload["meta"]["path"] == "notes/2024/plan.md"
        assert record.payload["meta"]["folders"] == ["notes", "notes/2024"]


@pytest.mark.parametrize("path", ["/etc/passwd", "C:\\Users\\me\\plan.md", "notes/../../secret.md", "a\nb.md"])
def test_a_path_that_is_absolute_climbs_out_or_has_control_characters_is_refused(
    client: TestClient, note: Path, path: str
) -> None:
    response = _ingest(client, note, "f-1", path)

    assert response.status_code == 422
    assert response.json()["code"] == "INVALID_REQUEST"
    assert "path" in response.json()["error"]


def test_the_listing_shows_the_path_and_selects_by_path_and_by_folder(client: TestClient, note: Path) -> None:
    for file_id, path in (("f-1", "notes/2024/plan.md"), ("f-2", "notes/2024-old/plan.md"), ("f-3", "top.md")):
        assert _ingest(client, note, file_id, path).status_code == 200

    assert {doc["file_id"]: doc["path"] for doc in _listing(client)} == {
        "f-1": "notes/2024/plan.md",
        "f-2": "notes/2024-old/plan.md",
        "f-3": "top.md",
    }
    assert [doc["file_id"] for doc in _listing(client, path="notes/2024/plan.md")] == ["f-1"]
    assert [doc["file_id"] for doc in _listing(client, folder="notes/2024/")] == ["f-1"]
    assert sorted(doc["file_id"] for doc in _listing(client, folder="notes")) == ["f-1", "f-2"]


def test_a_listing_by_a_path_that_climbs_out_is_refused(client: TestClient) -> None:
    response = client.get(DOCUMENTS, params={"collection_name": "kb-a", "folder": "../x"})

    assert response.status_code == 422
    assert response.json()["code"] == "INVALID_REQUEST"

"""POST /api/v1/extract: the converter alone."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from fastapi.testclient import TestClient

if TYPE_CHECKING:
    import httpx2


def _extract(client: TestClient, path: Path, **fields: str) -> httpx2.Response:
    with path.open("rb") as handle:
        return client.post("/api/v1/extract", data=fields, files={"file": (path.name, handle)})


def test_default_engine_returns_documents(client: TestClient, docs: Path) -> None:
    response = _extract(client, docs / "docx/docling__word_tables.docx")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] is True
    assert body["engine"] == "kreuzberg"
    assert body["profile"] is None
    [document] = body["documents"]
    assert "| Header 0.0 |" in document["content"]
    assert document["meta"]["languages"] == ["en"]


def test_engine_override_pypdf_gives_pages(client: TestClient, docs: Path) -> None:
    body = _extract(client, docs / "pdf/unstructured__list-item-example.pdf", engine="pypdf").json()
    assert body["engine"] == "pypdf"
    assert [doc["meta"]["page"] for doc in body["documents"]] == [1, 2]


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"engine": "auto"}, "routing mode"),
        ({"engine": "nope"}, "Unknown extraction engine"),
        ({"profile": "diagram"}, "takes no profile"),
        ({"engine": "docling"}, "optional extra 'docling'"),
        ({"engine": "unstructured"}, "optional extra 'unstructured'"),
        ({"surprise": "1"}, "unknown form field"),
    ],
)
def test_invalid_choices_are_422(client: TestClient, docs: Path, fields: dict[str, str], fragment: str) -> None:
    response = _extract(client, docs / "md/unstructured__simple-table.md", **fields)
    assert response.status_code == 422
    assert response.json()["code"] == "INVALID_REQUEST"
    assert fragment in response.json()["error"]


def test_scan_is_422(client: TestClient, docs: Path) -> None:
    response = _extract(client, docs / "pdf/kreuzberg__non_searchable.pdf")
    assert response.status_code == 422
    assert response.json()["code"] == "EXTRACTION_FAILED"


def test_json_is_415(client: TestClient) -> None:
    assert client.post("/api/v1/extract", json={"x": 1}).status_code == 415

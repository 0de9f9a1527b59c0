"""PUT /process with LOADER_INDEX_UPLOADS: the loader's extraction is also indexed under ``file-<id>``.

Open WebUI 0.12.4 sends its storage name ``<file-id>_<name>`` (URL-quoted) as ``X-Filename`` and,
unless it forwards a JWT instead, the uploader in ``X-OpenWebUI-User-Id``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from haystack import Document

from ingestion_service.api.routes.loader import UploadKey, upload_key
from ingestion_service.documents import Converter, SourceFile
from ingestion_service.documents.registry import default_factories
from ingestion_service.runtime import ServiceHooks
from ingestion_service.settings import Settings
from shared_contract import MetaKey

if TYPE_CHECKING:
    import httpx2

    from ...conftest import AppFactory, Points  # noqa: TID252

TWO_PAGES = "pdf/unstructured__multi-column-2p.pdf"


def open_webui_put(client: TestClient, path: Path, name: str, **headers: str) -> httpx2.Response:
    """What 0.12.4's ExternalDocumentLoader sends for an upload (the TestClient adds the Bearer key)."""
    return client.put(
        "/process",
        content=path.read_bytes(),
        headers={"Content-Type": "application/pdf", "X-Filename": quote(name), **headers},
    )


def documents(client: TestClient, collection_name: str) -> list[dict[str, Any]]:
    response = client.get("/api/v1/documents", params={"collection_name": collection_name})
    assert response.status_code == 200, response.text
    listed: list[dict[str, Any]] = response.json()["documents"]
    return listed


def indexing_metric(outcome: str, code: str = "OK") -> str:
    return f'loader_indexing_total{{code="{code}",outcome="{outcome}"}} 1.0'


@pytest.fixture
def indexing_client(app_client: AppFactory) -> Iterator[TestClient]:
    with app_client(loader_index_uploads=True) as client:
        yield client


def test_an_upload_is_answered_and_indexed_under_its_file_tenant(
    indexing_client: TestClient, docs: Path, points: Points
) -> None:
    file_id = str(uuid.uuid4())
    response = open_webui_put(
        indexing_client, docs / TWO_PAGES, f"{file_id}_quarterly report.pdf", **{"X-OpenWebUI-User-Id": "user-7"}
    )
    assert response.status_code == 200, response.text
    pages = response.json()
    # The answer is the loader's as ever: its pages, named as Open WebUI sent the file.
    assert [page["metadata"]["page"] for page in pages] == [0, 1]
    assert {page["metadata"]["source"] for page in pages} == {f"{file_id}_quarterly report.pdf"}
    [document] = documents(indexing_client, f"file-{file_id}")
    assert document["file_id"] == file_id
    assert document["name"] == "quarterly report.pdf"
    assert document["format"] == "pdf"
    assert document["chunks"] > 0
    stored = points(indexing_client, file_id=file_id)
    assert {record.payload["meta"][MetaKey.COLLECTION_NAME] for record in stored} == {f"file-{file_id}"}
    assert {record.payload["meta"][MetaKey.USER_ID] for record in stored} == {"user-7"}
    assert {record.payload["meta"][MetaKey.PAGE] for record in stored} == {0, 1}
    assert indexing_metric("indexed") in indexing_client.get("/metrics").text


class CountingConverter:
    """The real kreuzberg engine, counting its extractions."""

    name = "kreuzberg"
    profiles: frozenset[str] = frozenset()

    def __init__(self, settings: Settings) -> None:
        self.engine: Converter = default_factories()["kreuzberg"](settings)
        self.calls = 0

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:
        self.calls += 1
        return self.engine.convert(source, profile=profile)


def test_the_upload_is_extracted_once_for_the_answer_and_the_index(
    app_client: AppFactory, docs: Path, points: Points
) -> None:
    converters: list[CountingConverter] = []

    def counting(settings: Settings) -> CountingConverter:
        converters.append(CountingConverter(settings))
        return converters[-1]

    file_id = str(uuid.uuid4())
    hooks = ServiceHooks(converter_factories={"kreuzberg": counting})
    with app_client(loader_index_uploads=True, hooks=hooks) as client:
        assert open_webui_put(client, docs / TWO_PAGES, f"{file_id}_report.pdf").status_code == 200
        assert points(client, file_id=file_id)
    assert [converter.calls for converter in converters] == [1]


def test_the_same_bytes_again_are_unchanged_and_new_bytes_replace_the_version(
    indexing_client: TestClient, docs: Path, points: Points
) -> None:
    file_id = str(uuid.uuid4())
    name = f"{file_id}_report.pdf"
    assert open_webui_put(indexing_client, docs / TWO_PAGES, name).status_code == 200
    [first] = documents(indexing_client, f"file-{file_id}")
    assert open_webui_put(indexing_client, docs / TWO_PAGES, name).status_code == 200
    [again] = documents(indexing_client, f"file-{file_id}")
    assert again["content_hash"] == first["content_hash"]
    assert indexing_metric("unchanged") in indexing_client.get("/metrics").text
    # One version: the same points, not a second set beside them.
    assert len(points(indexing_client, file_id=file_id)) == first["chunks"]

    assert open_webui_put(indexing_client, docs / "pdf/kreuzberg__searchable.pdf", name).status_code == 200
    [replaced] = documents(indexing_client, f"file-{file_id}")
    assert replaced["content_hash"] != first["content_hash"]
    assert replaced["ingest_version"] != first["ingest_version"]
    stored = points(indexing_client, file_id=file_id)
    assert len(stored) == replaced["chunks"]
    assert {record.payload["meta"][MetaKey.INGEST_VERSION] for record in stored} == {replaced["ingest_version"]}


def test_with_the_setting_off_nothing_is_stored(client: TestClient, docs: Path, points: Points) -> None:
    file_id = str(uuid.uuid4())
    assert open_webui_put(client, docs / TWO_PAGES, f"{file_id}_report.pdf").status_code == 200
    assert documents(client, f"file-{file_id}") == []
    assert points(client, file_id=file_id) == []
    assert "loader_indexing_total{" not in client.get("/metrics").text


def test_a_name_without_a_file_id_is_answered_not_indexed(
    indexing_client: TestClient, docs: Path, points: Points
) -> None:
    response = open_webui_put(indexing_client, docs / TWO_PAGES, "report.pdf")
    assert response.status_code == 200, response.text
    assert len(response.json()) == 2
    assert points(indexing_client) == []
    metrics = indexing_client.get("/metrics").text
    assert indexing_metric("skipped", "NO_FILE_ID") in metrics
    assert 'loader_requests_total{code="",outcome="success"} 1.0' in metrics


def test_a_failed_indexing_is_the_answer_and_keeps_nothing(app_client: AppFactory, docs: Path, points: Points) -> None:
    file_id = str(uuid.uuid4())
    # Extraction succeeds; the chunk limit is a stage after it, so only the indexing fails.
    with app_client(loader_index_uploads=True, max_chunks_per_document=1) as client:
        response = open_webui_put(client, docs / TWO_PAGES, f"{file_id}_report.pdf")
        assert response.status_code == 413, response.text
        assert response.json()["code"] == "DOCUMENT_TOO_LARGE"
        assert points(client, file_id=file_id) == []
        metrics = client.get("/metrics").text
    assert indexing_metric("error", "DOCUMENT_TOO_LARGE") in metrics
    assert 'loader_requests_total{code="DOCUMENT_TOO_LARGE",outcome="error"} 1.0' in metrics


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        (
            "0b8d5f3e-2c4a-4e7b-9f1d-3a6c8e2b7d40_my report_v2.pdf",
            UploadKey("0b8d5f3e-2c4a-4e7b-9f1d-3a6c8e2b7d40", "my report_v2.pdf"),
        ),
        # Open WebUI shortens a name too long for its file system to "<id>.<ext>" or "<id>".
        (
            "0b8d5f3e-2c4a-4e7b-9f1d-3a6c8e2b7d40.pdf",
            UploadKey("0b8d5f3e-2c4a-4e7b-9f1d-3a6c8e2b7d40", "0b8d5f3e-2c4a-4e7b-9f1d-3a6c8e2b7d40.pdf"),
        ),
        (
            "0b8d5f3e-2c4a-4e7b-9f1d-3a6c8e2b7d40",
            UploadKey("0b8d5f3e-2c4a-4e7b-9f1d-3a6c8e2b7d40", "0b8d5f3e-2c4a-4e7b-9f1d-3a6c8e2b7d40"),
        ),
        ("report.pdf", None),
        ("0b8d5f3e-2c4a-4e7b-9f1d-3a6c8e2b7d40_", None),
        ("0B8D5F3E-2C4A-4E7B-9F1D-3A6C8E2B7D40_report.pdf", None),
        ("x0b8d5f3e-2c4a-4e7b-9f1d-3a6c8e2b7d40_report.pdf", None),
    ],
)
def test_upload_key_from_the_storage_name(filename: str, expected: UploadKey | None) -> None:
    assert upload_key(filename) == expected

"""Originals are versioned and deleted with their chunks, through the HTTP API (``indexing.originals``)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi.testclient import TestClient

from ingestion_service.adapters.originals import LocalOriginals, OriginalKey
from ingestion_service.errors import OriginalStoreError
from ingestion_service.runtime import ServiceHooks

if TYPE_CHECKING:
    from ..conftest import AppFactory, Points, Upload  # noqa: TID252

KB = "kb-originals"
PDF = "pdf/unstructured__multi-column-2p.pdf"
OTHER_PDF = "pdf/kreuzberg__searchable.pdf"


def originals(client: TestClient, collection_name: str = KB) -> dict[str, Any]:
    response = client.get(f"/api/v1/collections/{collection_name}/stats")
    assert response.status_code == 200, response.text
    usage: dict[str, Any] = response.json()["originals"]
    return usage


class FailingOriginals(LocalOriginals):
    """A local store whose writes fail once ``failing`` is set (a full disk, a bucket gone)."""

    failing = False

    def put(self, key: OriginalKey, source: Path) -> int:
        if self.failing:
            raise OriginalStoreError("keeping the original failed: No space left on device")
        return super().put(key, source)


def test_an_upload_keeps_its_original_once_however_often_it_is_sent(
    app_client: AppFactory, upload: Upload, docs: Path
) -> None:
    size = (docs / PDF).stat().st_size
    with app_client() as client:
        assert upload(client, docs / PDF, file_id="paper", collection_name=KB).status_code == 200
        assert originals(client) == {"originals": 1, "bytes": size}
        again = upload(client, docs / PDF, file_id="paper", collection_name=KB)
        assert again.status_code == 200
        assert again.json()["unchanged"] is True
        assert originals(client) == {"originals": 1, "bytes": size}


def test_a_delete_removes_the_original_with_the_chunks(app_client: AppFactory, upload: Upload, docs: Path) -> None:
    with app_client() as client:
        for collection in (KB, "kb-second"):
            assert upload(client, docs / PDF, file_id="paper", collection_name=collection).status_code == 200
        assert upload(client, docs / OTHER_PDF, file_id="other", collection_name=KB).status_code == 200
        assert client.delete("/api/v1/documents/paper", params={"collection_name": KB}).status_code == 200
        assert originals(client) == {"originals": 1, "bytes": (docs / OTHER_PDF).stat().st_size}
        assert originals(client, "kb-second")["originals"] == 1
        # Without a collection: the file goes from every collection, its originals with it.
        assert client.delete("/api/v1/documents/paper").status_code == 200
        assert originals(client, "kb-second") == {"originals": 0, "bytes": 0}
        assert originals(client)["originals"] == 1


def test_a_failing_store_of_originals_fails_the_ingest_and_keeps_the_previous_version(
    app_client: AppFactory, upload: Upload, points: Points, docs: Path, tmp_path: Path
) -> None:
    store = FailingOriginals(tmp_path / "originals")
    with app_client(hooks=ServiceHooks(originals_store=store)) as client:
        assert upload(client, docs / PDF, file_id="paper", collection_name=KB).status_code == 200
        before = {str(record.point_id) for record in points(client, file_id="paper", collection_name=KB)}
        store.failing = True
        response = upload(client, docs / OTHER_PDF, file_id="paper", collection_name=KB)
        after = {str(record.point_id) for record in points(client, file_id="paper", collection_name=KB)}
        usage = originals(client)
    assert response.status_code == 502
    assert response.json()["code"] == "ORIGINAL_STORE_FAILED"
    assert after == before
    assert usage == {"originals": 1, "bytes": (docs / PDF).stat().st_size}


def test_past_the_cap_a_file_is_indexed_without_its_original(
    app_client: AppFactory, upload: Upload, docs: Path
) -> None:
    with app_client(originals_max_bytes=(docs / OTHER_PDF).stat().st_size + 10) as client:
        assert upload(client, docs / OTHER_PDF, file_id="small", collection_name=KB).status_code == 200
        response = upload(client, docs / PDF, file_id="paper", collection_name=KB)
        usage = originals(client)
        metrics = client.get("/metrics").text
    assert response.status_code == 200
    assert response.json()["chunks_count"] > 0
    assert usage == {"originals": 1, "bytes": (docs / OTHER_PDF).stat().st_size}
    assert "ingest_originals_skipped_total 1.0" in metrics


def test_with_originals_off_the_stats_say_so(app_client: AppFactory, upload: Upload, docs: Path) -> None:
    with app_client(keep_originals=False) as client:
        assert upload(client, docs / PDF, file_id="paper", collection_name=KB).status_code == 200
        response = client.get(f"/api/v1/collections/{KB}/stats")
    assert response.json()["originals"] is None


def test_an_upload_open_webui_indexes_through_the_loader_keeps_its_original(app_client: AppFactory, docs: Path) -> None:
    file_id = str(uuid.uuid4())
    with app_client(loader_index_uploads=True) as client:
        response = client.put(
            "/process",
            content=(docs / PDF).read_bytes(),
            headers={"Content-Type": "application/pdf", "X-Filename": f"{file_id}_paper.pdf"},
        )
        assert response.status_code == 200, response.text
        usage = originals(client, f"file-{file_id}")
    assert usage == {"originals": 1, "bytes": (docs / PDF).stat().st_size}

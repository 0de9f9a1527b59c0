"""Liveness and readiness."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from fastapi.testclient import TestClient

from ingestion_service.runtime import ServiceHooks
from rag_runtime.embedding import ContractEmbedder

from ...conftest import bootstrap_with  # noqa: TID252

if TYPE_CHECKING:
    from ...conftest import AppFactory, MakeSettings  # noqa: TID252


def test_liveness_needs_no_auth(client: TestClient) -> None:
    response = client.get("/health", headers={"Authorization": ""})
    assert response.json() == {"status": "ok"}


def test_ready_after_warm_up(client: TestClient) -> None:
    body = client.get("/health/ready").json()
    assert body["status"] == "ok"
    assert body["ocr"]["enabled"] is True
    assert body["ocr"]["languages"] == ["eng"]
    assert "eng" in body["ocr"]["available"]


class SlowEmbedder(ContractEmbedder):
    """Warm-up blocks until the test lets it finish."""

    release = threading.Event()

    def warm_up(self) -> None:
        self.release.wait(timeout=30)
        super().warm_up()


def test_not_ready_until_the_pipeline_is_warm(app_client: AppFactory, make_test_settings: MakeSettings) -> None:
    slow = SlowEmbedder(make_test_settings())
    with app_client(hooks=ServiceHooks(embedder=slow), ready=False) as client:
        response = client.get("/health/ready")
        assert response.status_code == 503
        assert response.json()["detail"] == {"pipeline": "warming up"}
        ingest = client.put("/api/v1/ingest", json={"x": 1})
        assert ingest.status_code == 422  # the JSON body is validated before readiness
        # A valid JSON request is refused for readiness alone, before S3 is touched.
        valid = {
            "s3_bucket": "openwebui",
            "s3_key": "k",
            "file_id": "a",
            "filename": "a.md",
            "collection_name": "file-a",
            "user_id": "u",
        }
        not_ready = client.put("/api/v1/ingest", json=valid)
        assert not_ready.status_code == 503, not_ready.text
        assert not_ready.json()["code"] == "PIPELINE_FAILED"
        assert not_ready.json()["error"] == "The service is not ready yet."
        multipart = client.put(
            "/api/v1/ingest",
            data={"file_id": "a", "filename": "a.md", "collection_name": "file-a", "user_id": "u"},
            files={"file": ("a.md", b"# a")},
        )
        assert multipart.status_code == 503
        assert multipart.json()["code"] == "PIPELINE_FAILED"
        assert client.get("/health").status_code == 200
        SlowEmbedder.release.set()
        for _ in range(500):
            if client.get("/health/ready").status_code == 200:
                break
            threading.Event().wait(0.02)
        assert client.get("/health/ready").status_code == 200


def test_collection_not_matching_the_contract_is_not_ready(
    app_client: AppFactory, make_test_settings: MakeSettings
) -> None:
    # The collection was built without sparse vectors; this service writes them.
    other = make_test_settings(enable_sparse_embeddings=False)
    bootstrap_with(other)
    with app_client(qdrant_index=other.qdrant_index, ready=False) as client:
        response = client.get("/health/ready")
        assert response.status_code == 503
        problem = response.json()["detail"]["qdrant"]
        assert "SPARSE_EMBEDDING_MODEL" in problem
        assert "None" in problem

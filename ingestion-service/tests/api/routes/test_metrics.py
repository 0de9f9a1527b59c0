"""GET /metrics."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fastapi.testclient import TestClient

if TYPE_CHECKING:
    from ...conftest import AppFactory, Upload  # noqa: TID252


def test_series_after_an_ingest(client: TestClient, upload: Upload, docs: Path) -> None:
    upload(client, docs / "md/docling__wiki.md")
    upload(client, docs / "md/docling__wiki.md", overwrite="bogus")
    text = client.get("/metrics").text
    assert 'ingest_requests_total{code="OK",outcome="success"} 1.0' in text
    assert 'ingest_requests_total{code="INVALID_REQUEST",outcome="failure"} 1.0' in text
    for stage in (
        "converter",
        "splitter",
        "finalizer",
        "regions",
        "dense_embedder",
        "sparse_embedder",
        "embedding_guard",
        "writer",
    ):
        assert f'pipeline_stage_duration_seconds_count{{stage="{stage}"}} 1.0' in text
    assert "ingest_duration_seconds_count 2.0" in text
    assert "ingest_chunks_count 1.0" in text
    assert "ingest_document_bytes_count 1.0" in text
    assert "ingest_empty_total 0.0" in text


def test_disabled_metrics_are_404(app_client: AppFactory) -> None:
    with app_client(metrics_enabled=False) as client:
        assert client.get("/metrics").status_code == 404


def test_two_apps_in_one_process_keep_separate_registries(app_client: AppFactory, upload: Upload, docs: Path) -> None:
    with app_client() as first, app_client() as second:
        upload(first, docs / "md/unstructured__simple-table.md")
        assert 'outcome="success"} 1.0' in first.get("/metrics").text
        assert 'outcome="success"' not in second.get("/metrics").text

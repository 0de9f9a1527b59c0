from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from rag_runtime.store import ChunkStore

from ...conftest import AUTH, make_settings  # noqa: TID252


def test_metrics_need_the_key(api: TestClient) -> None:
    response = api.get("/metrics")
    assert response.status_code == 401


def test_metrics_report_paths_and_stages(api: TestClient) -> None:
    api.post("/search", json={"queries": ["Eiffel"], "collection_names": ["kb-a"]}, headers=AUTH)
    text = api.get("/metrics", headers=AUTH).text
    assert 'search_path_total{path="native_hybrid"} 1.0' in text
    assert 'retrieval_stage_duration_seconds_count{stage="embed"} 1.0' in text
    # One observation per store call: the term legs, the vector legs, the read of the fused hits.
    assert 'retrieval_stage_duration_seconds_count{stage="qdrant"} 3.0' in text
    assert 'search_requests_total{code="",outcome="ok"} 1.0' in text


def test_metrics_disabled_is_404(app_factory: Callable[..., TestClient], seeded: ChunkStore) -> None:
    api = app_factory(make_settings(metrics_enabled=False), seeded)
    assert api.get("/metrics", headers=AUTH).status_code == 404


def test_two_apps_in_one_process_keep_separate_metrics(
    app_factory: Callable[..., TestClient], seeded: ChunkStore
) -> None:
    first = app_factory(make_settings(), seeded)
    second = app_factory(make_settings(), seeded)
    first.post("/search", json={"queries": ["Eiffel"], "collection_names": ["kb-a"]}, headers=AUTH)
    assert 'search_path_total{path="native_hybrid"} 1.0' in first.get("/metrics", headers=AUTH).text
    assert "search_path_total{" not in second.get("/metrics", headers=AUTH).text

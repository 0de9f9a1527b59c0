"""The app factory's own query models: what the service loads when no embedder is handed to it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient

from shared_contract.embedding.fastembed_internals import onnx_session
from shared_contract.store import ChunkStore

from .conftest import AUTH, make_settings  # noqa: TID252

SEARCH = {"queries": ["When was the Eiffel Tower completed?"], "collection_names": ["kb-a"], "k": 3}


def test_the_service_searches_with_bm42s_tokenizer_alone(
    app_factory: Callable[..., TestClient], seeded: ChunkStore
) -> None:
    api = app_factory(make_settings(), seeded, embedder=None)

    response = api.post("/search", json=SEARCH, headers=AUTH)

    assert response.status_code == 200, response.text
    assert "Eiffel Tower in Paris" in response.json()["documents"][0][0]
    sparse = api.app.state.search.embedder.sparse  # type: ignore[attr-defined]
    assert sparse is not None
    assert sparse.tokenizer_only
    assert onnx_session(sparse.model) is None


def test_with_memory_on_the_service_loads_bm42s_network_for_the_facts(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, tmp_path: Path
) -> None:
    api = app_factory(make_settings(enable_memory=True, memory_path=tmp_path / "memory"), seeded, embedder=None)

    sparse = api.app.state.search.embedder.sparse  # type: ignore[attr-defined]
    assert sparse is not None
    assert not sparse.tokenizer_only
    assert onnx_session(sparse.model) is not None

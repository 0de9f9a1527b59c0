"""The app factory's own query models: what the service loads when no embedder is handed to it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rag_runtime.embedding.fastembed_internals import onnx_session
from rag_runtime.store import ChunkStore
from retrieval_agent.main import SHUTDOWN_GRACE_SECONDS, create_app, server_config

from .conftest import API_KEY, AUTH, make_settings  # noqa: TID252

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


def _run_service(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    # In an empty folder: no .env of the checkout is read.
    environment = {**os.environ, "API_KEY": API_KEY, **env}
    command = [sys.executable, "-m", "retrieval_agent"]
    return subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"CHAT_TIMEOUT": "0"}, "CHAT_TIMEOUT"),
        ({"ENABLE_AGENTIC_RAG": "true", "AGENT_API_BASE_URL": ""}, "AGENT_API_BASE_URL"),
        (
            {
                "ENABLE_MEMORY": "true",
                "MEMORY_MODEL": "anthropic/claude-sonnet-4-5",
                "CHAT_UPSTREAM_BASE_URL": "http://127.0.0.1:9/v1",
            },
            "MEMORY_MODEL",
        ),
    ],
    ids=["settings", "agentic", "memory-model"],
)
def test_an_invalid_setting_stops_the_service_with_one_line_naming_it(
    tmp_path: Path, env: dict[str, str], variable: str
) -> None:
    result = _run_service(tmp_path, **env)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith(f"{variable}: ")


def test_the_server_bounds_its_graceful_shutdown() -> None:
    config = server_config(create_app(make_settings()), make_settings())
    assert config.timeout_graceful_shutdown == SHUTDOWN_GRACE_SECONDS

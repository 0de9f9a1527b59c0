"""POST /search ``mode``: a caller (the Open WebUI Function's valve) picks linear or agentic per request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from rag_runtime.store import ChunkStore

from ...agent.agent_support import Script, call, say  # noqa: TID252
from ...conftest import AUTH, make_settings  # noqa: TID252

QUESTION = {"queries": ["When was the Eiffel Tower completed?"], "collection_names": ["kb-a"], "k": 3}


def agentic(app_factory: Callable[..., TestClient], store: ChunkStore, script: Script) -> TestClient:
    settings = make_settings(enable_agentic_rag=True, agent_timeout=10.0, agent_include_raw_query=False)
    return app_factory(settings, store, query_model=script.model())


def search(api: TestClient, **extra: Any) -> Any:
    return api.post("/search", json={**QUESTION, **extra}, headers=AUTH)


def test_mode_linear_skips_the_agent_where_it_is_enabled(
    app_factory: Callable[..., TestClient], seeded: ChunkStore
) -> None:
    script = Script([lambda _: call("retrieve", queries=["Eiffel Tower"]), lambda _: say("DONE")])
    api = agentic(app_factory, seeded, script)
    response = search(api, mode="linear")
    assert response.status_code == 200, response.text
    assert "x-rag-agent-outcome" not in response.headers
    assert script.seen == []
    assert "Eiffel Tower" in response.json()["documents"][0][0]


def test_mode_agentic_runs_the_agent(app_factory: Callable[..., TestClient], seeded: ChunkStore) -> None:
    script = Script([lambda _: call("retrieve", queries=["Eiffel Tower"]), lambda _: say("DONE")])
    response = search(agentic(app_factory, seeded, script), mode="agentic")
    assert response.status_code == 200, response.text
    assert response.headers["x-rag-agent-outcome"] == "answered"
    assert script.seen


def test_mode_agentic_without_the_agent_is_a_422_that_says_how(api: TestClient) -> None:
    response = search(api, mode="agentic")
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "INVALID_REQUEST"
    assert "ENABLE_AGENTIC_RAG=true" in response.json()["error"]


def test_an_unknown_mode_is_a_422_naming_the_field(api: TestClient) -> None:
    response = search(api, mode="fast")
    assert response.status_code == 422
    assert "mode" in response.json()["error"]

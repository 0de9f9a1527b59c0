"""The RAG proxy's per-request fields on /v1/chat/completions, over HTTP: ``rag_top_k`` and ``rag_enable_tools``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rag_runtime.store import ChunkStore

from ..conftest import AUTH  # noqa: TID252
from ..scripted_llm import ScriptedLLM, text  # noqa: TID252
from .chat_support import chat_body, chat_settings, system_text, tool_names  # noqa: TID252

ChatApi = Callable[..., tuple[TestClient, ScriptedLLM]]
_PASSAGE_NUMBER = re.compile(r"^\[(\d+)\] ", re.MULTILINE)


@pytest.fixture
def chat_api(serve: Callable[[Any], str], app_factory: Callable[..., TestClient], seeded: ChunkStore) -> ChatApi:
    def build(**overrides: Any) -> tuple[TestClient, ScriptedLLM]:
        llm = ScriptedLLM(lambda body: text("ok [1]"))
        return app_factory(chat_settings(f"{serve(llm.app())}/v1", **overrides), seeded), llm

    return build


def post(client: TestClient, body: dict[str, Any]) -> Any:
    return client.post("/v1/chat/completions", json=body, headers=AUTH)


def test_rag_top_k_sets_the_passages_of_the_turn_and_is_not_forwarded(chat_api: ChatApi) -> None:
    client, llm = chat_api(chat_context_k=3)
    response = post(client, chat_body("scripted@kb-a", rag_top_k=1))
    assert response.status_code == 200, response.text
    assert len(response.json()["rag_sources"]) == 1
    (sent,) = llm.requests
    assert _PASSAGE_NUMBER.findall(system_text(sent)) == ["1"]
    assert "rag_top_k" not in sent


def test_rag_top_k_above_the_search_limit_is_an_invalid_request(chat_api: ChatApi) -> None:
    client, llm = chat_api()
    response = post(client, chat_body("scripted@kb-a", rag_top_k=101))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "rag_top_k" in error["message"]
    assert llm.requests == []


def test_rag_enable_tools_false_sends_no_tools_and_is_not_forwarded(chat_api: ChatApi) -> None:
    client, llm = chat_api()
    response = post(client, chat_body("scripted@kb-a", rag_enable_tools=False))
    assert response.status_code == 200, response.text
    (sent,) = llm.requests
    assert "tools" not in sent
    assert "rag_enable_tools" not in sent
    assert "read_full_document" not in system_text(sent)
    assert response.json()["rag_sources"]


def test_rag_enable_tools_true_does_not_turn_on_tools_the_server_disabled(chat_api: ChatApi) -> None:
    client, llm = chat_api(chat_rag_tools=False)
    response = post(client, chat_body("scripted@kb-a", rag_enable_tools=True))
    assert response.status_code == 200, response.text
    assert tool_names(llm.requests[0]) == []


def test_rag_enable_tools_true_keeps_the_tools(chat_api: ChatApi) -> None:
    client, llm = chat_api()
    response = post(client, chat_body("scripted@kb-a", rag_enable_tools=True))
    assert response.status_code == 200, response.text
    assert set(tool_names(llm.requests[0])) == {"read_full_document", "search"}

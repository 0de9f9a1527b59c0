"""The OpenAI-compatible chat endpoint black-box: a real `rag dev` with CHAT_UPSTREAM_BASE_URL pointing at a
scripted model on loopback, called with the official OpenAI client.

A document goes in through the real ingest API; the scripted model answers by naming the first passage
of the context the retrieval agent injected, so the answer proves retrieval ran before the model.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest
from integration_support import Stack, ingest_multipart, running_rag_dev
from scripted_llm_server import EMBEDDING, ScriptedLLMServer

UPSTREAM_KEY = "scripted-chat-upstream-key-0123456789"
BROWSER_ORIGIN = "http://localhost:3000"
HANDBOOK = (
    "Staff handbook of the harbour office. The canteen opens at half past eleven and closes at half past one; "
    "on Fridays it serves fish. Bicycles are parked in the basement, never in the corridors."
)
TIDES = "Tide tables for the inner harbour. High water on Monday is at six in the morning."


@dataclass
class ChatStack:
    client: openai.OpenAI
    retrieval: httpx.Client
    llm: ScriptedLLMServer
    tenant: str


@pytest.fixture(scope="module")
def chat(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChatStack]:
    if os.environ.get("INGESTION_BASE_URL"):
        pytest.skip("starts its own `rag dev` with a scripted chat model on loopback")
    workdir = tmp_path_factory.mktemp("chat")
    with ScriptedLLMServer() as llm:
        env = {
            "CHAT_UPSTREAM_BASE_URL": llm.url,
            "CHAT_UPSTREAM_API_KEY": UPSTREAM_KEY,
            "CHAT_DEFAULT_MODEL": "scripted",
            "CHAT_CONTEXT_K": "2",
            "CORS_ALLOW_ORIGINS": BROWSER_ORIGIN,
        }
        with running_rag_dev(workdir, stack.s3, env) as running:
            tenant = f"kb-chat-{secrets.token_hex(3)}"
            ingestion = running.ingestion()
            for name, content, file_id in [
                ("handbook.txt", HANDBOOK, "file-chat-handbook"),
                ("tides.txt", TIDES, "file-chat-tides"),
            ]:
                path = workdir / name
                path.write_text(content, encoding="utf-8")
                ingest_multipart(ingestion, path, file_id, tenant)
            client = openai.OpenAI(
                base_url=f"{running.retrieval_url}/v1", api_key=running.retrieval_key, max_retries=0, timeout=60
            )
            yield ChatStack(client, running.retrieval(), llm, tenant)
            client.close()


def test_chat_answers_from_the_knowledge_base(chat: ChatStack) -> None:
    completion = chat.client.chat.completions.create(
        model=f"scripted@{chat.tenant}", messages=[{"role": "user", "content": "When does the canteen open?"}]
    )
    answer = completion.choices[0].message.content or ""
    assert answer.startswith("According to handbook.txt")
    sources: list[dict[str, Any]] = (completion.model_extra or {})["rag_sources"]
    assert sources[0]["file_name"] == "handbook.txt"
    assert sources[0]["file_id"] == "file-chat-handbook"
    assert sources[0]["collection_name"] == chat.tenant
    assert "canteen opens at half past eleven" in sources[0]["text"]
    assert chat.llm.requests[-1]["model"] == "scripted"
    assert chat.llm.authorizations[-1] == f"Bearer {UPSTREAM_KEY}"


def test_chat_streams_with_sources_last(chat: ChatStack) -> None:
    stream = chat.client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "When is high water on Monday?"}],
        stream=True,
        extra_body={"collection_names": [chat.tenant]},
    )
    pieces: list[str] = []
    sources: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        sources.extend((chunk.model_extra or {}).get("rag_sources") or [])
        if (chunk.model_extra or {}).get("event"):
            # Open WebUI's source events, before any text: the SDK reads them as chunks without choices.
            assert not pieces
            events.append((chunk.model_extra or {})["event"])
    assert len(pieces) > 1
    assert "".join(pieces).startswith("According to tides.txt")
    assert sources[0]["file_name"] == "tides.txt"
    assert events[0]["type"] == "source"
    assert events[0]["data"]["source"]["name"] == "tides.txt"
    assert events[0]["data"]["metadata"][0]["file_id"] == sources[0]["file_id"]


def test_models_list_the_knowledge_base(chat: ChatStack) -> None:
    ids = [model.id for model in chat.client.models.list()]
    assert "scripted" in ids
    assert f"scripted@{chat.tenant}" in ids


def test_errors_are_openai_shaped(chat: ChatStack) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        chat.client.chat.completions.create(model="scripted@not a kb", messages=[{"role": "user", "content": "x"}])
    assert caught.value.code == "invalid_knowledge_base"
    response = chat.retrieval.post("/v1/chat/completions", json={"model": "scripted"})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_rag_top_k_and_rag_enable_tools_are_honoured_and_not_forwarded(chat: ChatStack) -> None:
    completion = chat.client.chat.completions.create(
        model=f"scripted@{chat.tenant}",
        messages=[{"role": "user", "content": "When does the canteen open?"}],
        extra_body={"rag_top_k": 1, "rag_enable_tools": False},
    )
    assert len((completion.model_extra or {})["rag_sources"]) == 1
    sent = chat.llm.requests[-1]
    assert "tools" not in sent
    assert "rag_top_k" not in sent
    assert "rag_enable_tools" not in sent


def test_embeddings_are_passed_to_the_upstream_with_its_key(chat: ChatStack) -> None:
    embedding = chat.client.embeddings.create(model="scripted-embedder", input="harbour")
    assert embedding.data[0].embedding == EMBEDDING["data"][0]["embedding"]
    assert chat.llm.paths[-1] == "/v1/embeddings"
    assert chat.llm.authorizations[-1] == f"Bearer {UPSTREAM_KEY}"


def test_a_browser_preflight_is_answered(chat: ChatStack) -> None:
    preflight = {"Origin": BROWSER_ORIGIN, "Access-Control-Request-Method": "POST"}
    # Sent as a browser does: without the API key.
    response = httpx.options(chat.retrieval.base_url.join("/v1/chat/completions"), headers=preflight)
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == BROWSER_ORIGIN

"""GET /v1/models over HTTP: chat models only, knowledge bases as ``<model>@<kb>`` with their names, as
CHAT_MODELS, CHAT_KNOWLEDGE_BASE_MODELS and CHAT_KNOWLEDGE_BASE_NAMES configure it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore
from retrieval_agent.chat.catalog import is_chat_model
from retrieval_agent.chat.upstream import UpstreamModel
from shared_contract import ContractConfigError

from ..conftest import AUTH, add_chunk, chunk_meta  # noqa: TID252
from .chat_support import chat_settings  # noqa: TID252


@dataclass
class ModelServer:
    """An upstream's model list: ``entries`` on GET /v1/models, LiteLLM's ``model_info`` on GET
    /v1/model/info when given (else a 404, as any other upstream answers it); every path asked is recorded."""

    entries: list[dict[str, Any]]
    model_info: list[dict[str, Any]] | None = None
    asked: list[str] = field(default_factory=lambda: list[str]())

    async def _models(self, request: Request) -> Response:
        self.asked.append(request.url.path)
        return JSONResponse({"object": "list", "data": self.entries})

    async def _info(self, request: Request) -> Response:
        self.asked.append(request.url.path)
        if self.model_info is None:
            return Response('{"detail": "Not Found"}', status_code=404, media_type="application/json")
        return JSONResponse({"data": self.model_info})

    def app(self) -> Starlette:
        return Starlette(
            routes=[Route("/v1/models", self._models), Route("/v1/model/info", self._info)],
        )


Catalog = Callable[..., tuple[TestClient, ModelServer]]


@pytest.fixture
def catalog(serve: Callable[[Any], str], app_factory: Callable[..., TestClient], seeded: ChunkStore) -> Catalog:
    def build(
        entries: list[dict[str, Any]], *, model_info: list[dict[str, Any]] | None = None, **overrides: Any
    ) -> tuple[TestClient, ModelServer]:
        upstream = ModelServer(entries, model_info)
        return app_factory(chat_settings(f"{serve(upstream.app())}/v1", **overrides), seeded), upstream

    return build


def listed(client: TestClient) -> list[dict[str, Any]]:
    response = client.get("/v1/models", headers=AUTH)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "list"
    cards: list[dict[str, Any]] = body["data"]
    return cards


def ids(entries: list[str]) -> list[dict[str, Any]]:
    return [{"id": name, "object": "model", "owned_by": "someone"} for name in entries]


def test_only_chat_models_are_listed_and_the_default_model_with_each_knowledge_base(
    catalog: Catalog, seeded: ChunkStore, embedder: ContractEmbedder
) -> None:
    # An Open WebUI per-file tenant and a memory tenant: no knowledge bases to offer.
    async def add_tenants() -> None:
        for tenant in ("file-0123", "user-memory-42"):
            await add_chunk(seeded, embedder, f"{tenant}-0", "Some text.", chunk_meta(tenant, "x.txt", 1, 0))

    anyio.run(add_tenants)
    upstream_names = ["llama3.1:8b", "nomic-embed-text:latest", "all-minilm:l6-v2", "bge-m3", "whisper-1", "qwen2.5:7b"]
    client, _ = catalog(ids(upstream_names))
    cards = listed(client)
    assert [card["id"] for card in cards] == [
        "llama3.1:8b",
        "qwen2.5:7b",
        "scripted",  # CHAT_DEFAULT_MODEL, added: the upstream does not list it
        "scripted@kb-a",
        "scripted@kb-b",
        "scripted@kb-c",
    ]
    assert [card["name"] for card in cards[:3]] == ["llama3.1:8b", "qwen2.5:7b", "scripted"]
    # Without CHAT_KNOWLEDGE_BASE_NAMES a knowledge base is shown by its collection name.
    assert cards[3]["name"] == "kb-a (scripted)"
    assert {card["owned_by"] for card in cards[3:]} == {"rag"}


def test_what_the_upstream_marks_a_model_as_decides_over_its_name(catalog: Catalog) -> None:
    entries = [
        {"id": "embedding-tuned-chat", "type": "chat"},  # Together's type: a chat model, whatever its name
        {"id": "house-vectors", "mode": "embedding"},
        {"id": "mistral-large", "capabilities": {"completion_chat": True, "vision": False}},
        {"id": "mistral-ocr", "capabilities": {"completion_chat": False, "ocr": True}},
        {"id": "granite", "capabilities": ["completion", "tools"]},  # Ollama's capabilities
        {"id": "vectors", "capabilities": ["embedding"]},
        {"id": "claude-sonnet-4-5", "type": "model"},  # Anthropic's type says nothing: the name decides
        {"id": "voyage-embedding", "type": "model"},
        {"id": "proxy-chat"},
        {"id": "proxy-ranker"},
    ]
    # A LiteLLM proxy says what its models are in /model/info.
    model_info = [
        {"model_name": "proxy-chat", "model_info": {"mode": "chat"}},
        {"model_name": "proxy-ranker", "model_info": {"mode": "rerank"}},
    ]
    client, upstream = catalog(entries, model_info=model_info, chat_default_model="proxy-chat")
    names = [card["id"] for card in listed(client) if "@" not in card["id"]]
    assert names == ["embedding-tuned-chat", "mistral-large", "granite", "claude-sonnet-4-5", "proxy-chat"]
    assert sorted(upstream.asked) == ["/v1/model/info", "/v1/models"]


def test_an_upstream_without_model_info_is_judged_by_its_model_list(catalog: Catalog) -> None:
    client, upstream = catalog(ids(["gpt-4o-mini", "text-embedding-3-small", "tts-1", "dall-e-3"]))
    assert [card["id"] for card in listed(client) if "@" not in card["id"]] == ["gpt-4o-mini", "scripted"]
    assert "/v1/model/info" in upstream.asked  # answered 404: nothing more said


def test_a_model_list_past_the_byte_limit_counts_as_none(catalog: Catalog) -> None:
    client, upstream = catalog(ids([f"model-{n:05}" for n in range(5000)]), chat_max_upstream_bytes=64 * 1024)
    assert [card["id"] for card in listed(client) if "@" not in card["id"]] == ["scripted"]
    assert "/v1/models" in upstream.asked


def test_chat_models_lists_exactly_those_and_the_upstream_is_not_asked(catalog: Catalog) -> None:
    client, upstream = catalog(ids(["m1", "m2", "m3"]), chat_models="m2, anthropic/claude-sonnet-4-5, m2")
    names = [card["id"] for card in listed(client) if "@" not in card["id"]]
    assert names == ["m2", "anthropic/claude-sonnet-4-5", "scripted"]
    assert upstream.asked == []


def test_knowledge_base_names_and_models_shape_the_knowledge_base_cards(catalog: Catalog) -> None:
    client, _ = catalog(
        ids(["m1", "m2"]),
        chat_knowledge_base_models="*",
        chat_knowledge_base_names=json.dumps({"kb-a": "Company handbook", "kb-zz": "Not a tenant"}),
        chat_knowledge_bases="kb-a,kb-b",
    )
    cards = {card["id"]: card["name"] for card in listed(client)}
    assert cards == {
        "m1": "m1",
        "m2": "m2",
        "scripted": "scripted",
        "m1@kb-a": "Company handbook (m1)",
        "m2@kb-a": "Company handbook (m2)",
        "scripted@kb-a": "Company handbook (scripted)",
        "m1@kb-b": "kb-b (m1)",
        "m2@kb-b": "kb-b (m2)",
        "scripted@kb-b": "kb-b (scripted)",
    }


def test_knowledge_base_models_can_name_other_models_than_the_default(catalog: Catalog) -> None:
    client, _ = catalog(ids(["m1", "m2"]), chat_knowledge_base_models="m2", chat_knowledge_bases="kb-c")
    assert [card["id"] for card in listed(client)] == ["m1", "m2", "scripted", "m2@kb-c"]


@pytest.mark.parametrize(
    "value",
    ["not json", '["kb-a"]', '{"kb-a": 3}', '{"kb-a": ""}', '{"kb-a": "two\\nlines"}', '{"Not A Name!": "x"}'],
)
def test_knowledge_base_names_that_are_no_json_object_of_names_are_refused(value: str) -> None:
    with pytest.raises(ContractConfigError, match="CHAT_KNOWLEDGE_BASE_NAMES"):
        chat_settings(None, chat_knowledge_base_names=value)


@pytest.mark.parametrize(
    "name",
    [
        "text-embedding-3-small",
        "nomic-embed-text:latest",
        "mxbai-embed-large",
        "all-minilm:l6-v2",
        "BAAI/bge-m3",
        "bge-reranker-v2-m3",
        "intfloat/multilingual-e5-large",
        "thenlper/gte-large",
        "jina-reranker-v2-base-multilingual",
        "whisper-1",
        "gpt-4o-mini-tts",
        "gpt-4o-transcribe",
        "dall-e-3",
        "gpt-image-1",
        "omni-moderation-latest",
        "davinci-002",
    ],
)
def test_unmarked_models_named_like_embedding_speech_or_image_models_are_no_chat_models(name: str) -> None:
    assert not is_chat_model(UpstreamModel(name))


@pytest.mark.parametrize(
    "name",
    [
        "gpt-4o-mini",
        "gpt-5",
        "o3-mini",
        "llama3.1:8b",
        "qwen2.5:7b-instruct",
        "gemini-2.5-pro",
        "claude-sonnet-4-5",
        "deepseek-r1:8b",
        "mistral-small3.2",
        "meta-llama/Llama-3.1-8B-Instruct",
        "gemma3:27b",
    ],
)
def test_unmarked_chat_models_are_chat_models(name: str) -> None:
    assert is_chat_model(UpstreamModel(name))

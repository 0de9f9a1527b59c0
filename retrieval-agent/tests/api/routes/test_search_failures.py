"""Failures are errors with a status and a code, never an empty list; fail-open paths are counted."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.http import NOT_JSON_MESSAGE, hint_for
from rag_runtime.store import ChunkStore
from retrieval_agent.adapters.reranker import HttpReranker
from retrieval_agent.error_table import STORE_REJECTED_HINT
from shared_contract import StoreRequestError

from ...agent.agent_support import Script, call, say  # noqa: TID252
from ...conftest import AUTH, RecordingStore, make_settings  # noqa: TID252
from ...contract_support import RebuildableStore, names_the_mismatch  # noqa: TID252

QUERY = "When was the Eiffel Tower completed?"
BODY = {"queries": [QUERY], "collection_names": ["kb-a"], "k": 2}


def metric(api: TestClient, name: str) -> float:
    text = api.get("/metrics", headers=AUTH).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_qdrant_down_is_503_qdrant_unavailable(app_factory: Callable[..., TestClient]) -> None:
    settings = make_settings(qdrant_uri="http://127.0.0.1:1", qdrant_timeout=2)
    api = app_factory(settings, None)
    response = api.post("/search", json=BODY, headers={**AUTH, "X-Request-ID": "probe-1"})
    assert response.status_code == 503
    assert response.json() == {
        "status": False,
        "error": "Qdrant is unreachable or failed.",
        "code": "QDRANT_UNAVAILABLE",
        "hint": hint_for("QDRANT_UNAVAILABLE"),
        "request_id": "probe-1",
    }
    ready = api.get("/health/ready")
    assert ready.status_code == 503
    assert ready.json()["code"] == "QDRANT_UNAVAILABLE"


@pytest.mark.parametrize("hybrid", [True, False])
def test_missing_collection_is_503_not_empty(
    app_factory: Callable[..., TestClient], store_factory: Callable[..., ChunkStore], hybrid: bool
) -> None:
    api = app_factory(make_settings(enable_hybrid_search=hybrid), store_factory())
    response = api.post("/search", json=BODY, headers=AUTH)
    assert response.status_code == 503
    assert response.json()["code"] == "COLLECTION_MISSING"


class _RejectingStore(RecordingStore):
    async def query(self, request: Any) -> Any:
        raise StoreRequestError("Wrong input: vector dimension error")


def test_a_request_the_store_rejects_is_500_search_failed(
    app_factory: Callable[..., TestClient], seeded: ChunkStore
) -> None:
    api = app_factory(make_settings(), _RejectingStore(seeded))
    response = api.post("/search", json=BODY, headers=AUTH)
    assert response.status_code == 500
    request_id = response.headers["x-request-id"]
    assert response.json() == {
        "status": False,
        "error": "Qdrant rejected the search request.",
        "code": "SEARCH_FAILED",
        "hint": STORE_REJECTED_HINT,
        "request_id": request_id,
    }
    assert metric(api, 'search_requests_total{code="SEARCH_FAILED"') == 1


def test_a_vanished_text_index_still_answers_and_is_counted(
    app_factory: Callable[..., TestClient], seeded: ChunkStore
) -> None:
    api = app_factory(make_settings(), RecordingStore(seeded, fail_text_queries=True))
    response = api.post("/search", json=BODY, headers=AUTH)
    assert response.status_code == 200
    assert "Eiffel Tower in Paris" in response.json()["documents"][0][0]
    assert metric(api, "lexical_retries_total") == 1


class _BrokenDense:
    model_name = "sentence-transformers/all-MiniLM-L6-v2"
    max_tokens = 256

    def __init__(self) -> None:
        self.calls = 0

    def warm_up(self) -> None:
        return None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls == 1:  # the start-up dimension probe succeeds
            return [[0.1] * 384 for _ in texts]
        raise ConnectionError("embedding endpoint down")


def test_embedder_failure_is_503_embedding_failed(app_factory: Callable[..., TestClient], seeded: ChunkStore) -> None:
    settings = make_settings(enable_hybrid_search=False)
    broken = ContractEmbedder(settings, sparse=False, dense_backend=_BrokenDense(), allow_fused=False)
    api = app_factory(settings, seeded, embedder=broken)
    response = api.post("/search", json=BODY, headers=AUTH)
    assert response.status_code == 503
    assert response.json()["code"] == "EMBEDDING_FAILED"
    assert metric(api, 'search_requests_total{code="EMBEDDING_FAILED"') == 1


def test_reranker_failure_fails_open_and_is_counted(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, serve: Callable[[Any], str]
) -> None:
    async def broken(_: Request) -> JSONResponse:
        return JSONResponse({"error": "model crashed"}, status_code=500)

    base = serve(Starlette(routes=[Route("/v1/rerank", broken, methods=["POST"])]))
    settings = make_settings(enable_reranking=True, reranker_api_base_url=base)
    api = app_factory(settings, seeded)
    response = api.post("/search", json=BODY, headers=AUTH)
    assert response.status_code == 200
    documents = response.json()["documents"][0]
    assert len(documents) == 2
    assert "Eiffel Tower in Paris" in documents[0]
    assert metric(api, 'reranker_failures_total{reason="http_status"}') == 1


def test_reranker_reorders_candidates(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, serve: Callable[[Any], str]
) -> None:
    seen: list[dict[str, Any]] = []

    async def rerank(request: Request) -> JSONResponse:
        payload = await request.json()
        seen.append(payload)
        # Prefer anything about cells, whatever retrieval thought (probabilities, as TEI answers).
        scores = [0.97 if "cell" in doc else 0.01 * index for index, doc in enumerate(payload["documents"])]
        return JSONResponse({"results": [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]})

    base = serve(Starlette(routes=[Route("/v1/rerank", rerank, methods=["POST"])]))
    settings = make_settings(enable_reranking=True, reranker_api_base_url=base, reranker_model="my-reranker")
    api = app_factory(settings, seeded)
    data = api.post("/search", json=BODY, headers=AUTH).json()
    assert "Mitochondria" in data["documents"][0][0]
    # An HTTP reranker's score is already a probability: it is the relevance.
    assert data["distances"][0][0] == 0.97
    assert seen[0]["model"] == "my-reranker"
    assert seen[0]["query"] == QUERY
    # k x INITIAL_RETRIEVAL_MULTIPLIER candidates were fetched (kb-a holds 5 chunks).
    assert len(seen[0]["documents"]) == 5
    assert seen[0]["top_n"] == 5


def test_a_reranker_returning_logits_gets_sigmoid_relevance(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, serve: Callable[[Any], str]
) -> None:
    async def rerank(request: Request) -> JSONResponse:
        documents = (await request.json())["documents"]
        scores = [9.0 if "cell" in doc else -4.0 for doc in documents]
        return JSONResponse({"results": [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]})

    base = serve(Starlette(routes=[Route("/v1/rerank", rerank, methods=["POST"])]))
    settings = make_settings(enable_reranking=True, reranker_api_base_url=base, reranker_score_scale="logit")
    distances = app_factory(settings, seeded).post("/search", json=BODY, headers=AUTH).json()["distances"][0]
    assert distances[0] == pytest.approx(1 / (1 + math.exp(-9.0)))
    assert distances[-1] == pytest.approx(1 / (1 + math.exp(4.0)))


def test_llm_failure_falls_back_to_last_user_message_and_is_counted(
    app_factory: Callable[..., TestClient], seeded: ChunkStore
) -> None:
    def fail(messages: list[ModelMessage], info: AgentInfo) -> Any:
        raise RuntimeError("LLM proxy down")

    settings = make_settings(enable_query_generation=True)
    api = app_factory(settings, seeded, query_model=FunctionModel(fail))
    body = {
        "queries": ["What is the powerhouse of the cell?"],
        "messages": [{"role": "user", "content": "What is the powerhouse of the cell?"}],
        "collection_names": ["kb-a"],
        "k": 1,
    }
    response = api.post("/search", json=body, headers=AUTH)
    assert response.status_code == 200
    assert "Mitochondria" in response.json()["documents"][0][0]
    assert metric(api, 'query_generation_fallbacks_total{reason="llm_error"}') == 1


def test_generated_queries_are_searched_and_merged(app_factory: Callable[..., TestClient], seeded: ChunkStore) -> None:
    from pydantic_ai.messages import ModelResponse, ToolCallPart

    prompts: list[str] = []

    def generate(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts.append(str(messages[-1].parts[-1].content))  # type: ignore[union-attr]
        tool = info.output_tools[0]
        return ModelResponse(
            parts=[ToolCallPart(tool.name, {"queries": ["Eiffel Tower completion year", "Mitochondria ATP"]})]
        )

    settings = make_settings(enable_query_generation=True)
    api = app_factory(settings, seeded, query_model=FunctionModel(generate))
    body = {
        "queries": ["and what about those two?"],
        "messages": [
            {"role": "user", "content": "Tell me about the Eiffel Tower and mitochondria"},
            {"role": "user", "content": "and what about those two?"},
        ],
        "collection_names": ["kb-a"],
        "k": 2,
    }
    data = api.post("/search", json=body, headers=AUTH).json()
    joined = " ".join(data["documents"][0])
    assert "Eiffel" in joined
    assert "Mitochondria" in joined
    assert "Tell me about the Eiffel Tower" in prompts[0]
    assert metric(api, "query_generation_fallbacks_total") == 0


def test_http_reranker_is_built_from_settings(app_factory: Callable[..., TestClient], seeded: ChunkStore) -> None:
    settings = make_settings(enable_reranking=True, reranker_api_base_url="http://127.0.0.1:1/v1")
    api = app_factory(settings, seeded)
    reranker = api.app.state.search.reranker  # type: ignore[attr-defined]
    assert isinstance(reranker, HttpReranker)
    assert reranker.url == "http://127.0.0.1:1/v1/rerank"
    # Unreachable reranker: still results, counted.
    response = api.post("/search", json=BODY, headers=AUTH)
    assert response.status_code == 200
    assert len(response.json()["documents"][0]) == 2
    assert metric(api, 'reranker_failures_total{reason="unreachable"}') == 1


@pytest.mark.parametrize(
    "headers",
    [{"Content-Type": "text/plain"}, {"Content-Type": "application/x-www-form-urlencoded"}, {}],
    ids=["text-plain", "form", "none"],
)
def test_a_search_body_not_sent_as_json_is_415_naming_the_header(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, headers: dict[str, str]
) -> None:
    api = app_factory(make_settings(), seeded)
    body = json.dumps(BODY).encode()
    response = api.post("/search", content=body, headers={**AUTH, **headers})
    assert response.status_code == 415
    assert response.json()["code"] == "INVALID_REQUEST"
    assert response.json()["error"] == NOT_JSON_MESSAGE
    accepted = api.post("/search", content=body, headers={**AUTH, "Content-Type": "application/json; charset=utf-8"})
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["documents"][0]


def refused_naming_the_mismatch(response: Any) -> None:
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["code"] == "COLLECTION_MISMATCH"
    assert body["hint"] == hint_for("COLLECTION_MISMATCH")
    assert names_the_mismatch(body["error"])


@pytest.mark.parametrize("mode", ["linear", "agentic"])
def test_a_contract_mismatch_refuses_search_naming_the_setting_until_it_is_fixed(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, mode: str
) -> None:
    store = RebuildableStore(seeded)
    script = Script([lambda _: call("retrieve", queries=["Eiffel Tower"]), lambda _: say("DONE")])
    settings = make_settings(enable_agentic_rag=True, agent_timeout=10.0)
    api = app_factory(settings, store, query_model=script.model())
    store.rebuild()
    assert api.get("/health/ready").status_code == 503
    refused_naming_the_mismatch(api.post("/search", json={**BODY, "mode": mode}, headers=AUTH))
    assert script.seen == []  # refused before the agent's model is asked
    assert metric(api, 'search_requests_total{code="COLLECTION_MISMATCH",outcome="error"}') == 1
    store.restore()
    assert api.get("/health/ready").status_code == 200
    answered = api.post("/search", json={**BODY, "mode": mode}, headers=AUTH)
    assert answered.status_code == 200, answered.text
    assert "1889" in answered.json()["documents"][0][0]

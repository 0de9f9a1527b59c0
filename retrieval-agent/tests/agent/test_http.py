"""Agentic /search end to end over HTTP: the app (TestClient) and a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore
from retrieval_agent.main import create_app
from retrieval_agent.settings import Settings
from shared_contract import ContractConfigError

from ..conftest import AUTH, make_settings  # noqa: TID252
from ..scripted_llm import (  # noqa: TID252
    Garbage,
    Hang,
    Script,
    ScriptedLLM,
    Status,
    completion,
    text,
    tool_call,
    tool_results,
    turn,
)

AGENT_KEY = "agent-secret-key-do-not-log-0123456789"
QUESTION = "When was the Eiffel Tower completed?"


def agent_config(base_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "enable_agentic_rag": True,
        "agent_api_base_url": base_url,
        "agent_api_key": AGENT_KEY,
        "agent_model": "proxy-model",
        "agent_timeout": 10.0,
    }
    values.update(overrides)
    return make_settings(**values)


def body(**overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        # Open WebUI's bypass mode: the last user message as the query, and the chat.
        "queries": [QUESTION],
        "messages": [{"role": "user", "content": QUESTION}],
        "collection_names": ["kb-a"],
        "k": 3,
    }
    values.update(overrides)
    return values


@pytest.fixture
def agent_api(
    serve: Callable[[Any], str], app_factory: Callable[..., TestClient], seeded: ChunkStore
) -> Callable[..., tuple[TestClient, ScriptedLLM]]:
    def build(script: Script, **overrides: Any) -> tuple[TestClient, ScriptedLLM]:
        llm = ScriptedLLM(script)
        base = serve(llm.app())
        return app_factory(agent_config(f"{base}/v1", **overrides), seeded), llm

    return build


def retrieve_then_done(payload: dict[str, Any]) -> dict[str, Any]:
    if turn(payload) == 0:
        return tool_call("retrieve", {"queries": ["Eiffel Tower completion"]})
    return text("DONE")


def metric(api: TestClient, line_start: str) -> float:
    for line in api.get("/metrics", headers=AUTH).text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_tool_call_returns_sources_in_open_webuis_shape(
    agent_api: Callable[..., tuple[TestClient, ScriptedLLM]],
) -> None:
    api, llm = agent_api(retrieve_then_done)
    response = api.post("/search", json=body(), headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.headers["X-RAG-Agent-Outcome"] == "answered"
    assert "X-RAG-Agent-Fallback" not in response.headers
    assert "X-RAG-Agent-Steps" not in response.headers  # only on request
    data = response.json()
    assert set(data) == {"documents", "metadatas", "distances"}
    assert len(data["documents"]) == len(data["metadatas"]) == len(data["distances"]) == 1
    assert "Eiffel Tower in Paris" in data["documents"][0][0]
    assert data["metadatas"][0][0]["name"] == "paris.pdf"
    assert all(0.0 <= value <= 1.0 for value in data["distances"][0])
    assert len(data["documents"][0]) == 3
    # What went over the wire: the model name as configured, the key, the three tools, strict schemas.
    first = llm.requests[0]
    assert first["model"] == "proxy-model"
    assert first["temperature"] == 0.0
    assert llm.authorizations[0] == f"Bearer {AGENT_KEY}"
    functions = {tool["function"]["name"]: tool["function"] for tool in first["tools"]}
    assert set(functions) == {"retrieve", "read_document", "list_documents"}
    assert all(function.get("strict") is True for function in functions.values())
    assert "collection" not in str(functions["retrieve"]["parameters"]).casefold()
    previews = tool_results(llm.requests[1])[0]
    assert len(previews["results"]) == 3
    assert all(len(item["text"]) <= 200 for item in previews["results"])
    assert metric(api, 'agent_requests_total{outcome="answered"}') == 1
    assert metric(api, 'agent_tool_calls_total{tool="retrieve"}') == 1
    assert metric(api, 'agent_model_tokens_total{direction="input"}') == 240
    assert metric(api, "agent_iterations_count") == 1


def test_strict_tools_can_be_turned_off(agent_api: Callable[..., tuple[TestClient, ScriptedLLM]]) -> None:
    api, llm = agent_api(retrieve_then_done, agent_strict_tools=False)
    assert api.post("/search", json=body(), headers=AUTH).status_code == 200
    assert all(not tool["function"].get("strict") for tool in llm.requests[0]["tools"])


def test_plain_text_queries_run_a_direct_search(agent_api: Callable[..., tuple[TestClient, ScriptedLLM]]) -> None:
    api, _ = agent_api(lambda _: text("1. mitochondria ATP\n2. powerhouse of the cell"))
    response = api.post(
        "/search", json=body(queries=None, messages=[{"role": "user", "content": "cells?"}]), headers=AUTH
    )
    assert response.status_code == 200
    assert response.headers["X-RAG-Agent-Outcome"] == "plain_text"
    assert "Mitochondria" in response.json()["documents"][0][0]


def test_a_model_that_loops_forever_is_capped(agent_api: Callable[..., tuple[TestClient, ScriptedLLM]]) -> None:
    api, llm = agent_api(
        lambda payload: tool_call("retrieve", {"queries": [f"Eiffel {turn(payload)}"]}), agent_max_iterations=2
    )
    response = api.post("/search", json=body(), headers={**AUTH, "X-RAG-Debug": "steps"})
    assert response.status_code == 200
    assert response.headers["X-RAG-Agent-Outcome"] == "iteration_cap"
    assert response.json()["documents"][0], "the capped run still answers"
    assert len(llm.requests) == 3  # two rounds granted, the third call stops the run
    steps = response.headers["X-RAG-Agent-Steps"]
    assert steps.count('"tool":"retrieve"') == 2


def test_a_model_that_hangs_past_the_timeout_returns_what_was_retrieved(
    agent_api: Callable[..., tuple[TestClient, ScriptedLLM]],
) -> None:
    def script(payload: dict[str, Any]) -> dict[str, Any] | Hang:
        return retrieve_then_done(payload) if turn(payload) == 0 else Hang(3.0)

    api, _ = agent_api(script, agent_timeout=1.0)
    response = api.post("/search", json=body(), headers=AUTH)
    assert response.status_code == 200
    assert response.headers["X-RAG-Agent-Outcome"] == "timeout"
    assert "Eiffel Tower in Paris" in response.json()["documents"][0][0]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_model_that_is_down_falls_back_to_linear(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, caplog: pytest.LogCaptureFixture
) -> None:
    api = app_factory(agent_config(f"http://127.0.0.1:{_closed_port()}/v1"), seeded)
    with caplog.at_level(logging.DEBUG):
        response = api.post("/search", json=body(), headers=AUTH)
    assert response.status_code == 200
    assert response.headers["X-RAG-Agent-Outcome"] == "fallback"
    assert response.headers["X-RAG-Agent-Fallback"] == "model_unreachable"
    assert "Eiffel Tower in Paris" in response.json()["documents"][0][0]
    assert metric(api, 'agent_fallbacks_total{reason="model_unreachable"}') == 1
    assert any("fell back to the linear pipeline" in record.getMessage() for record in caplog.records)
    assert AGENT_KEY not in caplog.text
    assert all(AGENT_KEY not in str(record.__dict__) for record in caplog.records)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Status(500), "model_error"),
        (Status(401, '{"error": {"message": "bad key"}}'), "model_error"),
        (Garbage(), "model_bad_output"),
        # JSON of a completion without a choice: pydantic-ai read it unguarded (IndexError, a 500).
        (
            {"id": "chatcmpl-empty", "object": "chat.completion", "created": 1, "model": "m", "choices": []},
            "model_bad_output",
        ),
    ],
)
def test_a_failing_or_garbled_model_falls_back_to_linear(
    agent_api: Callable[..., tuple[TestClient, ScriptedLLM]], reply: dict[str, Any] | Status | Garbage, reason: str
) -> None:
    api, _ = agent_api(lambda _: reply)
    response = api.post("/search", json=body(), headers=AUTH)
    assert response.status_code == 200
    assert response.headers["X-RAG-Agent-Fallback"] == reason
    assert response.json()["documents"][0]


def test_invalid_tool_calls_fall_back_after_the_retries(
    agent_api: Callable[..., tuple[TestClient, ScriptedLLM]],
) -> None:
    api, llm = agent_api(lambda _: tool_call("retrieve", {"query": "wrong argument name"}))
    response = api.post("/search", json=body(), headers=AUTH)
    assert response.status_code == 200
    assert response.headers["X-RAG-Agent-Fallback"] == "model_bad_output"
    assert len(llm.requests) == 3  # the first answer and two retries with the validation error


def test_a_tool_call_naming_another_collection_reads_nothing_outside(
    agent_api: Callable[..., tuple[TestClient, ScriptedLLM]],
) -> None:
    def script(payload: dict[str, Any]) -> dict[str, Any]:
        if turn(payload) == 0:
            return tool_call("retrieve", {"queries": ["secret code word BANANA"], "collection_names": ["kb-b"]})
        if turn(payload) == 1:
            return tool_call("read_document", {"file_id": "file-secret.txt"})
        return text("DONE")

    api, _ = agent_api(script)
    response = api.post(
        "/search",
        json=body(queries=None, messages=[{"role": "user", "content": "What is the secret code word?"}], k=10),
        headers=AUTH,
    )
    assert response.status_code == 200
    data = response.json()
    assert data["metadatas"][0], "kb-a was searched"
    assert {meta["collection_name"] for meta in data["metadatas"][0]} == {"kb-a"}
    assert not any("BANANA" in document for document in data["documents"][0])
    assert metric(api, "agent_tenant_violations_total") == 2


def test_debug_steps_header(agent_api: Callable[..., tuple[TestClient, ScriptedLLM]]) -> None:
    api, _ = agent_api(retrieve_then_done)
    response = api.post("/search", json=body(), headers={**AUTH, "X-RAG-Debug": "steps"})
    steps = response.json  # the body is unchanged
    assert set(steps()) == {"documents", "metadatas", "distances"}
    assert response.headers["X-RAG-Agent-Steps"].startswith('[{"tool":"retrieve","round":1,"queries":')


def test_agentic_mode_needs_an_endpoint(embedder: ContractEmbedder, seeded: ChunkStore) -> None:
    app = create_app(make_settings(enable_agentic_rag=True), embedder=embedder, store=seeded)
    with pytest.raises(ContractConfigError, match="AGENT_API_BASE_URL"), TestClient(app):
        pass


def test_linear_mode_sends_no_agent_headers(api: TestClient) -> None:
    response = api.post("/search", json=body(), headers={**AUTH, "X-RAG-Debug": "steps"})
    assert response.status_code == 200
    assert not {"X-RAG-Agent-Outcome", "X-RAG-Agent-Steps"} & set(response.headers)


def raw_tool_call(name: str, arguments: str) -> dict[str, Any]:
    """The model calls ``name`` with ``arguments`` exactly as given (not necessarily JSON)."""
    return completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_raw", "type": "function", "function": {"name": name, "arguments": arguments}}],
        },
        "tool_calls",
    )


@pytest.mark.parametrize("arguments", ["[" * 50_000, "[" * 5_000, '{"queries": ' + "[" * 5_000])
def test_deeply_nested_tool_arguments_fall_back_like_other_invalid_arguments(
    agent_api: Callable[..., tuple[TestClient, ScriptedLLM]], arguments: str
) -> None:
    api, llm = agent_api(lambda _: raw_tool_call("retrieve", arguments))
    response = api.post("/search", json=body(), headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.headers["X-RAG-Agent-Fallback"] == "model_bad_output"
    assert "Eiffel Tower in Paris" in response.json()["documents"][0][0]
    assert len(llm.requests) == 3  # the first answer and two retries, each told what was wrong


def test_text_nested_past_the_stack_is_no_query_and_the_question_is_searched(
    agent_api: Callable[..., tuple[TestClient, ScriptedLLM]],
) -> None:
    api, _ = agent_api(lambda _: text("[" * 5_000))
    response = api.post("/search", json=body(), headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.headers["X-RAG-Agent-Outcome"] == "plain_text"
    assert any("Eiffel Tower in Paris" in document for document in response.json()["documents"][0])


def test_an_ingested_before_of_the_last_representable_date_searches(
    agent_api: Callable[..., tuple[TestClient, ScriptedLLM]],
) -> None:
    def script(payload: dict[str, Any]) -> dict[str, Any]:
        if turn(payload) == 0:
            filters = {"ingested_after": "0001-01-01", "ingested_before": "9999-12-31"}
            return tool_call("retrieve", {"queries": ["Eiffel Tower completion"], "filters": filters})
        return text("DONE")

    api, _ = agent_api(script)
    response = api.post("/search", json=body(), headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.headers["X-RAG-Agent-Outcome"] == "answered"
    assert "Eiffel Tower in Paris" in response.json()["documents"][0][0]


def test_a_refused_long_key_keeps_the_log_line_and_the_steps_header_short(
    agent_api: Callable[..., tuple[TestClient, ScriptedLLM]], caplog: pytest.LogCaptureFixture
) -> None:
    key = "collection" + "x" * 20_000

    def script(payload: dict[str, Any]) -> dict[str, Any]:
        if turn(payload) == 0:
            return tool_call("retrieve", {"queries": ["Eiffel Tower completion"], key: "kb-b"})
        return text("DONE")

    api, _ = agent_api(script)
    with caplog.at_level(logging.WARNING):
        response = api.post("/search", json=body(), headers={**AUTH, "X-RAG-Debug": "steps"})
    assert response.status_code == 200, response.text
    steps = json.loads(response.headers["X-RAG-Agent-Steps"])
    assert [step["tool"] for step in steps] == ["refused", "retrieve"]
    assert steps[0]["reason"].startswith("argument 'collectionxxx")
    assert len(steps[0]["reason"]) < 120
    refusals = [record.getMessage() for record in caplog.records if "refused" in record.getMessage()]
    assert refusals
    assert all(len(message) < 300 for message in refusals)


def test_steps_over_the_header_budget_are_left_out_whole(
    agent_api: Callable[..., tuple[TestClient, ScriptedLLM]],
) -> None:
    # The second round's step is ~20 KB of file names full of the "},{" a cut would look for.
    names = ["no such file },{ " * 60] * 20

    def script(payload: dict[str, Any]) -> dict[str, Any]:
        if turn(payload) == 0:
            return tool_call("retrieve", {"queries": ["Eiffel Tower completion"]})
        if turn(payload) == 1:
            return tool_call("retrieve", {"queries": ["Eiffel"], "filters": {"file_names": names}})
        return text("DONE")

    api, _ = agent_api(script)
    response = api.post("/search", json=body(), headers={**AUTH, "X-RAG-Debug": "steps"})
    assert response.status_code == 200, response.text
    header = response.headers["X-RAG-Agent-Steps"]
    assert len(header.encode()) <= 16_000
    steps = json.loads(header)
    assert [step.get("tool") for step in steps] == ["retrieve", None]
    assert steps[0]["round"] == 1
    assert steps[1] == {"truncated": True, "omitted": 1}


def test_an_upstream_error_body_is_not_logged_at_warning(
    agent_api: Callable[..., tuple[TestClient, ScriptedLLM]], caplog: pytest.LogCaptureFixture
) -> None:
    echoed = json.dumps(
        {"error": {"message": f"ECHOED-PROMPT {QUESTION} Authorization: Bearer sk-upstream-0123456789abcdef"}}
    )
    api, _ = agent_api(lambda _: Status(500, echoed))
    with caplog.at_level(logging.DEBUG, logger="retrieval_agent"):
        response = api.post("/search", json=body(), headers=AUTH)
    assert response.status_code == 200
    assert response.headers["X-RAG-Agent-Fallback"] == "model_error"
    ours = [record for record in caplog.records if record.name.startswith("retrieval_agent")]
    warnings = [record.getMessage() for record in ours if record.levelno >= logging.WARNING]
    assert "agent model failed (model_error): ModelServerError (HTTP 500)" in warnings
    assert not [message for message in warnings if "ECHOED-PROMPT" in message]
    details = [
        record.getMessage() for record in ours if record.levelno == logging.DEBUG and "ECHOED" in record.getMessage()
    ]
    assert details, "the body is kept at DEBUG"
    assert all("sk-upstream" not in message and len(message) <= 600 for message in details)

"""/v1/chat/completions and /v1/models over HTTP: the app (TestClient) and a scripted upstream on loopback."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from rag_runtime.http import NOT_JSON_MESSAGE, REQUEST_FAILED
from rag_runtime.store import ChunkStore

from ..conftest import AUTH, BrokenStore  # noqa: TID252
from ..contract_support import RebuildableStore, names_the_mismatch  # noqa: TID252
from ..scripted_llm import (  # noqa: TID252
    Cut,
    Drip,
    Garbage,
    Script,
    ScriptedLLM,
    Status,
    text,
    tool_call,
    tool_calls,
    tool_results,
    turn,
)
from .chat_support import (  # noqa: TID252
    QUESTION,
    UPSTREAM_KEY,
    chat_body,
    chat_settings,
    chunks,
    sse_events,
    streamed_text,
    system_text,
    tool_names,
)

ChatApi = Callable[..., tuple[TestClient, ScriptedLLM]]


@pytest.fixture
def chat_api(serve: Callable[[Any], str], app_factory: Callable[..., TestClient], seeded: ChunkStore) -> ChatApi:
    def build(
        script: Script, *, models: list[str] | None = None, ignores_stream: bool = False, **overrides: Any
    ) -> tuple[TestClient, ScriptedLLM]:
        llm = ScriptedLLM(script, models=models, ignores_stream=ignores_stream)
        base = serve(llm.app())
        return app_factory(chat_settings(f"{base}/v1", **overrides), seeded), llm

    return build


def post(client: TestClient, body: dict[str, Any]) -> Any:
    return client.post("/v1/chat/completions", json=body, headers=AUTH)


def test_answer_carries_sources_and_the_upstream_got_the_numbered_context(chat_api: ChatApi) -> None:
    client, llm = chat_api(lambda body: text("It was completed in 1889 [1]."))
    response = post(client, chat_body(collection_names=["kb-a"], temperature=0.2, unknown_field={"x": 1}))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["model"] == "scripted"
    assert body["choices"][0]["message"] == {
        "role": "assistant",
        "content": "It was completed in 1889 [1].",
        "tool_calls": None,
    }
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["total_tokens"] == 135
    sources = body["rag_sources"]
    assert sources[0]["index"] == 1
    assert sources[0]["file_name"] == "paris.pdf"
    assert sources[0]["file_id"] == "file-paris.pdf"
    assert sources[0]["collection_name"] == "kb-a"
    # 0-based in metadata (Open WebUI's reading), and as people count pages.
    assert (sources[0]["page"], sources[0]["page_number"]) == (1, 2)
    assert 0.0 < sources[0]["score"] <= 1.0
    assert "Eiffel Tower in Paris was completed in 1889" in sources[0]["text"]
    assert [source["index"] for source in sources] == list(range(1, len(sources) + 1))
    assert {source["collection_name"] for source in sources} == {"kb-a"}

    (sent,) = llm.requests
    assert sent["model"] == "scripted"
    assert sent["temperature"] == 0.2
    assert "unknown_field" not in sent
    assert "collection_names" not in sent
    assert llm.authorizations == [f"Bearer {UPSTREAM_KEY}"]
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    context = system_text(sent)
    # The model reads the page as people count it: stored page 1 is the second page.
    assert "[1] paris.pdf (page 2, file_id: file-paris.pdf)" in context
    assert "The Eiffel Tower in Paris was completed in 1889" in context
    assert "cite" in context
    assert sent["messages"][-1] == {"role": "user", "content": QUESTION}
    assert set(tool_names(sent)) == {"read_full_document", "search"}

    metrics = client.get("/metrics", headers=AUTH).text
    assert 'chat_requests_total{outcome="ok",stream="false"} 1.0' in metrics
    assert 'chat_duration_seconds_count{stream="false"} 1.0' in metrics


def test_model_suffix_names_the_knowledge_bases(chat_api: ChatApi) -> None:
    client, llm = chat_api(lambda body: text("ok"))
    response = post(client, chat_body("scripted@kb-b"))
    assert response.status_code == 200, response.text
    sources = response.json()["rag_sources"]
    assert sources
    assert {source["collection_name"] for source in sources} == {"kb-b"}
    assert response.json()["model"] == "scripted@kb-b"
    assert llm.requests[0]["model"] == "scripted"
    assert "Eiffel Tower is painted every seven years" in system_text(llm.requests[0])
    assert "1889" not in system_text(llm.requests[0])  # kb-a's passage is not searched

    both = post(client, chat_body("scripted@kb-a+kb-b")).json()["rag_sources"]
    assert {source["collection_name"] for source in both} == {"kb-a", "kb-b"}
    assert llm.requests[1]["model"] == "scripted"


def test_without_a_knowledge_base_the_request_is_forwarded_as_it_came(chat_api: ChatApi) -> None:
    client, llm = chat_api(lambda body: text("plain"))
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}]
    response = post(client, chat_body(messages=messages))
    assert response.status_code == 200, response.text
    assert response.json()["rag_sources"] == []
    assert llm.requests[0]["messages"] == messages
    assert "tools" not in llm.requests[0]


def test_read_full_document_round_sends_the_document_back_upstream(chat_api: ChatApi) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        if turn(body) == 0:
            return tool_calls(
                [
                    ("read_full_document", {"file_id": "file-biology.pdf"}),
                    # kb-b's document: outside this chat's knowledge bases.
                    ("read_full_document", {"file_id": "file-secret.txt"}),
                ]
            )
        return text("Photosynthesis and mitochondria [1].")

    client, llm = chat_api(script)
    response = post(client, chat_body("scripted@kb-a"))
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "Photosynthesis and mitochondria [1]."
    assert len(llm.requests) == 2
    second = llm.requests[1]["messages"]
    assert second[-3]["role"] == "assistant"
    assert [call["function"]["name"] for call in second[-3]["tool_calls"]] == ["read_full_document"] * 2
    read, refused = tool_results(llm.requests[1])
    assert "Photosynthesis converts sunlight" in read
    assert "Mitochondria are the powerhouse" in read
    assert "No document with file_id 'file-secret.txt'" in refused
    assert "BANANA" not in refused
    assert second[-2]["tool_call_id"] == "call_1_0"
    assert second[-1]["tool_call_id"] == "call_1_1"


def test_search_tool_adds_numbered_passages_to_the_sources(chat_api: ChatApi) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        if turn(body) == 0:
            return tool_call("search", {"query": "second largest city of Denmark"})
        return text("Aarhus [2].")

    client, llm = chat_api(script, chat_context_k=1)
    response = post(client, chat_body("scripted@kb-a"))
    assert response.status_code == 200, response.text
    sources = response.json()["rag_sources"]
    assert sources[0]["file_name"] == "paris.pdf"
    assert sources[1]["index"] == 2
    assert sources[1]["file_name"] == "denmark.pdf"
    (result,) = tool_results(llm.requests[1])
    assert result.startswith("[2] denmark.pdf")
    assert "Aarhus is the second largest city" in result


def test_tool_rounds_stop_at_the_cap_then_one_call_without_tools(chat_api: ChatApi) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("tools"):
            return text("final answer")
        return tool_call("search", {"query": f"query {turn(body)}"}, call_id=f"call{turn(body)}")

    client, llm = chat_api(script, chat_max_tool_rounds=2)
    response = post(client, chat_body("scripted@kb-a"))
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "final answer"
    assert [tool_names(request) for request in llm.requests] == [
        ["read_full_document", "search"],
        ["read_full_document", "search"],
        [],
    ]
    first_round, last_round = tool_results(llm.requests[2])
    assert "last tool round" not in first_round
    assert last_round.endswith(
        "(That was the last tool round: no more tool calls. Answer now from the passages above.)"
    )


@pytest.mark.parametrize("stream", [False, True])
def test_tool_calls_instead_of_the_last_answer_are_an_upstream_error_not_an_empty_reply(
    chat_api: ChatApi, stream: bool
) -> None:
    client, llm = chat_api(
        lambda body: tool_call("search", {"query": f"query {turn(body)}"}, call_id=f"call{turn(body)}"),
        chat_max_tool_rounds=1,
    )
    response = post(client, chat_body("scripted@kb-a", stream=stream))
    if stream:
        assert response.status_code == 200
        events = sse_events(response.text)
        assert "[DONE]" not in events
        error = json.loads(events[-1])["error"]
        assert not any(choice.get("finish_reason") for event in events[:-1] for choice in json.loads(event)["choices"])
    else:
        assert response.status_code == 502
        error = response.json()["error"]
    assert (error["type"], error["code"]) == ("api_error", "upstream_error")
    assert "only with calls to tools it was not offered (search)" in error["message"]
    assert "CHAT_MAX_TOOL_ROUNDS=1" in error["message"]
    assert [tool_names(request) for request in llm.requests] == [["read_full_document", "search"], []]
    metrics = client.get("/metrics", headers=AUTH).text
    assert f'chat_requests_total{{outcome="upstream_error",stream="{str(stream).lower()}"}} 1.0' in metrics


def test_a_call_to_a_tool_nobody_offered_is_an_upstream_error(chat_api: ChatApi) -> None:
    client, llm = chat_api(lambda body: tool_call("retrieve", {"queries": ["x"]}))
    response = post(client, chat_body("scripted"))  # no knowledge base: no tool offered
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["message"] == (
        "The upstream model answered only with calls to tools it was not offered (retrieve), not with an answer."
    )
    assert "tools" not in llm.requests[0]


def test_client_tools_pass_through_and_their_calls_return_to_the_client(chat_api: ChatApi) -> None:
    weather = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    client, llm = chat_api(lambda body: tool_call("get_weather", {"city": "Paris"}))
    response = post(client, chat_body("scripted@kb-a", tools=[weather], tool_choice="auto"))
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert call["id"] == "call_1_0"
    assert response.json()["rag_sources"]
    (sent,) = llm.requests  # not executed here: no second round
    assert sent["tools"][0] == weather
    assert tool_names(sent) == ["get_weather", "read_full_document", "search"]
    assert sent["tool_choice"] == "auto"


def test_stream_frames_deltas_then_sources_then_done(chat_api: ChatApi) -> None:
    client, llm = chat_api(lambda body: text("The tower was completed in 1889 [1]."))
    with client.stream(
        "POST", "/v1/chat/completions", json=chat_body("scripted@kb-a", stream=True), headers=AUTH
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = "".join(response.iter_text())
    parsed = chunks(sse_events(raw))
    assert streamed_text(parsed) == "The tower was completed in 1889 [1]."
    assert len([chunk for chunk in parsed if chunk["choices"] and chunk["choices"][0]["delta"].get("content")]) > 3
    assert parsed[0]["choices"][0]["delta"]["role"] == "assistant"
    assert {chunk["id"] for chunk in parsed} == {parsed[0]["id"]}
    assert all(chunk["object"] == "chat.completion.chunk" and chunk["model"] == "scripted@kb-a" for chunk in parsed)
    assert parsed[-2]["choices"][0]["finish_reason"] == "stop"
    last = parsed[-1]
    assert last["choices"] == []
    assert last["rag_sources"][0]["file_name"] == "paris.pdf"
    assert llm.requests[0]["stream"] is True
    assert 'chat_requests_total{outcome="ok",stream="true"} 1.0' in client.get("/metrics", headers=AUTH).text


def test_stream_runs_tool_rounds_and_streams_only_the_final_text(chat_api: ChatApi) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        if turn(body) == 0:
            answer = tool_call("read_full_document", {"file_id": "file-biology.pdf"})
            answer["choices"][0]["message"]["content"] = None
            return answer
        return text("Cells make ATP [1].")

    client, llm = chat_api(script)
    response = post(client, chat_body("scripted@kb-a", stream=True))
    parsed = chunks(sse_events(response.text))
    assert streamed_text(parsed) == "Cells make ATP [1]."
    assert not any(chunk["choices"] and chunk["choices"][0]["delta"].get("tool_calls") for chunk in parsed)
    assert len(llm.requests) == 2
    (result,) = tool_results(llm.requests[1])
    assert "Mitochondria are the powerhouse" in result
    # The tool call went back upstream whole, though it streamed in pieces.
    call = llm.requests[1]["messages"][-2]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"file_id": "file-biology.pdf"}


def test_an_upstream_answering_a_stream_with_a_whole_completion_still_gets_its_answer_streamed(
    chat_api: ChatApi,
) -> None:
    client, llm = chat_api(lambda body: text("The tower was completed in 1889 [1]."), ignores_stream=True)
    parsed = chunks(sse_events(post(client, chat_body("scripted@kb-a", stream=True)).text))
    assert streamed_text(parsed) == "The tower was completed in 1889 [1]."
    assert parsed[-2]["choices"][0]["finish_reason"] == "stop"
    assert parsed[-1]["rag_sources"][0]["file_name"] == "paris.pdf"
    assert [request.get("stream") for request in llm.requests] == [True, None]
    assert "stream_options" not in llm.requests[1]
    metrics = client.get("/metrics", headers=AUTH).text
    assert "chat_stream_fallbacks_total 1.0" in metrics
    assert 'chat_requests_total{outcome="ok",stream="true"} 1.0' in metrics


def test_an_upstream_ignoring_stream_runs_its_tool_rounds_on_whole_completions(chat_api: ChatApi) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        if turn(body) == 0:
            return tool_call("read_full_document", {"file_id": "file-biology.pdf"})
        return text("Cells make ATP [1].")

    client, llm = chat_api(script, ignores_stream=True)
    parsed = chunks(sse_events(post(client, chat_body("scripted@kb-a", stream=True)).text))
    assert streamed_text(parsed) == "Cells make ATP [1]."
    assert [request.get("stream") for request in llm.requests] == [True, None, True, None]
    (result,) = tool_results(llm.requests[2])
    assert "Mitochondria are the powerhouse" in result
    assert "chat_stream_fallbacks_total 2.0" in client.get("/metrics", headers=AUTH).text


def test_an_empty_streamed_answer_is_asked_once_more_whole_then_ends(chat_api: ChatApi) -> None:
    client, llm = chat_api(lambda body: text(""))
    events = sse_events(post(client, chat_body("scripted@kb-a", stream=True)).text)
    parsed = chunks(events)
    assert streamed_text(parsed) == ""
    assert parsed[-2]["choices"][0]["finish_reason"] == "stop"
    assert [request.get("stream") for request in llm.requests] == [True, None]


def test_stream_returns_client_tool_calls(chat_api: ChatApi) -> None:
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    client, _ = chat_api(lambda body: tool_call("get_weather", {"city": "Oslo"}))
    parsed = chunks(sse_events(post(client, chat_body("scripted@kb-a", stream=True, tools=[weather])).text))
    calls = [
        chunk["choices"][0]["delta"]["tool_calls"]
        for chunk in parsed
        if chunk["choices"] and "tool_calls" in chunk["choices"][0]["delta"]
    ]
    assert calls == [
        [
            {
                "index": 0,
                "id": "call_1_0",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            }
        ]
    ]
    assert parsed[-2]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_status_comes_back_openai_shaped(chat_api: ChatApi, stream: bool) -> None:
    client, _ = chat_api(lambda body: Status(429, '{"error": {"message": "slow down"}}'))
    response = post(client, chat_body("scripted@kb-a", stream=stream))
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["type"] == "rate_limit_error"
    assert error["code"] == "upstream_error"
    assert "slow down" in error["message"]
    assert set(error) == {"message", "type", "code", "param"}
    stream_label = "true" if stream else "false"
    metrics = client.get("/metrics", headers=AUTH).text
    assert f'chat_requests_total{{outcome="upstream_error",stream="{stream_label}"}} 1.0' in metrics


@pytest.mark.parametrize(
    "reply",
    [
        Garbage('{"id": "chatcmpl-x", "choices": [{'),
        {"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "m"},
        {"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "m", "choices": []},
    ],
    ids=["not-json", "no-choices-key", "no-choice"],
)
def test_an_answer_that_is_no_chat_completion_is_502_without_a_traceback(
    chat_api: ChatApi, reply: dict[str, Any] | Garbage
) -> None:
    # LiteLLM reported these 200s as its own HTTP 500, with a Python traceback in the message.
    client, _ = chat_api(lambda body: reply)
    response = post(client, chat_body("scripted@kb-a"))
    assert response.status_code == 502
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("api_error", "upstream_error")
    assert error["message"].startswith("The upstream model's answer could not be read as a chat completion")
    assert "Traceback" not in error["message"]
    assert (
        'chat_requests_total{outcome="upstream_error",stream="false"} 1.0' in client.get("/metrics", headers=AUTH).text
    )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_upstream_down_is_502(app_factory: Callable[..., TestClient], seeded: ChunkStore) -> None:
    client = app_factory(chat_settings(f"http://127.0.0.1:{_closed_port()}/v1"), seeded)
    response = post(client, chat_body("scripted@kb-a"))
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unavailable"
    assert response.json()["error"]["type"] == "api_error"


def test_chat_disabled_is_503(app_factory: Callable[..., TestClient], seeded: ChunkStore) -> None:
    client = app_factory(chat_settings(None), seeded)
    for response in (post(client, chat_body()), client.get("/v1/models", headers=AUTH)):
        assert response.status_code == 503
        error = response.json()["error"]
        assert error["code"] == "chat_disabled"
        assert "CHAT_UPSTREAM_BASE_URL" in error["message"]


def test_the_openapi_shows_the_chat_routes_only_where_chat_is_configured(
    app_factory: Callable[..., TestClient], seeded: ChunkStore, chat_api: ChatApi
) -> None:
    disabled = app_factory(chat_settings(None), seeded).get("/openapi.json").json()["paths"]
    assert "/v1/chat/completions" not in disabled
    assert "/v1/models" not in disabled
    client, _ = chat_api(lambda body: text("never"))
    enabled = client.get("/openapi.json").json()["paths"]
    documented = enabled["/v1/chat/completions"]["post"]["responses"]
    assert {"200", "400", "401", "502", "503", "504", "default"} <= set(documented)
    assert set(documented["200"]["content"]) == {"application/json", "text/event-stream"}
    assert "/v1/models" in enabled


def test_missing_key_is_401_openai_shaped(chat_api: ChatApi) -> None:
    client, llm = chat_api(lambda body: text("never"))
    for headers in ({}, {"Authorization": "Bearer wrong-key"}):
        response = client.post("/v1/chat/completions", json=chat_body(), headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "authentication_error"
        assert response.json()["error"]["code"] == "UNAUTHORIZED"
    assert llm.requests == []
    # Other paths keep the flat shape.
    assert client.post("/search", json={}).json()["code"] == "UNAUTHORIZED"


def test_invalid_requests_are_400_openai_shaped(chat_api: ChatApi) -> None:
    client, llm = chat_api(lambda body: text("never"))
    missing = post(client, {"model": "scripted"})
    assert missing.status_code == 400
    assert missing.json()["error"]["type"] == "invalid_request_error"
    assert "messages" in missing.json()["error"]["message"]
    bad_name = post(client, chat_body("scripted@kb a"))
    assert bad_name.status_code == 400
    assert bad_name.json()["error"]["param"] == "model"
    assert bad_name.json()["error"]["code"] == "invalid_knowledge_base"
    bad_field = post(client, chat_body(collection_names=["ok", "../etc"]))
    assert bad_field.status_code == 400
    assert bad_field.json()["error"]["param"] == "collection_names"
    assert post(client, chat_body("@kb-a")).status_code == 400
    weather = {"type": "function", "function": {"name": "get_weather"}}
    for field, value, fragment in (
        ("tools", [{}], 'each tool needs a "type"'),
        ("tools", [{"type": "function", "function": {"secret": "s3cr3t-value"}}], "a function tool needs"),
        ("tool_choice", {"secret": "s3cr3t-value"}, "an object must name a function"),
    ):
        refused = post(client, chat_body("scripted@kb-a", **{"tools": [weather], field: value}))
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert (error["type"], error["code"]) == ("invalid_request_error", "INVALID_REQUEST")
        assert error["message"].startswith(f"Invalid request: {field}"), error["message"]
        assert fragment in error["message"]
        assert "s3cr3t-value" not in refused.text
    assert llm.requests == []


@pytest.mark.parametrize("value", ["true", 1, "yes"])
def test_a_stream_flag_that_is_not_a_json_boolean_is_400(chat_api: ChatApi, value: object) -> None:
    client, llm = chat_api(lambda body: text("never"))
    refused = post(client, chat_body("scripted@kb-a", stream=value))
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "INVALID_REQUEST")
    assert error["message"].startswith("Invalid request: stream"), error["message"]
    assert llm.requests == []


def test_a_null_stream_flag_answers_unstreamed(chat_api: ChatApi) -> None:
    client, _ = chat_api(lambda body: text("Hello."))
    response = post(client, chat_body("scripted", stream=None))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["choices"][0]["message"]["content"] == "Hello."


def test_allow_list_restricts_models_and_requests(chat_api: ChatApi) -> None:
    client, llm = chat_api(lambda body: text("x"), chat_knowledge_bases="kb-a, kb-c")
    ids = [card["id"] for card in client.get("/v1/models", headers=AUTH).json()["data"]]
    # The upstream has no model list: CHAT_DEFAULT_MODEL stands in.
    assert ids == ["scripted", "scripted@kb-a", "scripted@kb-c"]
    refused = post(client, chat_body("scripted@kb-a+kb-b"))
    assert refused.status_code == 404
    assert refused.json()["error"]["code"] == "knowledge_base_not_found"
    assert "'kb-b'" in refused.json()["error"]["message"]
    assert llm.requests == []
    assert post(client, chat_body("scripted@kb-a")).status_code == 200


def test_a_body_not_sent_as_json_is_415_in_openai_shape_and_nothing_goes_upstream(chat_api: ChatApi) -> None:
    client, llm = chat_api(lambda body: text("In 1889 [1]."))
    response = client.post(
        "/v1/chat/completions",
        content=json.dumps(chat_body("scripted@kb-a")).encode(),
        headers={**AUTH, "Content-Type": "text/plain"},
    )
    assert response.status_code == 415
    assert response.json()["error"]["message"] == NOT_JSON_MESSAGE
    assert llm.requests == []


def test_failure_after_the_stream_started_is_an_error_event(chat_api: ChatApi) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any] | Status:
        if turn(body) == 0:
            return tool_call("search", {"query": "Aarhus"})
        return Status(500, '{"error": {"message": "upstream crashed"}}')

    client, _ = chat_api(script)
    events = sse_events(post(client, chat_body("scripted@kb-a", stream=True)).text)
    assert "[DONE]" not in events
    error = json.loads(events[-1])["error"]
    assert error["code"] == "upstream_error"
    assert "upstream crashed" in error["message"]
    assert (
        'chat_requests_total{outcome="upstream_error",stream="true"} 1.0' in client.get("/metrics", headers=AUTH).text
    )


def test_a_stream_cut_off_mid_answer_ends_with_an_error_event_not_a_finish(chat_api: ChatApi) -> None:
    # The upstream's connection closes after three deltas: no finish_reason, no [DONE].
    client, llm = chat_api(lambda body: Cut(text("Hello from the other side."), deltas=3))
    events = sse_events(post(client, chat_body("scripted@kb-a", stream=True)).text)
    assert "[DONE]" not in events
    error = json.loads(events[-1])["error"]
    assert error["code"] == "upstream_error"
    assert "ended without a finish_reason" in error["message"]
    parsed = [json.loads(event) for event in events[:-1]]
    assert streamed_text(parsed) == "Hello fro"  # three 3-character deltas
    assert not any(choice.get("finish_reason") for chunk in parsed for choice in chunk["choices"])
    assert not any("rag_sources" in chunk for chunk in parsed)
    assert len(llm.requests) == 1  # not re-asked: the stream did carry an answer
    metrics = client.get("/metrics", headers=AUTH).text
    assert 'chat_requests_total{outcome="upstream_error",stream="true"} 1.0' in metrics
    assert 'chat_requests_total{outcome="ok",stream="true"}' not in metrics


def test_chat_timeout_bounds_a_stream_that_never_ends(chat_api: ChatApi) -> None:
    release = threading.Event()
    client, _ = chat_api(lambda body: Drip(release), chat_timeout=0.5)
    try:
        events = sse_events(post(client, chat_body("scripted@kb-a", stream=True)).text)
    finally:
        release.set()
    assert "[DONE]" not in events
    error = json.loads(events[-1])["error"]
    assert error["code"] == "upstream_timeout"
    assert "CHAT_TIMEOUT" in error["message"]
    assert streamed_text([json.loads(event) for event in events[:-1]]).startswith("tic")
    metrics = client.get("/metrics", headers=AUTH).text
    assert 'chat_requests_total{outcome="upstream_error",stream="true"} 1.0' in metrics


def test_a_lone_surrogate_in_a_message_is_replaced_before_search_and_upstream(chat_api: ChatApi) -> None:
    client, llm = chat_api(lambda body: text("In 1889 [1]."))
    question = f"{QUESTION} \ud83d"  # half an emoji, as a JavaScript client cuts it
    raw = json.dumps(chat_body("scripted@kb-a", messages=[{"role": "user", "content": question}]))
    response = client.post("/v1/chat/completions", content=raw, headers={**AUTH, "Content-Type": "application/json"})
    assert response.status_code == 200, response.text
    assert response.json()["rag_sources"][0]["file_name"] == "paris.pdf"
    assert llm.requests[0]["messages"][-1] == {"role": "user", "content": f"{QUESTION} \ufffd"}


@pytest.mark.parametrize("stream", [False, True])
def test_user_and_reasoning_effort_reach_the_upstream_for_a_bare_model_name(chat_api: ChatApi, stream: bool) -> None:
    # LiteLLM's catalogue knows neither field for a non-OpenAI name: it dropped `user` and refused the other.
    client, llm = chat_api(lambda body: text("ok"))
    body = chat_body("llama3.1:8b@kb-a", user="alice", reasoning_effort="low", seed=7, stream=stream)
    response = post(client, body)
    assert response.status_code == 200, response.text
    (sent,) = llm.requests
    assert sent["model"] == "llama3.1:8b"
    assert (sent["user"], sent["reasoning_effort"], sent["seed"]) == ("alice", "low", 7)


def test_a_parameter_litellm_refuses_locally_is_not_blamed_on_the_upstream(
    app_factory: Callable[..., TestClient], seeded: ChunkStore
) -> None:
    # A provider-prefixed model keeps LiteLLM's own parameter check, which refuses before sending anything.
    client = app_factory(chat_settings(f"http://127.0.0.1:{_closed_port()}/v1"), seeded)
    response = post(client, chat_body("anthropic/claude-sonnet-4-5", logit_bias={"50256": -100}))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_request")
    assert "nothing was sent upstream" in error["message"]
    assert "upstream model answered" not in error["message"]


def _usage_chunks(parsed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [chunk for chunk in parsed if chunk.get("usage") is not None]


def test_stream_with_include_usage_ends_with_the_usage_of_every_round(chat_api: ChatApi) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        if turn(body) == 0:
            return tool_call("read_full_document", {"file_id": "file-biology.pdf"})
        return text("Cells make ATP [1].")

    client, llm = chat_api(script)
    body = chat_body("scripted@kb-a", stream=True, stream_options={"include_usage": True})
    parsed = chunks(sse_events(post(client, body).text))
    assert streamed_text(parsed) == "Cells make ATP [1]."
    assert [request["stream_options"] for request in llm.requests] == [{"include_usage": True}] * 2
    (last,) = _usage_chunks(parsed)
    assert last is parsed[-1]
    assert last["choices"] == []
    # Two upstream calls of 120 + 15 tokens each, as the non-streamed answer sums them.
    assert last["usage"] == {"prompt_tokens": 240, "completion_tokens": 30, "total_tokens": 270}


def test_stream_without_include_usage_has_no_usage(chat_api: ChatApi) -> None:
    client, llm = chat_api(lambda body: text("In 1889 [1]."))
    parsed = chunks(sse_events(post(client, chat_body("scripted@kb-a", stream=True)).text))
    assert _usage_chunks(parsed) == []
    assert "stream_options" not in llm.requests[0]


@pytest.mark.parametrize("stream", [False, True])
def test_an_unexpected_failure_is_500_openai_shaped_and_logged_once(
    serve: Callable[[Any], str],
    app_factory: Callable[..., TestClient],
    seeded: ChunkStore,
    caplog: pytest.LogCaptureFixture,
    stream: bool,
) -> None:
    llm = ScriptedLLM(lambda body: text("never asked"))
    client = app_factory(chat_settings(f"{serve(llm.app())}/v1"), BrokenStore(seeded))
    caplog.clear()
    response = client.post(
        "/v1/chat/completions", json=chat_body("scripted@kb-a", stream=stream), headers={**AUTH, "X-Request-ID": "b-1"}
    )
    assert response.status_code == 500
    assert response.headers["x-request-id"] == "b-1"
    assert response.json() == {
        "error": {"message": "Unexpected search failure.", "type": "api_error", "code": "SEARCH_FAILED", "param": None}
    }
    (record,) = [record for record in caplog.records if record.getMessage() == REQUEST_FAILED]
    assert (getattr(record, "path", None), getattr(record, "status", None)) == ("/v1/chat/completions", 500)
    assert record.exc_info is not None
    assert llm.requests == []


# -- citations: one number per document, and Open WebUI's source events -------------------------------

CELLS = "How do cells get energy: photosynthesis and mitochondria?"


def source_event_chunks(parsed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [chunk["event"] for chunk in parsed if "event" in chunk]


def test_passages_of_one_document_share_its_citation_number(chat_api: ChatApi) -> None:
    # Without windows biology.pdf's two chunks are two passages.
    client, llm = chat_api(lambda body: text("ATP [1]."), search_window_chars=0, chat_context_k=4)
    response = post(client, chat_body("scripted@kb-a", messages=[{"role": "user", "content": CELLS}]))
    assert response.status_code == 200, response.text
    sources = response.json()["rag_sources"]
    biology = [source for source in sources if source["file_name"] == "biology.pdf"]
    assert len(biology) == 2
    assert biology[0]["index"] == biology[1]["index"]
    assert {source["document"] for source in biology} == {"file-biology.pdf"}
    # Numbers follow the order documents were first found, without gaps.
    first_seen = list(dict.fromkeys(source["index"] for source in sources))
    assert first_seen == list(range(1, len(first_seen) + 1))
    assert len(first_seen) == len({source["document"] for source in sources})
    number = biology[0]["index"]
    context = system_text(llm.requests[0])
    assert f"[{number}] biology.pdf (page 3, file_id: file-biology.pdf)" in context
    assert f"[{number}] biology.pdf (page 5, file_id: file-biology.pdf)" in context


def test_stream_emits_a_source_event_per_document_before_the_answer(chat_api: ChatApi) -> None:
    client, _ = chat_api(lambda body: text("ATP [1]."), search_window_chars=0, chat_context_k=4)
    body = chat_body("scripted@kb-a", stream=True, messages=[{"role": "user", "content": CELLS}])
    parsed = chunks(sse_events(post(client, body).text))
    sources = parsed[-1]["rag_sources"]
    events = source_event_chunks(parsed)
    documents = list(dict.fromkeys(source["document"] for source in sources))
    assert len(events) == len(documents)
    # Right after the role chunk, before any text, with no choices (Open WebUI forwards them as events).
    assert all("event" in chunk and chunk["choices"] == [] for chunk in parsed[1 : 1 + len(events)])
    assert streamed_text(parsed[: 1 + len(events)]) == ""
    for number, (event, document) in enumerate(zip(events, documents, strict=True), start=1):
        passages = [source for source in sources if source["index"] == number]
        assert event["type"] == "source"
        data = event["data"]
        assert data["source"] == {"id": document, "name": passages[0]["file_name"]}
        assert data["document"] == [source["text"] for source in passages]
        assert data["distances"] == [source["score"] for source in passages]
        assert data["metadata"] == [
            {
                "source": document,
                "name": source["file_name"],
                "file_id": source["file_id"],
                "collection_name": "kb-a",
                "page": source["page"],
                "citation": number,
            }
            for source in passages
        ]
    biology = next(event["data"] for event in events if event["data"]["source"]["name"] == "biology.pdf")
    # 0-based, as Open WebUI reads metadata.page: the chunks sit on the third and fifth pages.
    assert sorted(meta["page"] for meta in biology["metadata"]) == [2, 4]


def test_stream_announces_the_passages_a_tool_round_found(chat_api: ChatApi) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        if turn(body) == 0:
            return tool_call("search", {"query": "second largest city of Denmark"})
        return text("Aarhus [2].")

    client, _ = chat_api(script, chat_context_k=1)
    parsed = chunks(sse_events(post(client, chat_body("scripted@kb-a", stream=True)).text))
    events = source_event_chunks(parsed)
    assert [event["data"]["source"]["name"] for event in events] == ["paris.pdf", "denmark.pdf"]
    assert events[1]["data"]["metadata"][0]["citation"] == 2
    announced = next(index for index, chunk in enumerate(parsed) if chunk.get("event") == events[1])
    first_text = next(index for index, chunk in enumerate(parsed) if streamed_text([chunk]))
    assert announced < first_text
    assert [source["file_name"] for source in parsed[-1]["rag_sources"]] == ["paris.pdf", "denmark.pdf"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_contract_mismatch_refuses_a_chat_with_knowledge_bases_openai_shaped_until_it_is_fixed(
    serve: Callable[[Any], str], app_factory: Callable[..., TestClient], seeded: ChunkStore, stream: bool
) -> None:
    llm = ScriptedLLM(lambda body: text("It was completed in 1889 [1]."))
    store = RebuildableStore(seeded)
    client = app_factory(chat_settings(f"{serve(llm.app())}/v1"), store)
    store.rebuild()
    client.get("/health/ready")
    refused = post(client, chat_body(collection_names=["kb-a"], stream=stream))
    assert refused.status_code == 503, refused.text
    error = refused.json()["error"]
    assert error["code"] == "COLLECTION_MISMATCH"
    assert names_the_mismatch(error["message"])
    assert llm.requests == []
    # Without a knowledge base nothing is searched: the chat is forwarded.
    assert post(client, chat_body()).status_code == 200
    store.restore()
    assert client.get("/health/ready").status_code == 200
    answered = post(client, chat_body(collection_names=["kb-a"], stream=stream))
    assert answered.status_code == 200, answered.text
    assert "1889" in answered.text

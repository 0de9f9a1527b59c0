"""Streamed answers against the schema the OpenAPI document publishes for ``text/event-stream``, as
schemathesis validates it (each event; a chunk's or error's JSON through ``contentSchema``): every kind of
event the stream sends, from real streams of the app over a scripted upstream."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import schemathesis
from fastapi.testclient import TestClient
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.schemas import APIOperation

from rag_runtime.store import ChunkStore
from retrieval_agent.chat.chunks import ChatCompletionChunk, ChunkChoice, ChunkDelta
from retrieval_agent.chat.models import SourceEvent, SourceEventData, SourceMetadata, SourceOrigin

from ..conftest import AUTH  # noqa: TID252
from ..scripted_llm import Cut, Script, ScriptedLLM, text, tool_call  # noqa: TID252
from .chat_support import chat_body, chat_settings, sse_events  # noqa: TID252

PATH = "/v1/chat/completions"
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}

Operation = APIOperation[Any, Any, Any, Any]
# The TestClient's response (an httpx or httpx2 one, as Starlette has it).
Stream = Callable[..., tuple[Any, Operation]]


@pytest.fixture
def stream(serve: Callable[[Any], str], app_factory: Callable[..., TestClient], seeded: ChunkStore) -> Stream:
    """A streamed answer of the app over ``script``, and the operation its own /openapi.json documents."""

    def run(script: Script, **body: Any) -> tuple[Any, Operation]:
        llm = ScriptedLLM(script)
        client = app_factory(chat_settings(f"{serve(llm.app())}/v1"), seeded)
        operation = schemathesis.openapi.from_dict(client.get("/openapi.json").json())[PATH]["POST"]
        response = client.post(PATH, json=chat_body("scripted@kb-a", stream=True, **body), headers=AUTH)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/event-stream")
        return response, operation

    return run


def payloads(response: Any) -> list[Any]:
    return [event if event == "[DONE]" else json.loads(event) for event in sse_events(response.text)]


def test_a_streamed_answer_with_sources_and_usage_matches_the_schema(stream: Stream) -> None:
    response, operation = stream(
        lambda body: text("It was completed in 1889 [1]."), stream_options={"include_usage": True}
    )
    sent = payloads(response)
    # The role chunk, the text deltas, the finish, the last chunk with sources and usage, then [DONE].
    assert sent[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert sent[-2]["rag_sources"]
    assert sent[-2]["usage"]["total_tokens"] > 0
    assert sent[-1] == "[DONE]"
    operation.validate_response(response)


def test_client_tool_call_deltas_match_the_schema(stream: Stream) -> None:
    response, operation = stream(lambda body: tool_call("get_weather", {"city": "Oslo"}), tools=[WEATHER])
    assert any(chunk["choices"] and "tool_calls" in chunk["choices"][0]["delta"] for chunk in payloads(response)[:-1])
    operation.validate_response(response)


def test_an_error_event_ending_a_stream_matches_the_schema(stream: Stream) -> None:
    response, operation = stream(lambda body: Cut(text("Hello from the other side."), deltas=3))
    assert "error" in payloads(response)[-1]
    operation.validate_response(response)


def _fake_stream(*events: str) -> httpx.Response:
    """A stream of ``events`` as the route's response would carry them."""
    body = "".join(f"data: {event}\n\n" for event in events)
    request = httpx.Request("POST", f"http://testserver{PATH}")
    fake = httpx.Response(
        200, headers={"content-type": "text/event-stream; charset=utf-8"}, content=body.encode(), request=request
    )
    fake.elapsed = datetime.timedelta(0)
    return fake


@pytest.mark.parametrize(
    "event",
    [
        '{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"delta": {"content": 7}}]}',
        '{"object": "chat.completion.chunk", "created": 1, "model": "m", "choices": []}',
        '{"error": "not an object"}',
        "not json",
    ],
)
def test_the_schema_refuses_events_that_are_no_chunk(stream: Stream, event: str) -> None:
    # The schema is no blank cheque: a chunk of the wrong shape, or no JSON, fails it.
    _, operation = stream(lambda body: text("ok"))
    with pytest.raises((Failure, FailureGroup)):
        operation.validate_response(_fake_stream(event, "[DONE]"))


def test_chunks_built_with_the_model_match_the_schema(stream: Stream) -> None:
    # Every kind the stream builds with ChatCompletionChunk, Open WebUI's source events included.
    _, operation = stream(lambda body: text("ok"))
    common: dict[str, Any] = {"id": "chatcmpl-1", "created": 1, "model": "scripted@kb-a"}
    source = SourceEvent(
        data=SourceEventData(
            source=SourceOrigin(id="file-1", name="a.pdf"),
            document=["..."],
            metadata=[SourceMetadata(source="file-1", name="a.pdf", file_id="file-1", page=0, citation=1)],
            distances=[0.9],
        )
    )
    built = [
        ChatCompletionChunk(**common, choices=[ChunkChoice(delta=ChunkDelta(role="assistant", content=""))]),
        ChatCompletionChunk(**common, choices=[], event=source),
        ChatCompletionChunk(**common, choices=[ChunkChoice(delta=ChunkDelta(content="Hel"))]),
        ChatCompletionChunk(**common, choices=[ChunkChoice(delta=ChunkDelta(), finish_reason="stop")]),
        ChatCompletionChunk(**common, choices=[], rag_sources=[], memory_sources=[]),
    ]
    events = [chunk.sse().removeprefix("data: ").strip() for chunk in built]
    assert json.loads(events[2])["choices"][0] == {"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}
    assert "usage" not in json.loads(events[-1])
    operation.validate_response(_fake_stream(*events, "[DONE]"))

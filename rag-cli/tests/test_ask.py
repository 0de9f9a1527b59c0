"""``rag ask`` against a scripted OpenAI-compatible chat on loopback that streams as the retrieval
agent's /v1/chat/completions does (its own chunk models): the answer as it comes, then the Sources."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from rag_cli.__main__ import main
from retrieval_agent.chat.chunks import DONE, ChatCompletionChunk, ChunkChoice, ChunkDelta
from retrieval_agent.chat.models import (
    ModelCard,
    ModelList,
    OpenAIErrorBody,
    OpenAIErrorDetail,
    RagSource,
    SourceEvent,
    SourceEventData,
    SourceMetadata,
    SourceOrigin,
)

from .conftest import RETRIEVAL_KEY, serving  # noqa: TID252

ANSWER = "The harbour budget was approved in March [1]; the ferry runs hourly [2]."
SOURCES = [
    RagSource(
        index=1,
        document="f-harbour",
        file_name="harbour.pdf",
        file_id="f-harbour",
        path="notes/2024/harbour.pdf",
        collection_name="kb",
        page=0,
        page_number=1,
        score=0.9,
        text="The budget was approved in March.",
    ),
    RagSource(
        index=1,
        document="f-harbour",
        file_name="harbour.pdf",
        file_id="f-harbour",
        path="notes/2024/harbour.pdf",
        collection_name="kb",
        page=2,
        page_number=3,
        score=0.7,
        text="Approval came from the council.",
    ),
    RagSource(
        index=2,
        document="f-ferry",
        file_name="ferry.md",
        file_id="f-ferry",
        path="notes/ferry.md",
        collection_name="kb",
        score=0.6,
        text="The ferry leaves every hour.",
    ),
]


def _chunk(**fields: Any) -> str:
    return ChatCompletionChunk(id="chatcmpl-1", created=0, model="scripted", **fields).sse()


def _stream() -> Iterator[str]:
    yield _chunk(choices=[ChunkChoice(delta=ChunkDelta(role="assistant", content=""))])
    event = SourceEvent(
        data=SourceEventData(
            source=SourceOrigin(id="f-harbour", name="harbour.pdf"),
            document=["The budget was approved in March."],
            metadata=[SourceMetadata(source="f-harbour", name="harbour.pdf", citation=1)],
            distances=[0.9],
        )
    )
    yield _chunk(choices=[], event=event)  # an Open WebUI source event: nothing to print
    for start in range(0, len(ANSWER), 7):
        yield _chunk(choices=[ChunkChoice(delta=ChunkDelta(content=ANSWER[start : start + 7]))])
    yield _chunk(choices=[ChunkChoice(delta=ChunkDelta(), finish_reason="stop")])
    yield _chunk(choices=[], rag_sources=SOURCES)
    yield f"data: {DONE}\n\n"


class ScriptedChat:
    """/v1/models and /v1/chat/completions; ``disabled`` answers as a service without CHAT_UPSTREAM_BASE_URL."""

    def __init__(self, *, disabled: bool = False) -> None:
        self.disabled = disabled
        self.requests: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
            ]
        )

    async def models(self, request: Request) -> JSONResponse:
        cards = [
            ModelCard(id="scripted@kb", owned_by="rag", name="kb"),
            ModelCard(id="scripted", owned_by="rag", name="s"),
        ]
        return JSONResponse(ModelList(data=cards).model_dump(mode="json"))

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append({**body, "authorization": request.headers.get("authorization")})
        if self.disabled:
            error = OpenAIErrorDetail(
                message="Chat is disabled: set CHAT_UPSTREAM_BASE_URL.",
                type="service_unavailable",
                code="chat_disabled",
            )
            return JSONResponse(OpenAIErrorBody(error=error).model_dump(mode="json"), status_code=503)
        return StreamingResponse(_stream(), media_type="text/event-stream")


def _ask(url: str, *extra: str) -> int:
    return main(
        [
            "ask",
            "When was the harbour budget approved?",
            "--collection",
            "kb",
            *extra,
            "--url",
            url,
            "--api-key",
            RETRIEVAL_KEY,
        ]
    )


def test_ask_prints_the_streamed_answer_then_one_source_line_per_document(
    capsys: pytest.CaptureFixture[str],
) -> None:
    chat = ScriptedChat()
    with serving(chat.app()) as url:
        code = _ask(url)

    output = capsys.readouterr().out
    assert code == 0, output
    answer, _, sources = output.partition("\nSources:\n")
    assert answer.strip() == ANSWER
    assert sources.splitlines() == [
        "[1] harbour.pdf (pages 1, 3, notes/2024/harbour.pdf)",
        "[2] ferry.md (notes/ferry.md)",
    ]
    (request,) = chat.requests
    assert request["stream"] is True
    assert request["collection_names"] == ["kb"]
    assert request["model"] == "scripted"  # the first plain model /v1/models lists
    assert request["messages"] == [{"role": "user", "content": "When was the harbour budget approved?"}]
    assert request["authorization"] == f"Bearer {RETRIEVAL_KEY}"


def test_ask_sends_the_model_it_is_given(capsys: pytest.CaptureFixture[str]) -> None:
    chat = ScriptedChat()
    with serving(chat.app()) as url:
        assert _ask(url, "--model", "gpt-4o-mini") == 0
    capsys.readouterr()
    assert [request["model"] for request in chat.requests] == ["gpt-4o-mini"]


def test_ask_against_a_service_without_chat_says_so_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    with serving(ScriptedChat(disabled=True).app()) as url:
        code = _ask(url)

    assert code == 1
    assert "HTTP 503 chat_disabled: Chat is disabled: set CHAT_UPSTREAM_BASE_URL." in capsys.readouterr().out


def test_ask_when_the_service_is_down_says_so_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])  # closed again: nothing listens there
    url = f"http://127.0.0.1:{port}"

    code = _ask(url, "--model", "scripted")

    assert code == 1
    assert f"the retrieval service at {url} failed: ConnectError" in " ".join(capsys.readouterr().out.split())


def test_a_stream_that_fails_midway_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    def failing() -> Iterator[str]:
        yield _chunk(choices=[ChunkChoice(delta=ChunkDelta(content="The harbour"))])
        detail = OpenAIErrorDetail(message="The chat model failed.", type="upstream_error", code="upstream_failed")
        yield f"data: {json.dumps(OpenAIErrorBody(error=detail).model_dump(mode='json'))}\n\n"

    async def chat(request: Request) -> Response:
        return StreamingResponse(failing(), media_type="text/event-stream")

    with serving(Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])) as url:
        code = _ask(url, "--model", "scripted")

    output = capsys.readouterr().out
    assert code == 1
    assert "upstream_failed: The chat model failed." in output
    assert "Sources:" not in output

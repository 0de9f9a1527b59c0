"""A scripted OpenAI-compatible chat-completions endpoint for tests (served on loopback by ``serve``).

A script is a function of the request body (``{"model", "messages", "tools", ...}``) returning a
completion dict (``tool_call(...)``, ``text(...)``), a ``Hang`` (sleep, then answer), a ``Status``
(an HTTP error), ``Garbage`` (a 200 whose body is not a completion), ``Cut`` (a stream that stops
mid-answer) or ``Drip`` (a stream that goes on until the test releases it). Every request is recorded
with its Authorization header. A request with ``"stream": true`` gets its completion as SSE chunks
(``stream_chunks``: the text in pieces, each tool call's arguments in two deltas; with
``stream_options.include_usage``, a last chunk with ``usage`` and no choices, as OpenAI sends). ``models``, when
given, is what ``GET /v1/models`` lists (else that route is a 404). ``ignores_stream`` answers every
request with the whole JSON completion, as some upstreams do whatever ``stream`` says.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass(frozen=True)
class Hang:
    """Sleep ``seconds`` (past the agent's timeout), then answer ``then``."""

    seconds: float
    then: dict[str, Any] | None = None


@dataclass(frozen=True)
class Status:
    """An HTTP error answer."""

    code: int
    body: str = '{"error": {"message": "scripted failure"}}'


@dataclass(frozen=True)
class Garbage:
    """A 200 whose body is not a chat completion."""

    body: str = "<html>this is not a completion</html>"


@dataclass(frozen=True)
class Cut:
    """A stream of ``answer`` whose connection closes after ``deltas`` text deltas: no finish_reason, no [DONE]."""

    answer: dict[str, Any]
    deltas: int


@dataclass(frozen=True)
class Drip:
    """A stream sending one text delta every ``every`` seconds until ``release`` is set (or after
    ``limit`` deltas, so that a client that never gives up does not hang the test), then a finish."""

    release: threading.Event
    every: float = 0.05
    limit: int = 400


Reply = dict[str, Any] | Hang | Status | Garbage | Cut | Drip
Script = Callable[[dict[str, Any]], Reply | Awaitable[Reply]]


def completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted-model",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 15, "total_tokens": 135},
    }


def tool_call(name: str, arguments: dict[str, Any], *, call_id: str = "call_1") -> dict[str, Any]:
    """The model calls one tool."""
    return tool_calls([(name, arguments)], first_id=call_id)


def tool_calls(calls: list[tuple[str, dict[str, Any]]], *, first_id: str = "call_1") -> dict[str, Any]:
    """The model calls several tools in one answer."""
    return completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"{first_id}_{index}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
                for index, (name, arguments) in enumerate(calls)
            ],
        },
        "tool_calls",
    )


def text(content: str) -> dict[str, Any]:
    """The model answers in text."""
    return completion({"role": "assistant", "content": content}, "stop")


def turn(body: dict[str, Any]) -> int:
    """How many answers the model gave before this request (0 for the first request of a run)."""
    return sum(1 for message in body.get("messages", []) if message.get("role") == "assistant")


def tool_results(body: dict[str, Any]) -> list[Any]:
    """The decoded tool results sent to the model so far."""
    results: list[Any] = []
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            content = message.get("content")
            try:
                results.append(json.loads(content) if isinstance(content, str) else content)
            except ValueError:
                results.append(content)
    return results


def user_text(body: dict[str, Any]) -> str:
    """Every user message's text, joined."""
    parts: list[str] = []
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            parts.append(content if isinstance(content, str) else json.dumps(content))
    return "\n".join(parts)


def stream_chunks(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """A completion as the chunks of a stream: role, text in 3-character pieces, tool-call deltas, finish."""
    choice = answer["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": answer["id"],
            "object": "chat.completion.chunk",
            "created": 0,
            "model": answer["model"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    content = message.get("content") or ""
    chunks.extend(chunk({"content": content[start : start + 3]}) for start in range(0, len(content), 3))
    for index, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        head = {"index": index, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"]}}
        head["function"]["arguments"] = arguments[:half]
        chunks.append(chunk({"tool_calls": [head]}))
        chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]}))
    chunks.append(chunk({}, choice["finish_reason"]))
    return chunks


@dataclass
class ScriptedLLM:
    """The endpoint's state: its script and what it was sent."""

    script: Script
    models: list[str] | None = None
    ignores_stream: bool = False
    requests: list[dict[str, Any]] = field(default_factory=lambda: list[dict[str, Any]]())
    authorizations: list[str | None] = field(default_factory=lambda: list[str | None]())

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.authorizations.append(request.headers.get("authorization"))
        reply = self.script(body)
        if not isinstance(reply, dict | Hang | Status | Garbage | Cut | Drip):
            reply = await reply
        if isinstance(reply, Hang):
            await anyio.sleep(reply.seconds)
            reply = reply.then if reply.then is not None else text("DONE")
        if isinstance(reply, Status):
            return Response(reply.body, status_code=reply.code, media_type="application/json")
        if isinstance(reply, Garbage):
            return PlainTextResponse(reply.body)
        if isinstance(reply, Cut):
            head = stream_chunks(reply.answer)[: 1 + reply.deltas]  # the role chunk, then the text deltas
            return StreamingResponse(iter([_sse(chunk) for chunk in head]), media_type="text/event-stream")
        if isinstance(reply, Drip):
            return StreamingResponse(_drip(reply), media_type="text/event-stream")
        if body.get("stream") and not self.ignores_stream:
            chunks = stream_chunks(reply)
            if (body.get("stream_options") or {}).get("include_usage"):
                chunks.append({**chunks[-1], "choices": [], "usage": reply["usage"]})
            events = "".join(_sse(chunk) for chunk in chunks)
            return StreamingResponse(iter([events, "data: [DONE]\n\n"]), media_type="text/event-stream")
        return JSONResponse(reply)

    async def _models(self, request: Request) -> Response:
        if self.models is None:
            return Response('{"error": {"message": "no model list"}}', status_code=404, media_type="application/json")
        return JSONResponse({"object": "list", "data": [{"id": name, "object": "model"} for name in self.models]})

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )


def _sse(chunk: dict[str, Any]) -> str:
    return f"data: {json.dumps(chunk)}\n\n"


async def _drip(reply: Drip) -> AsyncIterator[str]:
    chunks = stream_chunks(text("tick "))
    yield _sse(chunks[0])
    for _ in range(reply.limit):
        if reply.release.is_set():
            break
        yield _sse(chunks[1])
        await anyio.sleep(reply.every)
    yield _sse(chunks[-1])
    yield "data: [DONE]\n\n"

"""The events of a streamed chat answer: ``data: <ChatCompletionChunk JSON>`` events, an error event
(``data: <OpenAIErrorBody JSON>``) ending a stream that failed, else ``data: [DONE]``.

:func:`event_stream_schema` is what the OpenAPI document publishes for ``text/event-stream``: the
schema of one event (OpenAPI 3.1 reads an event stream's schema as each event's), whose ``data`` is
``[DONE]`` or a chunk or error as JSON (``contentMediaType``/``contentSchema``, as schemathesis
validates them).
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from pydantic import BaseModel, Field

from retrieval_agent.chat.models import MemorySource, OpenAIErrorBody, RagSource, SourceEvent, Usage

DONE = "[DONE]"


def _absent(value: object) -> bool:
    return value is None


class FunctionDelta(BaseModel):
    name: str | None = Field(default=None, exclude_if=_absent)
    arguments: str | None = Field(default=None, exclude_if=_absent)


class ToolCallDelta(BaseModel):
    """A tool call the client gets back (this service sends each whole, in one delta)."""

    index: int
    id: str | None = Field(default=None, exclude_if=_absent)
    type: Literal["function"] | None = Field(default=None, exclude_if=_absent)
    function: FunctionDelta | None = Field(default=None, exclude_if=_absent)


class ChunkDelta(BaseModel):
    """What one chunk adds to the answer; a field not sent is absent, not null."""

    role: Literal["assistant"] | None = Field(default=None, exclude_if=_absent)
    content: str | None = Field(default=None, exclude_if=_absent)
    tool_calls: list[ToolCallDelta] | None = Field(default=None, exclude_if=_absent)


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    finish_reason: str | None = None


class ChatCompletionChunk(BaseModel):
    """One ``chat.completion.chunk``: OpenAI's, plus ``rag_sources`` and ``memory_sources`` (the last
    chunk, with empty ``choices``) and ``event`` (Open WebUI's events, e.g. ``{"type": "source",
    "data": {...}}``, with empty ``choices``). A field left None is absent from the JSON."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    rag_sources: list[RagSource] | None = Field(default=None, exclude_if=_absent)
    memory_sources: list[MemorySource] | None = Field(default=None, exclude_if=_absent)
    usage: Usage | None = Field(
        default=None, exclude_if=_absent, description="With stream_options.include_usage, in the last chunk."
    )
    event: SourceEvent | None = Field(
        default=None, exclude_if=_absent, description="An Open WebUI source event (a citation), with empty choices."
    )

    def sse(self) -> str:
        """The chunk as one SSE event."""
        return f"data: {self.model_dump_json()}\n\n"


def event_stream_schema() -> dict[str, Any]:
    """The JSON schema of one event of a streamed answer (self-contained: no references)."""
    payload = {
        "anyOf": [
            _inline(ChatCompletionChunk.model_json_schema(mode="serialization")),
            _inline(OpenAIErrorBody.model_json_schema(mode="serialization")),
        ]
    }
    return {
        "type": "object",
        "required": ["data"],
        "properties": {"data": {"type": "string"}},
        # The payload is JSON except in the last event of a stream that did not fail.
        "if": {"properties": {"data": {"const": DONE}}},
        "else": {"properties": {"data": {"contentMediaType": "application/json", "contentSchema": payload}}},
        "description": "One SSE event: `data: <chat.completion.chunk JSON>`; after the role chunk (and after a "
        "tool round that found passages) one chunk per cited document carries an Open WebUI `source` `event`, "
        "with empty `choices`; the chunk after the finish carries "
        "`rag_sources` and `memory_sources` (and `usage` with stream_options.include_usage), then `data: [DONE]`. "
        "A stream that fails after it started ends with `data: <error JSON>` instead.",
    }


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with each ``#/$defs/...`` reference replaced by its definition (none is recursive)."""
    definitions: dict[str, Any] = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            reference = node.get("$ref")
            if isinstance(reference, str) and reference.startswith("#/$defs/"):
                siblings = {key: resolve(value) for key, value in node.items() if key != "$ref"}
                return {**resolve(copy.deepcopy(definitions[reference.removeprefix("#/$defs/")])), **siblings}
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved

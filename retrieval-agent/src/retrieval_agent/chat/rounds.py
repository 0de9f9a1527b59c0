"""What the upstream model sends back in one round: the tool calls of a whole answer, or gathered
from a stream's deltas, and the first choice of a completion."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

ToolCall = dict[str, Any]


def tool_calls_of(raw: object) -> list[ToolCall]:
    """An answer's tool calls in OpenAI's request shape (ids made up where the upstream sent none)."""
    calls: list[ToolCall] = []
    for index, item in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(item, dict):
            continue
        function = item.get("function") if isinstance(item.get("function"), dict) else {}
        assert isinstance(function, dict)
        calls.append(
            {
                "id": str(item.get("id") or f"call_{uuid.uuid4().hex[:12]}_{index}"),
                "type": "function",
                "function": {
                    "name": str(function.get("name") or ""),
                    "arguments": str(function.get("arguments") or ""),
                },
            }
        )
    return calls


def _accumulate(calls: dict[int, ToolCall], delta: object) -> None:
    """Add one streamed tool-call delta (id and name come once, the arguments in pieces)."""
    if not isinstance(delta, dict):
        return
    index = delta.get("index")
    slot = calls.setdefault(index if isinstance(index, int) else len(calls), {"id": None, "function": {}})
    if delta.get("id"):
        slot["id"] = delta["id"]
    function = delta.get("function")
    if isinstance(function, dict):
        if function.get("name"):
            slot["function"]["name"] = function["name"]
        if function.get("arguments"):
            slot["function"]["arguments"] = slot["function"].get("arguments", "") + function["arguments"]


@dataclass
class StreamedRound:
    """One streamed round as it comes in: tool-call deltas gathered, text after a tool call held."""

    gathered: dict[int, ToolCall] = field(default_factory=lambda: dict[int, ToolCall]())
    held: list[str] = field(default_factory=lambda: list[str]())
    finish: str | None = None
    said: bool = False  # any text or tool call at all
    wrote: bool = False  # any text

    def take(self, part: dict[str, Any]) -> list[str]:
        """Read one chunk; returns the text to send on now."""
        now: list[str] = []
        for choice in part.get("choices") or []:
            delta = choice.get("delta") or {}
            for call_delta in delta.get("tool_calls") or []:
                _accumulate(self.gathered, call_delta)
                self.said = True
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.said = self.wrote = True
                if self.gathered:
                    self.held.append(content)  # text of a round that may not be the last
                else:
                    now.append(content)
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])
        return now

    def tool_calls(self) -> list[ToolCall]:
        return tool_calls_of([self.gathered[index] for index in sorted(self.gathered)])


def first_choice(answer: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A whole completion's first choice and its message (empty where the upstream sent none)."""
    choices = answer.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message")
    return choice, message if isinstance(message, dict) else {}


async def one_chunk(answer: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """A whole completion as the one chunk of a stream (its tool calls as complete deltas)."""
    choice, message = first_choice(answer)
    calls = [{"index": index, **call} for index, call in enumerate(tool_calls_of(message.get("tool_calls")))]
    delta = {"content": message.get("content"), "tool_calls": calls}
    yield {
        "choices": [{"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason")}],
        "usage": answer.get("usage"),
    }

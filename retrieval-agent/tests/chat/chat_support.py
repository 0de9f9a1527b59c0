"""Helpers for the chat tests: settings pointing at a scripted upstream, SSE parsing."""

from __future__ import annotations

import json
from typing import Any

from retrieval_agent.settings import Settings

from ..conftest import make_settings  # noqa: TID252

UPSTREAM_KEY = "upstream-secret-key-0123456789-abcdef"
QUESTION = "When was the Eiffel Tower completed?"


def chat_settings(base_url: str | None, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "chat_upstream_base_url": base_url,
        "chat_upstream_api_key": UPSTREAM_KEY,
        "chat_default_model": "scripted",
        "chat_context_k": 3,
    }
    values.update(overrides)
    return make_settings(**values)


def chat_body(model: str = "scripted", **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": QUESTION}]}
    values.update(overrides)
    return values


def sse_events(raw: str) -> list[str]:
    """The ``data:`` payloads of an SSE body, in order; asserts every event is one data line."""
    events = []
    for block in raw.split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        assert "\n" not in block, block
        events.append(block.removeprefix("data: "))
    return events


def chunks(events: list[str]) -> list[dict[str, Any]]:
    """The JSON chunks before ``[DONE]``."""
    assert events[-1] == "[DONE]", events[-3:]
    return [json.loads(event) for event in events[:-1]]


def streamed_text(parsed: list[dict[str, Any]]) -> str:
    return "".join(
        choice["delta"].get("content") or "" for chunk in parsed for choice in chunk["choices"] if "delta" in choice
    )


def system_text(request: dict[str, Any]) -> str:
    """The system messages an upstream request carried, joined."""
    return "\n".join(m["content"] for m in request["messages"] if m.get("role") == "system")


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]

"""The query-generation wire path end to end against a scripted OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from retrieval_agent.adapters.llm import build_query_model
from retrieval_agent.search.queries import QueryGenerator

from ..conftest import make_settings  # noqa: TID252


def completion(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "proxy-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": tool_name, "arguments": json.dumps(arguments)},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def test_generation_through_an_openai_compatible_proxy(serve: Callable[[Any], str]) -> None:
    requests: list[tuple[dict[str, Any], str | None]] = []

    async def chat(request: Request) -> JSONResponse:
        payload = await request.json()
        requests.append((payload, request.headers.get("authorization")))
        tool_name = payload["tools"][0]["function"]["name"]
        return JSONResponse(completion(tool_name, {"queries": ["ARoS opening hours", "ARoS tickets"]}))

    base = serve(Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])]))
    settings = make_settings(agent_api_base_url=f"{base}/v1", agent_api_key="proxy-key", agent_model="proxy-model")
    model = build_query_model(settings)
    assert model is not None
    generator = QueryGenerator(model, timeout=10, max_queries=3)
    queries = anyio.run(lambda: generator.generate("When is ARoS open?"))
    assert queries == ["ARoS opening hours", "ARoS tickets"]
    payload, authorization = requests[0]
    assert payload["model"] == "proxy-model"
    assert authorization == "Bearer proxy-key"
    assert any("When is ARoS open?" in str(message.get("content")) for message in payload["messages"])


def test_no_model_without_endpoint() -> None:
    assert build_query_model(make_settings()) is None

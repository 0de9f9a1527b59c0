from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.search.queries import (
    DEFAULT_TEMPLATE,
    ChatMessage,
    QueryGenerator,
    ResolvedQueries,
    render_prompt,
    resolve_queries,
)

CHAT = [ChatMessage(role="user", content="Hvad koster en billet?"), ChatMessage(role="assistant", content="Hvilken?")]
LAST = ChatMessage(role="user", content="Til Aarhus museum")


def generator_returning(queries: list[str], delay: float = 0.0) -> QueryGenerator:
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if delay:
            await anyio.sleep(delay)
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"queries": queries})])

    return QueryGenerator(FunctionModel(function=respond), timeout=0.5, max_queries=3)


def resolve(
    queries: Any, messages: Any, generator: QueryGenerator | None, metrics: SearchMetrics | None = None
) -> ResolvedQueries:
    return anyio.run(
        lambda: resolve_queries(queries, messages, generator=generator, metrics=metrics or SearchMetrics())
    )


def test_explicit_queries_win_when_they_are_not_the_bypass_echo() -> None:
    resolved = resolve(["billetpris Aarhus museum", ""], [*CHAT, LAST], generator_returning(["x"]))
    assert resolved == ResolvedQueries(["billetpris Aarhus museum"], primary="Til Aarhus museum", source="explicit")


def test_bypass_echo_lets_the_llm_generate() -> None:
    resolved = resolve(
        ["Til Aarhus museum"], [*CHAT, LAST], generator_returning(["ARoS billetpris", "aros  ", "ARoS entré"])
    )
    assert resolved.source == "generated"
    assert resolved.queries == ["ARoS billetpris", "aros", "ARoS entré"][:3]
    assert resolved.primary == "Til Aarhus museum"


def test_generation_caps_and_dedups() -> None:
    resolved = resolve([""], [LAST], generator_returning(["a", "A", " ", "b", "c", "d"]))
    assert resolved.queries == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("generator", "reason"),
    [(generator_returning([" "]), "empty"), (generator_returning(["late"], delay=2), "timeout")],
)
def test_generation_failure_falls_back_and_counts(generator: QueryGenerator, reason: str) -> None:
    metrics = SearchMetrics()
    resolved = resolve([""], [*CHAT, LAST], generator, metrics)
    assert resolved == ResolvedQueries(["Til Aarhus museum"], primary="Til Aarhus museum", source="fallback")
    assert f'query_generation_fallbacks_total{{reason="{reason}"}} 1.0' in metrics.render().decode()


def test_without_generator_the_last_user_message_is_used() -> None:
    assert resolve(None, [*CHAT, LAST], None).queries == ["Til Aarhus museum"]
    assert resolve([" "], [ChatMessage(role="assistant", content="hi")], None).source == "none"


def test_test_model_output_is_accepted() -> None:
    generator = QueryGenerator(TestModel(custom_output_args={"queries": ["from test model"]}), timeout=5, max_queries=3)
    assert resolve(None, [LAST], generator).queries == ["from test model"]


def test_render_prompt_substitutes_dollar_placeholders_only() -> None:
    now = datetime(2026, 11, 21, tzinfo=UTC)
    prompt = render_prompt("date=$current_date {braces} $unknown\n$chat_history", [*CHAT, LAST], now=now)
    assert prompt == (
        "date=2026-11-21 {braces} $unknown\nUSER: Hvad koster en billet?\nASSISTANT: Hvilken?\nUSER: Til Aarhus museum"
    )
    assert "2026-11-21" in render_prompt("", [LAST], now=now)
    assert "$chat_history" in DEFAULT_TEMPLATE

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from rag_runtime.store import ChunkStore
from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.search.queries import (
    DEFAULT_TEMPLATE,
    ChatMessage,
    FollowUpPolicy,
    QueryGenerator,
    ResolvedQueries,
    is_follow_up,
    render_prompt,
    resolve_queries,
)

from ..conftest import AUTH, make_settings  # noqa: TID252
from ..scripted_llm import ScriptedLLM, Status  # noqa: TID252

CHAT = [ChatMessage(role="user", content="Hvad koster en billet?"), ChatMessage(role="assistant", content="Hvilken?")]
LAST = ChatMessage(role="user", content="Til Aarhus museum")


def generator_returning(queries: list[str], delay: float = 0.0, timeout: float = 30.0) -> QueryGenerator:
    """A generator answering ``queries`` after ``delay``; the default timeout leaves a loaded machine
    time for the first run's set-up (0.5 s once made the "empty" case time out under `make test`)."""

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if delay:
            await anyio.sleep(delay)
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"queries": queries})])

    return QueryGenerator(FunctionModel(function=respond), timeout=timeout, max_queries=3)


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
    [(generator_returning([" "]), "empty"), (generator_returning(["late"], delay=2, timeout=0.5), "timeout")],
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


FIRST = ChatMessage(role="user", content="Which symptoms must the kindergarten report?")
ANSWER = ChatMessage(role="assistant", content="Fever and blisters.")


def resolve_follow_up(queries: Any, messages: Any, policy: FollowUpPolicy, metrics: SearchMetrics) -> ResolvedQueries:
    return anyio.run(lambda: resolve_queries(queries, messages, generator=None, metrics=metrics, follow_up=policy))


@pytest.mark.parametrize(
    "text",
    [
        "How soon?",  # short
        "And how soon must it be reported to the ministry of education?",  # opens with "and"
        "What about the reporting deadline for the private kindergartens in Taipei?",  # "what about"
        "How quickly does the school have to send them to the campus safety network?",  # pronoun
        "Hvad med de private børnehaver i Aarhus og resten af Jylland?",  # Danish opener
    ],
)
def test_follow_up_turns_are_recognised(text: str) -> None:
    assert is_follow_up(text, max_words=6)


@pytest.mark.parametrize(
    "text",
    [
        "How many people received the first spam message on ARPANET?",
        "Hvilken dag blev Europa-Parlamentets session afbrudt i december?",
        "",
    ],
)
def test_self_contained_questions_are_not_follow_ups(text: str) -> None:
    assert not is_follow_up(text, max_words=6)


def test_a_follow_up_is_searched_with_the_previous_user_turn() -> None:
    metrics = SearchMetrics()
    follow = ChatMessage(role="user", content="And how soon?")
    resolved = resolve_follow_up([follow.content], [FIRST, ANSWER, follow], FollowUpPolicy("combined"), metrics)
    combined = f"{FIRST.content} {follow.content}"
    assert resolved == ResolvedQueries([combined], primary=combined, source="follow_up")
    assert metrics.registry.get_sample_value("search_follow_ups_total") == 1


def test_both_mode_also_searches_the_follow_up_alone() -> None:
    follow = ChatMessage(role="user", content="And how soon?")
    resolved = resolve_follow_up(None, [FIRST, ANSWER, follow], FollowUpPolicy("both"), SearchMetrics())
    assert resolved.queries == [follow.content, f"{FIRST.content} {follow.content}"]


def test_off_mode_and_first_turns_search_the_message_alone() -> None:
    follow = ChatMessage(role="user", content="And how soon?")
    off = resolve_follow_up(None, [FIRST, ANSWER, follow], FollowUpPolicy("off"), SearchMetrics())
    assert off == ResolvedQueries([follow.content], primary=follow.content, source="last_user_message")
    alone = resolve_follow_up(None, [follow], FollowUpPolicy("combined"), SearchMetrics())
    assert alone.source == "last_user_message"


def test_a_self_contained_turn_after_another_topic_is_searched_alone() -> None:
    switch = ChatMessage(role="user", content="How many people received the first spam message on ARPANET?")
    resolved = resolve_follow_up([switch.content], [FIRST, ANSWER, switch], FollowUpPolicy("combined"), SearchMetrics())
    assert resolved.queries == [switch.content]


def test_explicit_queries_that_are_not_the_echo_are_not_combined() -> None:
    follow = ChatMessage(role="user", content="And how soon?")
    resolved = resolve_follow_up(["reporting deadline"], [FIRST, ANSWER, follow], FollowUpPolicy(), SearchMetrics())
    assert resolved == ResolvedQueries(["reporting deadline"], primary=follow.content, source="explicit")


def test_a_failed_llm_still_gets_the_follow_up_context() -> None:
    follow = ChatMessage(role="user", content="And how soon?")

    async def run() -> ResolvedQueries:
        return await resolve_queries(
            [follow.content],
            [FIRST, ANSWER, follow],
            generator=generator_returning(["late"], delay=2.0, timeout=0.5),
            metrics=SearchMetrics(),
            follow_up=FollowUpPolicy(),
        )

    resolved = anyio.run(run)
    assert resolved.source == "follow_up"
    # The default: the follow-up alone and with its context, fused.
    assert resolved.queries == [follow.content, f"{FIRST.content} {follow.content}"]


def test_open_webui_template_variables_are_filled() -> None:
    chat = [ChatMessage(role="user", content=f"turn {index}") for index in range(6)]
    template = "{{CURRENT_DATE}} | {{MESSAGES:END:2}} | {{MESSAGES:START:1}} | {{prompt:start:4}} | {{prompt}}"
    rendered = render_prompt(template, chat, now=datetime(2026, 11, 23, tzinfo=UTC))
    assert rendered == "2026-11-23 | USER: turn 4\nUSER: turn 5 | USER: turn 0 | turn | turn 5"


def test_open_webui_middletruncate_keeps_both_ends() -> None:
    chat = [ChatMessage(role="user", content=f"turn {index}") for index in range(5)]
    assert render_prompt("{{MESSAGES:MIDDLETRUNCATE:2}}", chat) == "USER: turn 0\nUSER: turn 4"
    assert render_prompt("{{MESSAGES}}", chat[:2]) == "USER: turn 0\nUSER: turn 1"


# Query generation over HTTP: the app in linear mode, its LLM a scripted OpenAI-compatible server.

ECHO = "ECHOED-PROMPT Hvad koster en billet? Authorization: Bearer sk-upstream-0123456789abcdef"
SEARCH_BODY = {
    "queries": ["What is the powerhouse of the cell?"],
    "messages": [{"role": "user", "content": "What is the powerhouse of the cell?"}],
    "collection_names": ["kb-a"],
    "k": 1,
}


def query_generation_api(
    serve: Callable[[Any], str], app_factory: Callable[..., TestClient], store: ChunkStore, reply: Status
) -> tuple[TestClient, ScriptedLLM]:
    llm = ScriptedLLM(lambda _: reply)
    settings = make_settings(
        enable_query_generation=True, agent_api_base_url=f"{serve(llm.app())}/v1", agent_api_key="k"
    )
    return app_factory(settings, store), llm


def test_a_failing_llm_gets_one_sdk_retry_then_the_search_falls_back(
    serve: Callable[[Any], str], app_factory: Callable[..., TestClient], seeded: ChunkStore
) -> None:
    api, llm = query_generation_api(serve, app_factory, seeded, Status(503))
    response = api.post("/search", json=SEARCH_BODY, headers=AUTH)
    assert response.status_code == 200, response.text
    assert "Mitochondria" in response.json()["documents"][0][0]
    assert len(llm.requests) == 2  # the request and one SDK retry, as for the agent
    assert 'query_generation_fallbacks_total{reason="llm_error"} 1.0' in api.get("/metrics", headers=AUTH).text


def test_an_llm_error_body_is_logged_only_at_debug_capped_and_redacted(
    serve: Callable[[Any], str],
    app_factory: Callable[..., TestClient],
    seeded: ChunkStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, _ = query_generation_api(
        serve, app_factory, seeded, Status(400, json.dumps({"error": {"message": ECHO + " x" * 2_000}}))
    )
    with caplog.at_level(logging.DEBUG, logger="retrieval_agent"):
        response = api.post("/search", json=SEARCH_BODY, headers=AUTH)
    assert response.status_code == 200, response.text
    ours = [record for record in caplog.records if record.name.startswith("retrieval_agent")]
    warnings = [record.getMessage() for record in ours if record.levelno >= logging.WARNING]
    assert warnings == [
        "query generation fell back to the last user message (llm_error): "
        "query generation failed: ModelRequestRejectedError (HTTP 400)"
    ]
    details = [record.getMessage() for record in ours if "ECHOED-PROMPT" in record.getMessage()]
    assert details
    assert all(record.levelno == logging.DEBUG for record in ours if "ECHOED-PROMPT" in record.getMessage())
    assert all("sk-upstream" not in message and len(message) <= 600 for message in details)

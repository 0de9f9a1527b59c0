"""The agent's pure parts: plain-text query parsing, filters, the tenant guard, the prompt, settings."""

from __future__ import annotations

from datetime import date

import pytest
from pydantic_ai import ModelRetry
from qdrant_client import models

from retrieval_agent.adapters.llm import model_name
from retrieval_agent.agent.filters import DocumentFilters, filter_conditions, ingested_on, name_matches, seq_at
from retrieval_agent.agent.loop import MAX_TOOL_ARGS_CHARS, strip_tenant_args
from retrieval_agent.agent.plain_text import MAX_QUERY_CHARS, parse_queries
from retrieval_agent.agent.prompt import DEFAULT_SYSTEM_PROMPT, system_prompt, user_prompt
from retrieval_agent.search.queries import ChatMessage
from retrieval_agent.search.scope import scoped_filter
from shared_contract import ContractConfigError

from ..conftest import make_settings  # noqa: TID252


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"queries": ["ARoS opening hours", "ARoS tickets"]}', ["ARoS opening hours", "ARoS tickets"]),
        ('["one query"]', ["one query"]),
        ('```json\n{"queries": ["fenced"]}\n```', ["fenced"]),
        ('[TOOL_CALLS]retrieve{"queries": ["mistral new"]}', ["mistral new"]),
        ('[TOOL_CALLS][{"name": "retrieve", "arguments": {"queries": ["mistral old"]}}]', ["mistral old"]),
        ('{"name": "retrieve", "arguments": "{\\"queries\\": [\\"stringified args\\"]}"}', ["stringified args"]),
        ('retrieve(queries=["python style", "second"])', ["python style", "second"]),
        ("Here are the queries:\n1. budget 2024\n2. budget approval", ["budget 2024", "budget approval"]),
        ("- first\n- second\n- third\n- fourth", ["first", "second", "third"]),
        ("opening hours ARoS", ["opening hours ARoS"]),
        ("DONE", []),
        ("", []),
        ('{"queries": []}', []),
    ],
)
def test_plain_text_queries(text: str, expected: list[str]) -> None:
    assert parse_queries(text) == expected


def test_text_nested_past_the_stack_holds_no_query() -> None:
    # json.loads raises RecursionError (not ValueError) on it: read as a line, like any other non-JSON text.
    assert parse_queries("[" * 5_000) == ["[" * MAX_QUERY_CHARS]
    # Parseable but deeper than any tool-call shape: no query.
    assert parse_queries("[" * 500 + '"deep"' + "]" * 500) == []


def test_prose_is_not_a_query() -> None:
    prose = " ".join(["word"] * 60)
    assert parse_queries(prose) == []


def test_tenant_keys_are_stripped_at_any_level() -> None:
    args, named = strip_tenant_args({"queries": ["q"], "collection_names": ["x"], "filters": {"tenant": "y"}})
    assert args == {"queries": ["q"], "filters": {}}
    assert named == ["collection_names", "filters.tenant"]
    raw = '{"queries": ["q"], "knowledge_base": "kb-b"}'
    args, named = strip_tenant_args(raw)
    assert args == {"queries": ["q"]}
    assert named == ["knowledge_base"]
    assert strip_tenant_args('{"queries": ["q"]}') == ('{"queries": ["q"]}', [])
    assert strip_tenant_args("not json") == ("not json", [])


@pytest.mark.parametrize(
    ("raw", "problem"),
    [("[" * 5_000, "nested too deeply"), ('{"queries": ["' + "q" * MAX_TOOL_ARGS_CHARS + '"]}', "too long")],
)
def test_unreadable_tool_arguments_go_back_to_the_model(raw: str, problem: str) -> None:
    with pytest.raises(ModelRetry, match=problem):
        strip_tenant_args(raw)


def test_filters_narrow_the_tenants_never_widen_them() -> None:
    filters = DocumentFilters(
        file_ids=["a", " "], languages=["EN"], ingested_after=date(2025, 1, 1), ingested_before=date(2025, 1, 31)
    )
    conditions = filter_conditions(filters)
    selector = scoped_filter(["kb-a"], conditions)
    assert isinstance(selector.must, list)
    tenant = selector.must[0]
    assert isinstance(tenant, models.FieldCondition)
    assert tenant.key == "meta.collection_name"
    assert selector.must_not is not None  # pending points stay hidden
    file_ids, languages, dates = conditions
    assert isinstance(file_ids, models.FieldCondition)
    assert file_ids.match == models.MatchAny(any=["a"])
    assert isinstance(languages, models.Filter)
    assert languages.should is not None
    assert isinstance(dates, models.FieldCondition)
    assert dates.range is not None
    assert dates.range.gte == seq_at(date(2025, 1, 1))
    assert dates.range.lt == seq_at(date(2025, 2, 1))
    assert filter_conditions(None) == []
    assert filter_conditions(DocumentFilters()) == []
    # Names resolved to no id: a condition matching nothing, not no condition.
    assert filter_conditions(DocumentFilters(file_names=["x"]), file_ids=[]) == [
        models.FieldCondition(key="meta.file_id", match=models.MatchAny(any=[]))
    ]


def test_dates_at_the_ends_of_the_calendar() -> None:
    (dates,) = filter_conditions(DocumentFilters(ingested_after=date.min, ingested_before=date.max))
    assert isinstance(dates, models.FieldCondition)
    assert dates.range == models.Range(gte=seq_at(date.min), lt=None)  # nothing is added after date.max
    # A seq past year 9999 (or the platform's time_t) is malformed, not a crash of the listing.
    assert ingested_on(10**20) is None
    assert ingested_on(10**40) is None


def test_filters_refuse_unknown_keys() -> None:
    with pytest.raises(ValueError, match="collection_names"):
        DocumentFilters.model_validate({"collection_names": ["kb-b"]})


def test_name_matching() -> None:
    assert name_matches({"name": "Budget 2024.xlsx"}, ["budget"])
    assert name_matches({"source": "plan.pdf"}, ["PLAN"])
    assert not name_matches({"name": "plan.pdf"}, ["budget"])


def test_model_name_keeps_bare_and_proxy_names() -> None:
    assert model_name("gpt-4o-mini") == "gpt-4o-mini"
    assert model_name("openai:gpt-4o-mini") == "gpt-4o-mini"
    assert model_name("openai/gpt-4o") == "openai/gpt-4o"  # LiteLLM's provider/model
    assert model_name("qwen2.5:3b") == "qwen2.5:3b"  # an Ollama tag
    assert model_name("openai:") == "openai:"


def test_system_prompt_override_and_placeholders() -> None:
    built_in = system_prompt("", max_iterations=4)
    assert "at most 4 `retrieve` calls" in built_in
    assert "$" not in built_in
    assert system_prompt("Custom: $max_iterations rounds, ${unknown}", max_iterations=2) == (
        "Custom: 2 rounds, ${unknown}"
    )
    assert "$max_iterations" in DEFAULT_SYSTEM_PROMPT


def test_user_prompt() -> None:
    chat = [ChatMessage(role="user", content="Hi"), ChatMessage(role="assistant", content="Hello")]
    prompt = user_prompt(chat, ["extra query"])
    assert "USER: Hi\nASSISTANT: Hello" in prompt
    assert "- extra query" in prompt
    assert user_prompt([], ["only query"]).startswith("Search request:\n- only query")


def test_agent_settings_defaults_and_validation() -> None:
    settings = make_settings()
    assert settings.enable_agentic_rag is False
    assert (settings.agent_max_iterations, settings.agent_timeout) == (3, 60.0)
    assert (settings.agent_tool_preview_chars, settings.agent_preview_k, settings.agent_fetch_k) == (200, 5, 20)
    assert settings.agent_strict_tools is True
    assert settings.agent_system_prompt == ""
    assert settings.agent_conversation_history_messages == 4
    assert settings.agent_include_raw_query is True
    assert settings.agent_model == "gpt-4o-mini"
    with pytest.raises((ValueError, ContractConfigError)):
        make_settings(agent_max_iterations=0)
    with pytest.raises((ValueError, ContractConfigError)):
        make_settings(agent_timeout=0)

"""The agentic loop driven by PydanticAI's FunctionModel and TestModel over the seeded store."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.test import TestModel

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore
from retrieval_agent.agent.loop import AgenticSearch, AgentResult
from retrieval_agent.agent.tools import AgentStep
from retrieval_agent.search.queries import ChatMessage

from .agent_support import (  # noqa: TID252
    RecordingReranker,
    Script,
    agent_settings,
    agentic,
    call,
    linear,
    say,
    tool_returns,
)

QUESTION = "When was the Eiffel Tower completed?"


def run(agent: AgenticSearch, question: str = QUESTION, **kwargs: Any) -> AgentResult:
    values: dict[str, Any] = {
        "queries": None,
        "messages": [ChatMessage(role="user", content=question)],
        "collection_names": ["kb-a"],
        "k": 3,
    }
    values.update(kwargs)
    return anyio.run(lambda: agent.run(**values))


def texts(result: AgentResult) -> list[str]:
    return [hit.content for hit in result.result_sets[0]]


def test_tool_call_returns_the_full_chunks_with_the_linear_relevance(
    seeded: ChunkStore, embedder: ContractEmbedder
) -> None:
    script = Script([lambda _: call("retrieve", queries=["Eiffel Tower completion year"]), lambda _: say("DONE")])
    settings = agent_settings()
    result = run(agentic(settings, seeded, embedder, script.model()))
    assert result.outcome == "answered"
    assert result.fallback_reason is None
    assert result.iterations == 1
    assert len(result.result_sets) == 1
    hits = result.result_sets[0]
    assert "Eiffel Tower in Paris" in hits[0].content
    assert {hit.meta["collection_name"] for hit in hits} == {"kb-a"}
    # The same relevance the linear pipeline computes for that chunk (same functions, no copy).
    search = linear(settings, seeded, embedder)
    expected = anyio.run(lambda: search.retrieve("Eiffel Tower completion year", ["kb-a"], 20))
    by_text = {hit.content: hit.relevance for hit in expected.hits}
    assert hits[0].relevance > 0
    assert hits[0].relevance >= by_text[hits[0].content] - 1e-9
    assert [step.tool for step in result.steps] == ["retrieve"]


def test_the_model_sees_previews_and_the_response_the_full_text(seeded: ChunkStore, embedder: ContractEmbedder) -> None:
    script = Script([lambda _: call("retrieve", queries=["Eiffel Tower"]), lambda _: say("DONE")])
    settings = agent_settings(agent_preview_k=2, agent_tool_preview_chars=30)
    result = run(agentic(settings, seeded, embedder, script.model()), k=4)
    returned = tool_returns(script.seen[-1])[0]
    assert isinstance(returned, dict)
    assert len(returned["results"]) == 2
    assert all(len(item["text"]) <= 30 for item in returned["results"])
    assert returned["found"] == len(result.result_sets[0]) == 4
    # No tenant name, no internal fields reach the model; the file id does (read_document needs it).
    assert all("collection_name" not in item and "user_id" not in item for item in returned["results"])
    assert all(item.get("file_id") for item in returned["results"])
    assert any(len(text) > 30 for text in texts(result))


@pytest.mark.parametrize("include_raw", [True, False])
def test_raw_question_seeds_the_first_round(seeded: ChunkStore, embedder: ContractEmbedder, include_raw: bool) -> None:
    script = Script(
        [
            lambda _: call("retrieve", queries=["mitochondria"]),
            lambda _: call("retrieve", queries=["cell energy"]),
            lambda _: say("DONE"),
        ]
    )
    result = run(agentic(agent_settings(agent_include_raw_query=include_raw), seeded, embedder, script.model()))
    first, second = (step.detail["queries"] for step in result.steps)
    assert first == (["mitochondria", QUESTION] if include_raw else ["mitochondria"])
    assert second == ["cell energy"]
    assert result.iterations == 2


def test_plain_text_queries_run_a_direct_search_without_rerank(seeded: ChunkStore, embedder: ContractEmbedder) -> None:
    reranker = RecordingReranker()
    script = Script([lambda _: say('{"queries": ["powerhouse of the cell ATP"]}')])
    settings = agent_settings(agent_include_raw_query=False)
    result = run(agentic(settings, seeded, embedder, script.model(), reranker=reranker), "What makes ATP?")
    assert result.outcome == "plain_text"
    assert "Mitochondria" in texts(result)[0]
    assert reranker.calls == []
    assert result.steps[0].tool == "plain_text"
    assert result.steps[0].detail["queries"] == ["powerhouse of the cell ATP"]


def test_retrieve_reranks_against_the_users_question(seeded: ChunkStore, embedder: ContractEmbedder) -> None:
    reranker = RecordingReranker()
    script = Script([lambda _: call("retrieve", queries=["Eiffel"]), lambda _: say("DONE")])
    run(agentic(agent_settings(agent_fetch_k=7), seeded, embedder, script.model(), reranker=reranker))
    assert reranker.calls
    assert reranker.calls[0][0] == QUESTION


def test_a_model_that_never_stops_is_capped_and_still_answers(seeded: ChunkStore, embedder: ContractEmbedder) -> None:
    def forever(messages: list[ModelMessage]) -> ModelResponse:
        return call("retrieve", queries=[f"query {len(messages)}"])

    script = Script([forever])
    result = run(agentic(agent_settings(agent_max_iterations=2), seeded, embedder, script.model()))
    assert result.outcome == "iteration_cap"
    assert result.iterations == 2
    assert result.result_sets[0], "what the rounds found is returned"
    assert [step.tool for step in result.steps] == ["retrieve", "retrieve"]


def test_a_model_looping_on_other_tools_is_stopped_by_the_request_cap(
    seeded: ChunkStore, embedder: ContractEmbedder
) -> None:
    script = Script([lambda _: call("list_documents", recent=True, limit=5)])
    result = run(agentic(agent_settings(agent_max_iterations=1), seeded, embedder, script.model()))
    # Nothing was retrieved: the linear pipeline answers, and says so.
    assert result.outcome == "fallback"
    assert result.fallback_reason == "iteration_cap"
    assert len(script.seen) == 4  # 2 x AGENT_MAX_ITERATIONS + 2 model requests
    assert "Eiffel" in texts(result)[0]


def test_a_hanging_model_returns_what_was_retrieved(seeded: ChunkStore, embedder: ContractEmbedder) -> None:
    async def hang(_: list[ModelMessage]) -> ModelResponse:
        await anyio.sleep(30)
        return say("DONE")

    script = Script([lambda _: call("retrieve", queries=["Eiffel Tower"]), hang])
    result = run(agentic(agent_settings(agent_timeout=0.5), seeded, embedder, script.model()))
    assert result.outcome == "timeout"
    assert result.fallback_reason is None
    assert "Eiffel" in texts(result)[0]


def test_a_model_hanging_before_any_retrieval_falls_back_to_linear(
    seeded: ChunkStore, embedder: ContractEmbedder
) -> None:
    async def hang(_: list[ModelMessage]) -> ModelResponse:
        await anyio.sleep(30)
        return say("DONE")

    search = agentic(agent_settings(agent_timeout=0.3), seeded, embedder, Script([hang]).model())
    result = run(search)
    assert result.outcome == "fallback"
    assert result.fallback_reason == "timeout"
    assert "Eiffel" in texts(result)[0]
    assert search.metrics.agent_fallbacks.labels(reason="timeout")._value.get() == 1


def test_a_collection_argument_is_ignored_and_counted(seeded: ChunkStore, embedder: ContractEmbedder) -> None:
    script = Script(
        [
            lambda _: call(
                "retrieve",
                queries=["secret code word BANANA"],
                collection_names=["kb-b"],
                filters={"collection": "kb-b"},
            ),
            lambda _: say("DONE"),
        ]
    )
    search = agentic(agent_settings(), seeded, embedder, script.model())
    result = run(search, "What is the secret code word?", k=10)
    assert result.outcome == "answered"
    assert all(hit.meta["collection_name"] == "kb-a" for hit in result.result_sets[0])
    assert not any("BANANA" in text for text in texts(result))
    assert search.metrics.agent_tenant_violations._value.get() == 1
    assert result.steps[0].tool == "refused"


def test_another_tenants_file_is_not_found_and_counted(seeded: ChunkStore, embedder: ContractEmbedder) -> None:
    script = Script(
        [
            lambda _: call("read_document", file_id="file-secret.txt"),
            lambda _: call("retrieve", queries=["code word"], filters={"file_ids": ["file-secret.txt"]}),
            lambda _: say("DONE"),
        ]
    )
    search = agentic(agent_settings(), seeded, embedder, script.model())
    result = run(search, "What is the secret code word?")
    replies = tool_returns(script.seen[-1])
    assert replies[0] == {
        "file_id": "file-secret.txt",
        "found": False,
        "note": "No such document in the searchable collections.",
    }
    assert replies[1]["found"] == 0
    assert texts(result) == []  # one empty round: legitimately nothing, not a hidden failure
    assert result.outcome == "answered"
    assert search.metrics.agent_tenant_violations._value.get() == 1
    # A file that exists nowhere is no violation.
    missing = Script([lambda _: call("read_document", file_id="no-such-file"), lambda _: say("DONE")])
    other = agentic(agent_settings(), seeded, embedder, missing.model())
    run(other)
    assert other.metrics.agent_tenant_violations._value.get() == 0


def test_file_name_filter_narrows_the_search(seeded: ChunkStore, embedder: ContractEmbedder) -> None:
    script = Script(
        [
            lambda _: call("retrieve", queries=["city"], filters={"file_names": ["DENMARK"]}),
            lambda _: call("retrieve", queries=["city"], filters={"file_names": ["nonexistent"]}),
            lambda _: say("DONE"),
        ]
    )
    result = run(agentic(agent_settings(), seeded, embedder, script.model()), "Which city?", k=5)
    first, second = tool_returns(script.seen[-1])
    assert {item["name"] for item in first["results"]} == {"denmark.pdf"}
    assert second["found"] == 0
    assert "list_documents" in second["note"]
    assert {hit.meta["name"] for hit in result.result_sets[0]} == {"denmark.pdf"}


def test_test_model_drives_every_tool(seeded: ChunkStore, embedder: ContractEmbedder) -> None:
    search = AgenticSearch(
        agent_settings(), search=linear(agent_settings(), seeded, embedder), model=TestModel(call_tools="all")
    )
    result = run(search)
    assert result.outcome == "answered"
    assert {step.tool for step in result.steps} >= {"retrieve", "read_document", "list_documents"}
    # The raw question seeded the (TestModel-written) queries, so the answer is on topic.
    assert "Eiffel" in " ".join(texts(result))


def test_no_question_no_model_call(seeded: ChunkStore, embedder: ContractEmbedder) -> None:
    script = Script([lambda _: say("DONE")])
    result = run(agentic(agent_settings(), seeded, embedder, script.model()), queries=[" "], messages=None)
    assert result.outcome == "no_query"
    assert result.result_sets == [[]]
    assert script.seen == []


def test_explicit_queries_and_history_window_reach_the_prompt(seeded: ChunkStore, embedder: ContractEmbedder) -> None:
    script = Script([lambda _: call("retrieve", queries=["Aarhus"]), lambda _: say("DONE")])
    chat = [ChatMessage(role="user" if i % 2 == 0 else "assistant", content=f"message {i}") for i in range(8)]
    chat.append(ChatMessage(role="user", content="Where is Aarhus?"))
    search = agentic(agent_settings(agent_conversation_history_messages=3), seeded, embedder, script.model())
    anyio.run(lambda: search.run(queries=["Aarhus location"], messages=chat, collection_names=["kb-a"], k=2))
    prompt = str(script.seen[0][0].parts[-1].content)  # type: ignore[union-attr]
    assert "message 6" in prompt
    assert "message 5" not in prompt
    assert "Aarhus location" in prompt
    assert "Where is Aarhus?" in prompt


def test_one_agent_run_log_line_with_the_numbers(
    seeded: ChunkStore, embedder: ContractEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    script = Script([lambda _: call("retrieve", queries=["Eiffel"]), lambda _: say("DONE")])
    search = agentic(agent_settings(), seeded, embedder, script.model())
    with caplog.at_level(logging.INFO, logger="retrieval_agent.agent.loop"):
        run(search)
    lines = [record for record in caplog.records if record.getMessage() == "agent_run"]
    assert len(lines) == 1
    fields = lines[0].__dict__
    assert fields["outcome"] == "answered"
    assert fields["iterations"] == 1
    assert fields["tool_calls"] == {"retrieve": 1}
    assert fields["model_requests"] == 2
    assert (fields["tokens_in"], fields["tokens_out"]) == (200, 13)
    assert fields["model_ms"] >= 0
    assert fields["fallback_reason"] is None
    metrics = search.metrics
    assert metrics.agent_model_tokens.labels(direction="input")._value.get() == 200
    assert metrics.agent_tool_calls.labels(tool="retrieve")._value.get() == 1
    assert metrics.agent_requests.labels(outcome="answered")._value.get() == 1


def test_steps_serialise_for_the_debug_header(seeded: ChunkStore, embedder: ContractEmbedder) -> None:
    script = Script([lambda _: call("retrieve", queries=["Ærø ferry"]), lambda _: say("DONE")])
    result = run(agentic(agent_settings(), seeded, embedder, script.model()))
    encoded = result.steps_json()
    assert encoded.isascii()
    decoded = json.loads(encoded)
    assert decoded[0]["tool"] == "retrieve"
    assert decoded[0]["queries"][0] == "Ærø ferry"


def test_steps_over_a_budget_end_with_how_many_were_left_out() -> None:
    steps = [AgentStep("retrieve", {"round": n, "queries": ["x" * 300 + '"},{"']}, 3, 1.0) for n in range(1, 11)]
    result = AgentResult(result_sets=[[]], outcome="answered", steps=steps)
    whole = json.loads(result.steps_json())
    assert len(whole) == 10
    assert json.loads(result.steps_json(max_chars=len(result.steps_json()))) == whole
    for budget in (100, 1_000, 2_000):
        encoded = result.steps_json(max_chars=budget)
        assert len(encoded) <= budget
        decoded = json.loads(encoded)
        kept = decoded[:-1]
        assert kept == whole[: len(kept)]
        assert decoded[-1] == {"truncated": True, "omitted": 10 - len(kept)}

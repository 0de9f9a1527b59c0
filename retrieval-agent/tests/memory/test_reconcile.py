"""The reconciler's two model calls: typed outputs, handles mapped back to fact ids, one retry with the
reason for a decision that breaks a rule, the cap, and typed failures (never an empty result)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio
import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from retrieval_agent.memory.reconcile import (
    DECIDE_TOOL,
    EXTRACT_TOOL,
    CandidateFact,
    ExistingFact,
    MalformedDecisionError,
    Reconciler,
    ReconcileUnavailableError,
)

from ..scripted_llm import ScriptedLLM, Status  # noqa: TID252
from .memory_script import MemoryScript  # noqa: TID252

pytestmark = pytest.mark.anyio

PIP = ExistingFact(id="fact-pip", text="The user uses pip for Python packaging.")
TEA = ExistingFact(id="fact-tea", text="The user drinks green tea.")
POETRY = CandidateFact(text="The user uses poetry for Python packaging.", language="en")

Reply = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


def answering(*arguments: dict[str, Any], seen: list[list[ModelMessage]] | None = None) -> FunctionModel:
    """A model that calls the agent's output tool with each of ``arguments`` in turn."""
    replies = iter(arguments)

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if seen is not None:
            seen.append(list(messages))
        (tool,) = info.output_tools
        return ModelResponse(parts=[ToolCallPart(tool.name, next(replies))])

    return FunctionModel(reply)


def reconciler(model: Any, *, max_operations: int = 5, timeout: float = 5.0) -> Reconciler:
    return Reconciler(model, max_operations=max_operations, timeout=timeout)


def retry_texts(messages: Sequence[ModelMessage]) -> list[str]:
    """What the model was told back after its output tool call (PydanticAI 2 answers a failed output
    validation with the tool's return part; older versions with a retry prompt part)."""
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart)
    ]


async def test_extraction_returns_the_typed_facts() -> None:
    model = answering({"facts": [{"text": "The user lives in Oslo.", "language": "en"}]})
    found = await reconciler(model).extract("I moved to Oslo last year.", context=["hello"])
    assert found == [CandidateFact(text="The user lives in Oslo.", language="en")]


async def test_the_decision_maps_numbers_back_to_fact_ids() -> None:
    model = answering(
        {
            "operations": [
                {"action": "UPDATE", "fact": 1, "text": POETRY.text, "language": "en", "reason": "switched"},
                {"action": "DELETE", "fact": 2, "reason": "stopped drinking tea"},
                {"action": "ADD", "text": "The user lives in Oslo.", "reason": "new"},
            ]
        }
    )
    operations = await reconciler(model).decide([POETRY], [PIP, TEA])
    assert [(op.action, op.fact_id, op.text) for op in operations] == [
        ("UPDATE", "fact-pip", POETRY.text),
        ("DELETE", "fact-tea", None),
        ("ADD", None, "The user lives in Oslo."),
    ]
    assert operations[1].reason == "stopped drinking tea"


async def test_a_rule_broken_once_gets_one_retry_with_the_reason() -> None:
    seen: list[list[ModelMessage]] = []
    model = answering(
        {"operations": [{"action": "UPDATE", "fact": 7, "text": POETRY.text, "reason": "x"}]},
        {"operations": [{"action": "UPDATE", "fact": 1, "text": POETRY.text, "reason": "x"}]},
        seen=seen,
    )
    operations = await reconciler(model).decide([POETRY], [PIP])
    assert [(op.action, op.fact_id) for op in operations] == [("UPDATE", "fact-pip")]
    (retry,) = retry_texts(seen[-1])
    assert "must name one of the existing facts 1-1" in retry


@pytest.mark.parametrize(
    ("operation", "problem"),
    [
        ({"action": "UPDATE", "fact": 3, "text": "x", "reason": "r"}, "must name one of the existing facts"),
        ({"action": "ADD", "text": "  ", "reason": "r"}, "needs the fact's text"),
        ({"action": "DELETE", "fact": 1, "reason": ""}, "needs a reason"),
    ],
)
async def test_a_rule_broken_twice_is_a_malformed_decision(operation: dict[str, Any], problem: str) -> None:
    seen: list[list[ModelMessage]] = []
    model = answering({"operations": [operation]}, {"operations": [operation]}, seen=seen)
    with pytest.raises(MalformedDecisionError):
        await reconciler(model).decide([POETRY], [PIP])
    assert problem in retry_texts(seen[-1])[0]


async def test_touching_one_fact_twice_is_refused() -> None:
    twice = {
        "operations": [
            {"action": "UPDATE", "fact": 1, "text": POETRY.text, "reason": "a"},
            {"action": "DELETE", "fact": 1, "reason": "b"},
        ]
    }
    with pytest.raises(MalformedDecisionError):
        await reconciler(answering(twice, twice)).decide([POETRY], [PIP])


async def test_more_operations_than_the_cap_keep_the_first_ones() -> None:
    many = {"operations": [{"action": "ADD", "text": f"Fact {n}.", "reason": "new"} for n in range(6)]}
    operations = await reconciler(answering(many), max_operations=2).decide([POETRY], [])
    assert [op.text for op in operations] == ["Fact 0.", "Fact 1."]


async def test_a_model_that_fails_raises_a_typed_error(serve: Callable[[Any], str]) -> None:
    llm = ScriptedLLM(lambda body: Status(500))
    model = OpenAIChatModel("scripted", provider=OpenAIProvider(base_url=f"{serve(llm.app())}/v1", api_key="k"))
    with pytest.raises(ReconcileUnavailableError):
        await reconciler(model).extract("I use pip.")


async def test_a_model_slower_than_the_timeout_raises_a_typed_error() -> None:
    async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await anyio.sleep(5)
        raise AssertionError("not reached")

    with pytest.raises(ReconcileUnavailableError, match=r"longer than 0\.2 s"):
        await reconciler(FunctionModel(slow), timeout=0.2).decide([POETRY], [PIP])


async def test_over_the_openai_wire_a_switch_updates_the_old_fact(serve: Callable[[Any], str]) -> None:
    script = MemoryScript({"switched to poetry": [POETRY.text]}, topics=["packaging"])
    llm = ScriptedLLM(script)
    model = OpenAIChatModel("scripted", provider=OpenAIProvider(base_url=f"{serve(llm.app())}/v1", api_key="k"))
    memory = reconciler(model)
    candidates = await memory.extract("Actually, I switched to poetry.", context=["I use pip."])
    assert candidates == [POETRY]
    operations = await memory.decide(candidates, [TEA, PIP])
    assert [(op.action, op.fact_id, op.text) for op in operations] == [("UPDATE", "fact-pip", POETRY.text)]
    tools = [[tool["function"]["name"] for tool in body["tools"]] for body in llm.requests]
    assert tools == [[EXTRACT_TOOL], [DECIDE_TOOL]]

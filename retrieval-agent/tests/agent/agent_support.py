"""Helpers for the agent tests: FunctionModel scripts and an AgenticSearch over a seeded store."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore
from retrieval_agent.adapters.reranker import Reranker
from retrieval_agent.adapters.store import StoreSearch
from retrieval_agent.agent.loop import AgenticSearch
from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.search.pipeline import LinearSearch
from retrieval_agent.settings import Settings

from ..conftest import make_settings  # noqa: TID252


def agent_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"enable_agentic_rag": True, "agent_timeout": 10.0}
    values.update(overrides)
    return make_settings(**values)


def turn(messages: list[ModelMessage]) -> int:
    """How many answers the model gave so far in this run."""
    return sum(1 for message in messages if isinstance(message, ModelResponse))


def tool_returns(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """What the tools returned to the model so far (each a JSON object)."""
    returned: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    content: Any = part.content
                    assert isinstance(content, dict)
                    returned.append(content)
    return returned


def call(name: str, **arguments: Any) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, arguments)], usage=RequestUsage(input_tokens=100, output_tokens=10))


def say(content: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(content)], usage=RequestUsage(input_tokens=100, output_tokens=3))


Step = Callable[[list[ModelMessage]], ModelResponse | Awaitable[ModelResponse]]


@dataclass
class Script:
    """A FunctionModel whose answers a list of steps gives, turn by turn (the last one repeats)."""

    steps: list[Step]
    seen: list[list[ModelMessage]] = field(default_factory=lambda: list[list[ModelMessage]]())

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        step = self.steps[min(turn(messages), len(self.steps) - 1)]
        reply = step(messages)
        return reply if isinstance(reply, ModelResponse) else await reply

    def model(self) -> FunctionModel:
        return FunctionModel(self)


class RecordingReranker:
    """Reverses the candidates' order and records that it ran."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    async def score(self, query: str, documents: Sequence[str]) -> list[float]:
        self.calls.append((query, len(documents)))
        return [float(index) / max(1, len(documents)) for index in range(len(documents))]

    async def aclose(self) -> None:
        return None


def linear(
    settings: Settings, store: ChunkStore, embedder: ContractEmbedder, reranker: Reranker | None = None
) -> LinearSearch:
    return LinearSearch(
        settings, store=StoreSearch(store, settings), embedder=embedder, metrics=SearchMetrics(), reranker=reranker
    )


def agentic(
    settings: Settings,
    store: ChunkStore,
    embedder: ContractEmbedder,
    model: FunctionModel,
    reranker: Reranker | None = None,
) -> AgenticSearch:
    return AgenticSearch(settings, search=linear(settings, store, embedder, reranker), model=model)

"""One chat request, prepared: the model, the augmented messages, the tools each round may call,
and what an answer's tool calls mean."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from retrieval_agent.chat.context import SourceBook
from retrieval_agent.chat.errors import (
    UPSTREAM_ERROR,
    ChatError,
)
from retrieval_agent.chat.models import (
    MemorySource,
)
from retrieval_agent.chat.rounds import ToolCall
from retrieval_agent.chat.tools import RagTools, tool_schemas


def insert_system(messages: list[dict[str, Any]], content: str) -> None:
    """A system message after the client's own system messages: some chat templates refuse a system
    turn later on."""
    at = next((i for i, message in enumerate(messages) if message.get("role") != "system"), len(messages))
    messages.insert(at, {"role": "system", "content": content})


@dataclass
class ChatTurn:
    """One request, prepared: the upstream model, the augmented messages, the tools and the sources."""

    model: str
    upstream_model: str
    messages: list[dict[str, Any]]
    book: SourceBook
    rag_tools: RagTools | None
    max_tool_rounds: int
    params: dict[str, Any]
    client_tools: list[dict[str, Any]] = field(default_factory=lambda: list[dict[str, Any]]())
    tool_choice: Any = None
    memory_sources: list[MemorySource] = field(default_factory=lambda: list[MemorySource]())
    include_usage: bool = False

    @property
    def stream_params(self) -> dict[str, Any]:
        """A streamed call's parameters: the upstream reports usage only when asked."""
        return {**self.params, "stream_options": {"include_usage": True}} if self.include_usage else self.params

    @property
    def client_tool_names(self) -> frozenset[str]:
        names = (tool.get("function", {}).get("name") for tool in self.client_tools if isinstance(tool, dict))
        return frozenset(name for name in names if isinstance(name, str))

    def offers_rag_tools(self, rounds: int) -> bool:
        return self.rag_tools is not None and rounds < self.max_tool_rounds

    def check_answered(self, wrote: bool, calls: Sequence[ToolCall], rounds: int) -> None:
        """A final answer that is only calls to tools not offered (ours after the cap, or none at all)
        is no answer: an upstream error, not an empty reply that reads as finished."""
        if calls and not wrote:
            names = ", ".join(sorted({call["function"]["name"] for call in calls}))
            capped = self.rag_tools is not None and rounds >= self.max_tool_rounds > 0
            after = f" after CHAT_MAX_TOOL_ROUNDS={self.max_tool_rounds} tool rounds" if capped else ""
            raise ChatError(
                502,
                f"The upstream model answered only with calls to tools it was not offered ({names}){after}, "
                "not with an answer.",
                code=UPSTREAM_ERROR,
                outcome="upstream_error",
            )

    def tools(self, rounds: int) -> list[dict[str, Any]] | None:
        """What the model may call in this round: the client's tools, and ours until the cap (a client tool
        of the same name wins)."""
        tools = list(self.client_tools)
        if self.offers_rag_tools(rounds):
            taken = self.client_tool_names
            tools.extend(tool for tool in tool_schemas() if tool["function"]["name"] not in taken)
        return tools or None

    def decide(
        self, calls: Sequence[ToolCall], rounds: int
    ) -> tuple[Literal["client", "server", "answer"], list[ToolCall]]:
        """What an answer's tool calls mean: calls of client tools go back to the client; else, while our
        tools are offered, every call is run here (an unknown name gets an error result); else it is the answer."""
        client = [call for call in calls if call["function"]["name"] in self.client_tool_names]
        if client:
            return "client", client
        if calls and self.offers_rag_tools(rounds):
            return "server", list(calls)
        return "answer", []

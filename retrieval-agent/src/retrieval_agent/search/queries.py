"""Which search queries a request resolves to, optionally written by an LLM from the chat.

Precedence (documented in the README):

1. Explicit ``queries`` (blank strings dropped) are used as given, unless they are only the last
   user message repeated, which is what Open WebUI sends in bypass mode, where it leaves query
   generation to this service.
2. Otherwise, with ``messages`` and query generation active (ENABLE_QUERY_GENERATION and an
   AGENT_API_BASE_URL), the LLM writes up to MAX_GENERATED_QUERIES queries from the chat.
   Any failure falls back to the last user message and is counted.
3. Otherwise the remaining explicit queries, else the last user message.
"""

from __future__ import annotations

import logging
import string
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import anyio
from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.models import Model

from retrieval_agent.errors import QueryGenerationError
from retrieval_agent.metrics import SearchMetrics

logger = logging.getLogger(__name__)

DEFAULT_TEMPLATE = """### Task
Write search queries that retrieve the documents needed to answer the user's latest message.

### Guidelines
- Write 1 to 3 short, self-contained queries in the language of the conversation.
- Resolve pronouns and references using the chat history.
- Prefer specific keywords and names over full sentences.
- Today's date is $current_date.

### Chat history
$chat_history
"""


class ChatMessage(BaseModel):
    """One chat message as Open WebUI forwards it."""

    role: str = Field(max_length=32)
    content: str = Field(max_length=10_000)


class GeneratedQueries(BaseModel):
    """What the LLM must return."""

    queries: list[str] = Field(description="1 to 3 search queries, most important first.")


@dataclass(frozen=True, slots=True)
class ResolvedQueries:
    """The queries to search and how they were obtained."""

    queries: list[str]
    # The question rerankers score against: the user's own words when known.
    primary: str | None
    source: Literal["explicit", "generated", "fallback", "last_user_message", "none"]


def last_user_message(messages: Sequence[ChatMessage]) -> str | None:
    """The newest non-blank user message."""
    for message in reversed(messages):
        if message.role == "user" and message.content.strip():
            return message.content.strip()
    return None


def render_prompt(template: str, messages: Sequence[ChatMessage], *, now: datetime | None = None) -> str:
    """The template with ``$current_date`` and ``$chat_history`` filled in; other ``$`` text kept."""
    history = "\n".join(f"{message.role.upper()}: {message.content}" for message in messages)
    current = (now or datetime.now(UTC)).date().isoformat()
    return string.Template(template or DEFAULT_TEMPLATE).safe_substitute(current_date=current, chat_history=history)


def _clean(queries: Sequence[str], limit: int) -> list[str]:
    seen: set[str] = set()
    cleaned: list[str] = []
    for query in queries:
        text = query.strip()
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            cleaned.append(text[:2000])
    return cleaned[:limit]


class QueryGenerator:
    """PydanticAI agent that turns a chat into search queries, with a timeout."""

    def __init__(self, model: Model, *, timeout: float, max_queries: int) -> None:
        self.model = model
        self.timeout = timeout
        self.max_queries = max_queries
        self.agent: Agent[None, GeneratedQueries] = Agent(
            model,
            output_type=GeneratedQueries,
            instructions="You write search queries for a document retrieval system. Answer only with the queries.",
            retries=1,
        )

    async def generate(self, prompt: str) -> list[str]:
        """Queries for ``prompt``; QueryGenerationError(reason) on any failure or an empty answer."""
        try:
            with anyio.fail_after(self.timeout):
                result = await self.agent.run(prompt)
        except TimeoutError as exc:
            raise QueryGenerationError("timeout", f"query generation timed out after {self.timeout}s") from exc
        except Exception as exc:  # any model/transport/validation failure: the caller falls back
            raise QueryGenerationError("llm_error", f"query generation failed: {type(exc).__name__}: {exc}") from exc
        queries = _clean(result.output.queries, self.max_queries)
        if not queries:
            raise QueryGenerationError("empty", "the LLM returned no usable query")
        return queries


async def resolve_queries(
    queries: Sequence[str] | None,
    messages: Sequence[ChatMessage] | None,
    *,
    generator: QueryGenerator | None,
    metrics: SearchMetrics,
    template: str = "",
    max_queries: int = 10,
) -> ResolvedQueries:
    """Apply the precedence in this module's docstring."""
    chat = list(messages or [])
    last_user = last_user_message(chat)
    explicit = _clean(queries or [], max_queries)
    bypass = bool(chat) and (not explicit or (last_user is not None and explicit == [last_user]))
    if explicit and not bypass:
        return ResolvedQueries(explicit, primary=last_user or explicit[0], source="explicit")
    if chat and generator is not None:
        with metrics.time_stage("query_generation"):
            try:
                generated = await generator.generate(render_prompt(template, chat))
            except QueryGenerationError as exc:
                metrics.query_generation_fallbacks.labels(reason=exc.reason).inc()
                logger.warning("query generation fell back to the last user message (%s): %s", exc.reason, exc)
            else:
                return ResolvedQueries(generated, primary=last_user or generated[0], source="generated")
        fallback = explicit or ([last_user] if last_user else [])
        return ResolvedQueries(
            fallback, primary=fallback[0] if fallback else None, source="fallback" if fallback else "none"
        )
    if explicit:
        return ResolvedQueries(explicit, primary=last_user or explicit[0], source="explicit")
    if last_user is not None:
        return ResolvedQueries([last_user], primary=last_user, source="last_user_message")
    return ResolvedQueries([], primary=None, source="none")

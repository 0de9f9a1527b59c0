"""Which search queries a request resolves to, optionally written by an LLM from the chat.

Precedence (documented in the README):

1. Explicit ``queries`` (blank strings dropped) are used as given, unless they are only the last
   user message repeated, which is what Open WebUI sends in bypass mode, where it leaves query
   generation to this service.
2. Otherwise, with ``messages`` and query generation active (ENABLE_QUERY_GENERATION and an
   AGENT_API_BASE_URL), the LLM writes up to MAX_GENERATED_QUERIES queries from the chat.
   Any failure falls back to the last user message and is counted.
3. Otherwise the remaining explicit queries, else the last user message.

Without an LLM (or when it fails), a follow-up turn (short, or opening with "and", "what about",
... or leaning on a pronoun) is searched together with the previous user turn, per
FOLLOWUP_CONTEXT: ``combined`` searches "previous + follow-up", ``both`` fuses that with the
follow-up alone, ``off`` searches the follow-up alone.
"""

from __future__ import annotations

import logging
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import anyio
from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from retrieval_agent.adapters.llm_failures import log_failure_detail, model_failure
from retrieval_agent.errors import QueryGenerationError
from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.settings import FollowUpMode

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
    source: Literal["explicit", "generated", "fallback", "last_user_message", "follow_up", "none"]


# Openers and pronouns that lean on an earlier turn (en, da, no, sv, de, fr). Words common in
# self-contained questions too ("det", "der", "that") are left out: they would pull in context
# after a change of topic.
_CONTINUATIONS = frozenset(
    [
        "and",
        "also",
        "but",
        "so",
        "then",
        "or",
        "og",
        "men",
        "så",
        "samt",
        "och",
        "und",
        "aber",
        "auch",
        "dann",
        "et",
        "mais",
        "puis",
    ]
)
_OPENING_PHRASES = (
    "what about",
    "how about",
    "hvad med",
    "hva med",
    "hur är det med",
    "vad gäller",
    "was ist mit",
    "und was",
    "et pour",
    "qu'en est-il",
)
_ANAPHORS = frozenset(
    [
        "it",
        "its",
        "they",
        "them",
        "their",
        "theirs",
        "he",
        "she",
        "him",
        "his",
        "her",
        "those",
        "these",
        "dens",
        "dets",
        "dem",
        "deres",
        "hende",
        "hendes",
        "hennes",
        "honom",
        "henne",
        "dess",
        "deras",
        "ihm",
        "ihn",
        "ihnen",
        "ihrer",
        "dort",
        "ses",
        "leur",
        "leurs",
        "ils",
        "elles",
    ]
)
_WORD = re.compile(r"\w+")  # French elision splits: qu'ils -> qu, ils


def is_follow_up(text: str, *, max_words: int) -> bool:
    """Whether a user turn likely needs the previous one to be understood."""
    folded = text.casefold().strip()
    words = _WORD.findall(folded)
    if not words:
        return False
    if len(words) <= max_words or words[0] in _CONTINUATIONS or folded.startswith(_OPENING_PHRASES):
        return True
    return any(word in _ANAPHORS for word in words)


def previous_user_message(messages: Sequence[ChatMessage]) -> str | None:
    """The non-blank user message before the newest one."""
    seen_last = False
    for message in reversed(messages):
        if message.role != "user" or not message.content.strip():
            continue
        if seen_last:
            return message.content.strip()
        seen_last = True
    return None


@dataclass(frozen=True, slots=True)
class FollowUpPolicy:
    """How a follow-up turn borrows the previous user turn when no LLM rewrites it."""

    mode: FollowUpMode = "both"
    max_words: int = 6
    # The previous turn's share of a combined query (its head: questions put the topic first).
    context_chars: int = 1000

    def queries_for(self, messages: Sequence[ChatMessage], last_user: str) -> list[str] | None:
        """The queries for a follow-up ``last_user``, or None when it is not one (or the mode is off)."""
        if self.mode == "off" or not is_follow_up(last_user, max_words=self.max_words):
            return None
        previous = previous_user_message(messages)
        if previous is None:
            return None
        combined = f"{previous[: self.context_chars]} {last_user}"
        return [combined] if self.mode == "combined" else [last_user, combined]


def last_user_message(messages: Sequence[ChatMessage]) -> str | None:
    """The newest non-blank user message."""
    for message in reversed(messages):
        if message.role == "user" and message.content.strip():
            return message.content.strip()
    return None


# Open WebUI's own template variables, which the older fork sends in its template.
_OPEN_WEBUI_MESSAGES = re.compile(r"\{\{MESSAGES(?::(START|END|MIDDLETRUNCATE):(\d+))?\}\}")
_OPEN_WEBUI_PROMPT = re.compile(r"\{\{prompt(?::(start|end|middletruncate):(\d+))?\}\}")


def _history(messages: Sequence[ChatMessage]) -> str:
    return "\n".join(f"{message.role.upper()}: {message.content}" for message in messages)


def _select_messages(messages: Sequence[ChatMessage], how: str | None, count: int) -> list[ChatMessage]:
    if how == "START":
        return list(messages[:count])
    if how == "END":
        return list(messages[-count:]) if count else []
    if how == "MIDDLETRUNCATE" and len(messages) > count:
        head = (count + 1) // 2
        return [*messages[:head], *messages[len(messages) - (count - head) :]] if count else []
    return list(messages)


def _cut_text(text: str, how: str | None, count: int) -> str:
    if how == "start":
        return text[:count]
    if how == "end":
        return text[-count:] if count else ""
    if how == "middletruncate" and len(text) > count:
        head = (count + 1) // 2
        return f"{text[:head]}...{text[len(text) - (count - head) :]}"
    return text


def render_prompt(template: str, messages: Sequence[ChatMessage], *, now: datetime | None = None) -> str:
    """The template with its variables filled in; other ``$`` and ``{{...}}`` text kept.

    Ours: ``$current_date`` and ``$chat_history``. Open WebUI's: ``{{CURRENT_DATE}}``,
    ``{{MESSAGES}}`` (optionally ``:START:n``, ``:END:n``, ``:MIDDLETRUNCATE:n``) and ``{{prompt}}``
    (the last user message, optionally ``:start:n``, ``:end:n``, ``:middletruncate:n``).
    """
    current = (now or datetime.now(UTC)).date().isoformat()
    text = string.Template(template or DEFAULT_TEMPLATE).safe_substitute(
        current_date=current, chat_history=_history(messages)
    )
    text = text.replace("{{CURRENT_DATE}}", current)
    text = _OPEN_WEBUI_MESSAGES.sub(
        lambda match: _history(_select_messages(messages, match.group(1), int(match.group(2) or 0))), text
    )
    prompt = last_user_message(messages) or ""
    return _OPEN_WEBUI_PROMPT.sub(lambda match: _cut_text(prompt, match.group(1), int(match.group(2) or 0)), text)


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
        # One SDK retry, as for the agent: a flaky proxy gets a second chance, a dead one falls back fast.
        self.model_settings = ModelSettings(max_retries=1)

    async def generate(self, prompt: str) -> list[str]:
        """Queries for ``prompt``; QueryGenerationError(reason) on any failure or an empty answer."""
        try:
            with anyio.fail_after(self.timeout):
                result = await self.agent.run(prompt, model_settings=self.model_settings)
        except TimeoutError as exc:
            raise QueryGenerationError("timeout", f"query generation timed out after {self.timeout}s") from exc
        except Exception as exc:  # any model/transport/validation failure: the caller falls back
            # The message is logged at WARNING: type and status only, the error's text at DEBUG.
            log_failure_detail(logger, "query generation failure", exc)
            raise QueryGenerationError("llm_error", f"query generation failed: {model_failure(exc)}") from exc
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
    follow_up: FollowUpPolicy | None = None,
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
    if last_user is not None and follow_up is not None and (not explicit or explicit == [last_user]):
        borrowed = follow_up.queries_for(chat, last_user)
        if borrowed is not None:
            metrics.follow_ups.inc()
            # The reranker scores against the question with its context, not the bare follow-up.
            return ResolvedQueries(_clean(borrowed, max_queries), primary=borrowed[-1], source="follow_up")
    if chat and generator is not None:
        fallback = explicit or ([last_user] if last_user else [])
        return ResolvedQueries(
            fallback, primary=fallback[0] if fallback else None, source="fallback" if fallback else "none"
        )
    if explicit:
        return ResolvedQueries(explicit, primary=last_user or explicit[0], source="explicit")
    if last_user is not None:
        return ResolvedQueries([last_user], primary=last_user, source="last_user_message")
    return ResolvedQueries([], primary=None, source="none")

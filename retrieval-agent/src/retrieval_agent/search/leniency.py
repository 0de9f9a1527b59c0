"""Take what Open WebUI sends, within limits, instead of refusing it.

In bypass mode Open WebUI forwards the raw last user message as the query and the raw chat. A
long pasted text, a multimodal turn (a list of text and image parts), a long chat or a large k
used to be a 422, which Open WebUI shows as "no sources". Here they are brought within the limits
and the response says what was changed (``X-RAG-Request-Adjusted``), counted in
``search_request_adjustments_total``. Requests that are malformed (no collections, a k below 1,
a message without a role) still get 422.

A lone UTF-16 surrogate (half an emoji, what a JavaScript client sends when it cuts a string) is valid
JSON but no text the tokenizer or a UTF-8 encoder accepts: it becomes U+FFFD (``unicode-replaced``).

Bypass mode sends the last user message twice, as the query and in the chat, and the search
recognises it by the two being equal. When that query is too long, the message is cut exactly as
the query is, so the request still reads as bypass mode (and an LLM, if configured, writes the
queries) instead of as an explicit, pasted query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from retrieval_agent.search.queries import ChatMessage

# Characters, not tokens: the query model reads at most 256 tokens (about 1,000 characters of
# prose) and BM25 needs no more; the budgets stay above that so nothing the model sees is cut.
MAX_QUERY_CHARS = 2000
MAX_MESSAGE_CHARS = 10_000
MAX_QUERIES = 10
MAX_MESSAGES = 50
MAX_K = 100
# A cut keeps the start and, mostly, the end: a pasted text usually ends with the question.
_HEAD_SHARE = 0.25
_CUT_MARK = "\n…\n"
ADJUSTED_HEADER = "X-RAG-Request-Adjusted"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT_CHARACTER = "\ufffd"


def well_formed(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (a JSON string may carry one; no encoder takes it)."""
    return _LONE_SURROGATE.sub(REPLACEMENT_CHARACTER, text)


def well_formed_json(value: Any) -> Any:
    """``value`` (decoded JSON) with :func:`well_formed` applied to every string in it, keys included."""
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, list):
        return [well_formed_json(item) for item in value]
    if isinstance(value, dict):
        return {well_formed_json(key): well_formed_json(item) for key, item in value.items()}
    return value


def shorten(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its head and tail around a cut mark."""
    if len(text) <= limit:
        return text
    room = limit - len(_CUT_MARK)
    head = int(room * _HEAD_SHARE)
    return text[:head].rstrip() + _CUT_MARK + text[len(text) - (room - head) :].lstrip()


def message_text(content: str | list[Any] | None) -> str:
    """The text of a message: a string, or the text parts of OpenAI-style content (images dropped)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
    return "\n".join(piece for piece in parts if piece.strip())


def _last_user_index(window: list[tuple[str, Any]], window_texts: list[str]) -> int | None:
    """The position of the newest user message with text (the one bypass mode repeats as the query)."""
    for index in range(len(window) - 1, -1, -1):
        if window[index][0] == "user" and window_texts[index].strip():
            return index
    return None


@dataclass
class Adjusted:
    """The request within limits, and what was changed to get there."""

    queries: list[str] | None
    messages: list[ChatMessage] | None
    k: int
    changes: list[str] = field(default_factory=lambda: list[str]())


def adjust(queries: list[str] | None, messages: list[tuple[str, Any]] | None, k: int) -> Adjusted:
    """Bring ``queries`` (texts), ``messages`` ((role, content) pairs) and ``k`` within the limits."""
    changes: list[str] = []
    # Before any other work: a lone surrogate crashes the tokenizer and the message model.
    if queries is not None:
        clean = [well_formed(query) for query in queries]
        if clean != queries:
            changes.append("unicode-replaced")
        queries = clean
    if messages is not None:
        clean_messages = [(well_formed(role), well_formed_json(content)) for role, content in messages]
        if clean_messages != messages and "unicode-replaced" not in changes:
            changes.append("unicode-replaced")
        messages = clean_messages
    kept_queries = queries
    cut_queries: set[str] = set()
    if queries is not None:
        if len(queries) > MAX_QUERIES:
            kept_queries = queries[:MAX_QUERIES]
            changes.append("queries-dropped")
        shortened = [shorten(query, MAX_QUERY_CHARS) for query in kept_queries or []]
        if shortened != kept_queries:
            changes.append("query-truncated")
            cut_queries = {query for query in kept_queries or [] if len(query) > MAX_QUERY_CHARS}
        kept_queries = shortened
    kept_messages: list[ChatMessage] | None = None
    if messages is not None:
        window = messages
        if len(messages) > MAX_MESSAGES:
            window = messages[-MAX_MESSAGES:]
            changes.append("messages-trimmed")
        window_texts = [message_text(content) for _, content in window]
        last_user = _last_user_index(window, window_texts)
        kept_messages = []
        for index, (role, content) in enumerate(window):
            if isinstance(content, list) and "message-parts" not in changes:
                changes.append("message-parts")
            text = window_texts[index]
            # The bypass-mode pair (see the module docstring): cut the message as its query was cut.
            limit = MAX_QUERY_CHARS if index == last_user and text in cut_queries else MAX_MESSAGE_CHARS
            short = shorten(text, limit)
            if short != text and "message-truncated" not in changes:
                changes.append("message-truncated")
            kept_messages.append(ChatMessage(role=role, content=short))
    if k > MAX_K:
        changes.append("k-clamped")
    return Adjusted(queries=kept_queries, messages=kept_messages, k=min(k, MAX_K), changes=changes)

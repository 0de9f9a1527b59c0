"""What a chat turn gives and takes from long-term memory: who is speaking, the user's words, and the
system message that shows the remembered facts to the model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from retrieval_agent.chat.errors import invalid_request
from retrieval_agent.chat.models import ChatCompletionRequest, ChatMessageIn, MemorySource
from retrieval_agent.memory.facts import USER_RULE, is_user
from retrieval_agent.memory.index import RankedFact
from retrieval_agent.memory.service import Speaker

# Open WebUI sends these with ENABLE_FORWARD_USER_INFO_HEADERS=true.
CHAT_ID_HEADER: Final = "X-OpenWebUI-Chat-Id"
MESSAGE_ID_HEADER: Final = "X-OpenWebUI-Message-Id"
# Earlier user messages the extraction sees, to resolve "it" and "that one".
CONTEXT_MESSAGES: Final = 3
_MAX_ID_CHARS: Final = 256

MEMORY_PROMPT: Final = (
    "What you remember about the user from earlier conversations (each line is one fact; the newest "
    "knowledge wins). Use it when it helps, and do not recite it unasked:"
)


def _text_of(content: str | list[Any] | None) -> str:
    if isinstance(content, str):
        return content
    parts = [part.get("text") for part in content or [] if isinstance(part, dict) and part.get("type") == "text"]
    return "\n".join(part for part in parts if isinstance(part, str))


def _short_id(value: object) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()[:_MAX_ID_CHARS]
    return None


def speaker_of(request: ChatCompletionRequest, headers: Mapping[str, str], *, user_header: str) -> Speaker | None:
    """Whose memory the turn uses: the request's ``user`` field, else ``user_header``; None when neither
    names a user. A name that breaks the rule is a 400 (``param: user``), never normalised: another
    spelling would be another user's memory."""
    extra = request.model_extra or {}
    raw = extra.get("user")
    user = raw if isinstance(raw, str) and raw else headers.get(user_header)
    if not user:
        return None
    if not is_user(user):
        raise invalid_request(f"user: {USER_RULE} (it names the memory to use)", param="user")
    metadata = extra.get("metadata") if isinstance(extra.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    return Speaker(
        user=user,
        conversation_id=_short_id(metadata.get("chat_id") or metadata.get("conversation_id"))
        or _short_id(headers.get(CHAT_ID_HEADER)),
        message_id=_short_id(metadata.get("message_id")) or _short_id(headers.get(MESSAGE_ID_HEADER)),
    )


def user_turn(messages: Sequence[ChatMessageIn]) -> tuple[str, list[str]]:
    """The text of the last message when the user wrote it ("" otherwise: a tool result is no new
    statement), and up to CONTEXT_MESSAGES earlier user messages, oldest first."""
    users = [_text_of(message.content) for message in messages if message.role == "user"]
    if not messages or messages[-1].role != "user":
        return "", users[-CONTEXT_MESSAGES:]
    return users[-1], users[-1 - CONTEXT_MESSAGES : -1]


def recall_text(messages: Sequence[ChatMessageIn]) -> str:
    """What the recall ranks facts against: the last user message."""
    for message in reversed(messages):
        if message.role == "user":
            return _text_of(message.content)
    return ""


def memory_sources(facts: Sequence[RankedFact]) -> list[MemorySource]:
    return [
        MemorySource(
            id=fact.fact_id,
            text=fact.text,
            score=fact.score,
            relevance=fact.relevance,
            updated_at=fact.updated_at.isoformat().replace("+00:00", "Z"),
        )
        for fact in facts
    ]


def memory_message(sources: Sequence[MemorySource]) -> str:
    """The system message listing the facts."""
    return MEMORY_PROMPT + "\n" + "\n".join(f"- {source.text}" for source in sources)

"""The turn's numbered sources and the context prompt that shows them to the model.

Every passage the model sees carries a number ([1], [2], ...) that ``rag_sources`` repeats, so a
client can turn the model's markers into citations. Numbers are stable within a turn: a passage a
follow-up search finds again keeps its number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrieval_agent.chat.models import ChatMessageIn, RagSource
from retrieval_agent.search.leniency import adjust
from retrieval_agent.search.postprocess import Hit
from retrieval_agent.search.queries import ChatMessage
from shared_contract import MetaKey
from shared_contract.schema import page_number

# The context block's budget (as the seed proxy: about 3,000 tokens); the first passage always fits.
MAX_CONTEXT_CHARS = 12_000
# Roles whose text the search reads (the follow-up handling looks at user and assistant turns).
_SEARCHED_ROLES = frozenset({"user", "assistant"})

CONTEXT_PROMPT = (
    "You answer with the help of passages retrieved from the knowledge base. Each passage starts with its "
    "number in square brackets. When a statement relies on a passage, cite it right after the statement with "
    "its number, like [1] or [2][3]; use only the numbers shown. If the passages do not answer the question, "
    "say so, and do not invent citations."
)
TOOLS_PROMPT = (
    "When the passages are not enough, call read_full_document with a passage's file_id to read the whole "
    "document, or search with a new query to find more passages (they come with their own numbers, which "
    "you cite the same way)."
)
NO_PASSAGES = "The knowledge base search found no passages for this question."


def _page(meta: dict[str, Any]) -> int | None:
    value = meta.get(MetaKey.PAGE)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(meta: dict[str, Any], key: str) -> str | None:
    value = meta.get(key)
    return value if isinstance(value, str) and value else None


class SourceBook:
    """The sources of one chat turn, numbered from 1."""

    def __init__(self) -> None:
        self.sources: list[RagSource] = []
        self._numbers: dict[tuple[str | None, str], int] = {}

    def add(self, hit: Hit) -> RagSource:
        """``hit`` as a source: a new number, or the one it already has."""
        key = (_text(hit.meta, MetaKey.FILE_ID), hit.content_hash)
        known = self._numbers.get(key)
        if known is not None:
            return self.sources[known - 1]
        meta = hit.meta
        source = RagSource(
            index=len(self.sources) + 1,
            file_name=_text(meta, MetaKey.NAME) or _text(meta, MetaKey.SOURCE),
            file_id=_text(meta, MetaKey.FILE_ID),
            collection_name=_text(meta, MetaKey.COLLECTION_NAME),
            page=_page(meta),
            page_number=page_number(meta.get(MetaKey.PAGE)),
            score=hit.relevance,
            text=hit.content,
        )
        self.sources.append(source)
        self._numbers[key] = source.index
        return source

    def keep(self, count: int) -> None:
        """Keep only the first ``count`` sources (those the context had room for)."""
        for source in self.sources[count:]:
            self._numbers = {key: number for key, number in self._numbers.items() if number != source.index}
        del self.sources[count:]


def passage(source: RagSource) -> str:
    """One numbered passage as the model reads it."""
    where = [f"page {source.page_number}"] if source.page_number is not None else []
    if source.file_id:
        where.append(f"file_id: {source.file_id}")
    label = source.file_name or "untitled"
    head = f"[{source.index}] {label}" + (f" ({', '.join(where)})" if where else "")
    return f"{head}\n{source.text.strip()}"


def passages(sources: Sequence[RagSource], max_chars: int = MAX_CONTEXT_CHARS) -> tuple[str, int]:
    """The numbered passages within ``max_chars`` (the first one cut to fit), and how many were kept."""
    blocks: list[str] = []
    used = 0
    for source in sources:
        block = passage(source)
        if used + len(block) > max_chars:
            if blocks:
                break
            block = block[:max_chars]
        blocks.append(block)
        used += len(block) + 2
    return "\n\n".join(blocks), len(blocks)


def context_message(sources: Sequence[RagSource], *, tools: bool) -> tuple[str, int]:
    """The system message that carries the passages, and how many of the sources it shows."""
    text, shown = passages(sources)
    instructions = CONTEXT_PROMPT + (" " + TOOLS_PROMPT if tools else "")
    body = text if shown else NO_PASSAGES
    return f"{instructions}\n\nPassages:\n\n{body}", shown


def search_messages(messages: Sequence[ChatMessageIn], k: int) -> list[ChatMessage]:
    """The chat as the search reads it: user and assistant text, within the /search limits."""
    pairs = [(message.role, message.content) for message in messages if message.role in _SEARCHED_ROLES]
    adjusted = adjust(None, [(role, content if content is not None else "") for role, content in pairs], k)
    return adjusted.messages or []

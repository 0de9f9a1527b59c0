"""The turn's numbered sources, the context prompt that shows them to the model, and the source events
Open WebUI shows as citations.

A citation number names a document: every passage of the first document the search found is [1],
as Open WebUI numbers its own sources (its chat view maps ``[n]`` to the n-th distinct
``metadata.source`` of the message's sources). ``rag_sources`` lists each passage with its number, so
any client can turn the model's markers into citations. Numbers are stable within a turn: a passage
a follow-up search finds again, or another passage of a numbered document, keeps its number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrieval_agent.chat.models import (
    ChatMessageIn,
    PassageLink,
    RagSource,
    SourceEvent,
    SourceEventData,
    SourceMetadata,
    SourceOrigin,
)
from retrieval_agent.search.citations import CitationLinks
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


def _url(meta: dict[str, Any]) -> str | None:
    source = _text(meta, MetaKey.SOURCE)
    return source if source is not None and source.startswith(("http://", "https://")) else None


class SourceBook:
    """The sources of one chat turn: passages, each with its document's number (from 1), and each with
    its signed citation links when ``citations`` makes them."""

    def __init__(self, citations: CitationLinks | None = None) -> None:
        self.citations = citations
        self.sources: list[RagSource] = []
        self._passages: dict[tuple[str | None, str], RagSource] = {}
        self._documents: dict[str, int] = {}

    def add(self, hit: Hit) -> RagSource:
        """``hit`` as a source: its document's number (a new one for a new document), or the source
        already made of the same passage."""
        meta = hit.meta
        file_id = _text(meta, MetaKey.FILE_ID)
        known = self._passages.get((file_id, hit.content_hash))
        if known is not None:
            return known
        name = _text(meta, MetaKey.NAME) or _text(meta, MetaKey.SOURCE)
        url = _url(meta)
        # A passage of no named file is a document of its own.
        document = url or file_id or name or f"passage:{hit.content_hash}"
        number = self._documents.setdefault(document, len(self._documents) + 1)
        urls = None if self.citations is None else self.citations.for_hit(hit)
        source = RagSource(
            index=number,
            document=document,
            file_name=name,
            file_id=file_id,
            path=_text(meta, MetaKey.PATH),
            collection_name=_text(meta, MetaKey.COLLECTION_NAME),
            url=url,
            page=_page(meta),
            page_number=page_number(meta.get(MetaKey.PAGE)),
            score=hit.relevance,
            text=hit.content,
            citation_url=None if urls is None else urls.page_image,
            original_url=None if urls is None else urls.original,
        )
        self.sources.append(source)
        self._passages[(file_id, hit.content_hash)] = source
        return source

    def keep(self, count: int) -> None:
        """Keep only the first ``count`` sources (those the context had room for). Numbers are given in
        order, so the kept ones still run from 1 without a gap."""
        del self.sources[count:]
        kept = {source.index for source in self.sources}
        shown = {id(source) for source in self.sources}
        self._passages = {key: source for key, source in self._passages.items() if id(source) in shown}
        self._documents = {document: number for document, number in self._documents.items() if number in kept}


def source_events(sources: Sequence[RagSource]) -> list[SourceEvent]:
    """Open WebUI's ``source`` events for ``sources``: one per document, in number order, each with the
    document's passages (``metadata.page`` 0-based, as Open WebUI shows ``page + 1``). Events for a
    document already sent add its new passages to the same citation (Open WebUI merges them by
    ``metadata.source``).

    The citation link: Open WebUI 0.12.4 (``Citations.svelte``, ``Citations/CitationModal.svelte``)
    links a citation to ``source.url``: the modal's title and each passage's "Content" link open it.
    That field is one per citation (the first event of a ``metadata.source`` sets it), so passages
    cannot have links of their own there; the only per-passage field it reads would change the
    numbering (an http ``metadata.source`` makes the passage a citation of its own). So ``source.url``
    is the document's http source (a web page), else the page image of its first cited passage
    (``citation_url``). Open WebUI prefers a passage's ``metadata.file_id`` to ``source.url``, linking
    its own file store instead, so a document linked to its page image leaves ``file_id`` out of its
    metadata. Each passage's ``metadata`` still carries its own ``citation_url`` and ``original_url``
    for other clients, and ``data.url``, which the Open WebUI fork's modal shows as that passage's own
    link."""
    by_number: dict[int, list[RagSource]] = {}
    for source in sources:
        by_number.setdefault(source.index, []).append(source)
    events: list[SourceEvent] = []
    for number in sorted(by_number):
        passages = by_number[number]
        first = passages[0]
        name = first.file_name or first.document
        page_link = next((passage.citation_url for passage in passages if passage.citation_url), None)
        linked_to_page = first.url is None and page_link is not None
        url = first.url or page_link
        metadata = [
            SourceMetadata(
                source=passage.document,
                name=name,
                file_id=None if linked_to_page else passage.file_id,
                collection_name=passage.collection_name,
                page=passage.page,
                citation=passage.index,
                citation_url=passage.citation_url,
                original_url=passage.original_url,
                data=None if passage.citation_url is None else PassageLink(url=passage.citation_url),
            )
            for passage in passages
        ]
        data = SourceEventData(
            source=SourceOrigin(id=first.document, name=name, url=url),
            document=[passage.text for passage in passages],
            metadata=metadata,
            distances=[passage.score for passage in passages],
        )
        events.append(SourceEvent(data=data))
    return events


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

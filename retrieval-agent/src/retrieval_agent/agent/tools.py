"""The agent's tools over one request's deps: retrieve, read_document, list_documents.

Every tool reads only the request's ``collection_names`` (held in the deps, never an argument), and
keeps what it found in the deps (the side channel): the model sees short previews, the response
gets the full chunks and documents. ``retrieve`` is the linear pipeline's own steps
(``LinearSearch.retrieve_all`` / ``merge`` / ``finish``: embed, hybrid search, optional rerank).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field
from pydantic_ai import ModelRetry, RunContext
from qdrant_client import models

from rag_runtime.store import match
from retrieval_agent.agent.documents import (
    DocumentEntry,
    WholeDocument,
    list_document_entries,
    read_whole_document,
)
from retrieval_agent.agent.filters import DocumentFilters, filter_conditions, ingested_on, name_matches
from retrieval_agent.agent.plain_text import MAX_QUERIES, MAX_QUERY_CHARS
from retrieval_agent.metrics import SearchPath
from retrieval_agent.search.pipeline import LinearSearch
from retrieval_agent.search.postprocess import Hit
from retrieval_agent.search.scope import scoped_filter
from retrieval_agent.settings import Settings
from shared_contract import MetaKey
from shared_contract.schema import page_number

logger = logging.getLogger(__name__)

# Whole documents one run may read: the response holds k sources, and each is up to
# AGENT_DOCUMENT_MAX_CHARS characters.
MAX_DOCUMENTS_READ = 3
MAX_LISTED = 50
# A file-name filter matching more files than this narrows nothing.
MAX_NAME_MATCHES = 100


class IterationCapReachedError(Exception):
    """The model asked for a retrieve round beyond AGENT_MAX_ITERATIONS: the run stops, results stand."""


@dataclass(frozen=True, slots=True)
class RetrieveRound:
    """One retrieve call's full results (the side channel)."""

    number: int
    queries: list[str]
    hits: list[Hit]
    paths: list[SearchPath]
    # A search from queries the model wrote as text (rerank skipped).
    direct: bool = False


@dataclass(frozen=True, slots=True)
class AgentStep:
    """What one tool call did, for the debug header and ``rag search --agentic``."""

    tool: str
    detail: dict[str, Any]
    results: int
    ms: float

    def as_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {"tool": self.tool, **self.detail, "results": self.results, "ms": round(self.ms, 1)}


@dataclass
class AgentDeps:
    """One request's inputs and everything its tools found."""

    search: LinearSearch
    settings: Settings
    collection_names: tuple[str, ...]
    k: int
    # The user's own question: the reranker's query and the AGENT_INCLUDE_RAW_QUERY seed.
    question: str
    # The request's ``filter``: ANDed into every tool's store call, like the tenants.
    conditions: tuple[models.Condition, ...] = ()
    rounds: list[RetrieveRound] = field(default_factory=lambda: list[RetrieveRound]())
    documents: dict[tuple[str, str], WholeDocument] = field(
        default_factory=lambda: dict[tuple[str, str], WholeDocument]()
    )
    steps: list[AgentStep] = field(default_factory=lambda: list[AgentStep]())
    tool_calls: Counter[str] = field(default_factory=lambda: Counter[str]())
    # Retrieve rounds granted so far (taken before the search runs, so parallel calls cannot overshoot).
    rounds_started: int = 0
    tenant_violations: int = 0
    model_requests: int = 0
    model_seconds: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    _listing: tuple[list[DocumentEntry], bool] | None = None

    def count_call(self, tool: str) -> None:
        self.tool_calls[tool] += 1
        self.search.metrics.agent_tool_calls.labels(tool=tool).inc()

    def step(self, tool: str, detail: dict[str, Any], results: int, started: float) -> None:
        self.steps.append(AgentStep(tool, detail, results, (time.perf_counter() - started) * 1000))

    def tenant_violation(self, tool: str, detail: str) -> None:
        """A call reached outside the request's collections: refused, counted, logged."""
        self.tenant_violations += 1
        self.search.metrics.agent_tenant_violations.inc()
        logger.warning("agent tool call outside the request's collections refused (%s): %s", tool, detail)
        self.steps.append(AgentStep("refused", {"call": tool, "reason": detail}, 0, 0.0))

    async def listing(self) -> tuple[list[DocumentEntry], bool]:
        """Every document of the tenants (cached for the run: file-name filters resolve against it)."""
        if self._listing is None:
            self._listing = await list_document_entries(self.search.store, self.collection_names, self.conditions)
        return self._listing


def clean_queries(queries: Sequence[str], limit: int = MAX_QUERIES) -> list[str]:
    """Non-blank, distinct (case-insensitively) queries, each at most MAX_QUERY_CHARS, at most ``limit``."""
    seen: set[str] = set()
    cleaned: list[str] = []
    for query in queries:
        text = " ".join(query.split())[:MAX_QUERY_CHARS]
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            cleaned.append(text)
    return cleaned[:limit]


class Preview(BaseModel):
    """What the model sees of one result."""

    file_id: str | None = None
    name: str | None = None
    page_number: int | None = Field(default=None, description="The page as people count it (1 for the first).")
    title: str | None = None
    headers: list[str] | None = None
    languages: list[str] | None = None
    relevance: float
    text: str


def _preview_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """The whitelisted metadata (what the model needs to judge and to name a file), typed loosely."""
    values: dict[str, Any] = {}
    for key in (MetaKey.FILE_ID, MetaKey.NAME, MetaKey.TITLE):
        value = meta.get(key)
        if isinstance(value, str) and value:
            values[key] = value
    if "name" not in values and isinstance(meta.get(MetaKey.SOURCE), str):
        values["name"] = meta[MetaKey.SOURCE]
    number = page_number(meta.get(MetaKey.PAGE))
    if number is not None:
        values["page_number"] = number
    for key in (MetaKey.HEADERS, MetaKey.LANGUAGES):
        value = meta.get(key)
        if isinstance(value, list) and value:
            values[key] = [str(item) for item in value]
    return values


def preview(hit: Hit, chars: int) -> dict[str, Any]:
    """One hit as the model sees it: whitelisted metadata and the text's first ``chars`` characters."""
    text = " ".join(hit.content.split())
    short = text if len(text) <= chars else text[: chars - 1] + "…"
    return Preview(relevance=round(hit.relevance, 2), text=short, **_preview_meta(hit.meta)).model_dump(
        exclude_none=True
    )


async def resolve_filters(
    deps: AgentDeps, filters: DocumentFilters | None
) -> tuple[list[models.Condition] | None, str | None]:
    """Store conditions for ``filters`` (None when file names matched no document, with a note why)."""
    if filters is None or filters.is_empty():
        return [], None
    file_ids: list[str] | None = None
    names = [name.strip() for name in filters.file_names or [] if name.strip()]
    if names:
        entries, _ = await deps.listing()
        wanted_ids = {file_id.strip() for file_id in filters.file_ids or [] if file_id.strip()}
        file_ids = [
            entry.file_id
            for entry in entries
            if name_matches(entry.meta, names) and (not wanted_ids or entry.file_id in wanted_ids)
        ][:MAX_NAME_MATCHES]
        if not file_ids:
            return None, (
                f"No document in the searchable collections has a name containing {names!r}; "
                "call list_documents to see the names."
            )
    return filter_conditions(filters, file_ids=file_ids), None


def _filter_detail(filters: DocumentFilters | None) -> dict[str, Any]:
    if filters is None or filters.is_empty():
        return {}
    return {"filters": filters.model_dump(mode="json", exclude_none=True)}


async def run_retrieve(deps: AgentDeps, queries: Sequence[str], filters: DocumentFilters | None) -> dict[str, Any]:
    """The retrieve tool: search, keep the full results, return previews."""
    started = time.perf_counter()
    deps.count_call("retrieve")
    settings = deps.settings
    cleaned = clean_queries(queries)
    if not cleaned:
        raise ModelRetry("Give at least one non-blank search query.")
    if deps.rounds_started >= settings.agent_max_iterations:
        raise IterationCapReachedError(f"retrieve called beyond AGENT_MAX_ITERATIONS={settings.agent_max_iterations}")
    deps.rounds_started += 1
    number = deps.rounds_started
    searched = list(cleaned)
    if number == 1 and settings.agent_include_raw_query:
        searched = clean_queries([*cleaned, deps.question], limit=MAX_QUERIES + 1)
    conditions, note = await resolve_filters(deps, filters)
    hits: list[Hit] = []
    paths: list[SearchPath] = []
    if conditions is not None:
        lists = await deps.search.retrieve_all(
            searched, deps.collection_names, settings.agent_fetch_k, conditions=[*deps.conditions, *conditions]
        )
        merged = deps.search.merge([item.hits for item in lists], settings.agent_fetch_k)
        hits = await deps.search.finish(
            merged,
            deps.question,
            deps.k,
            collection_names=deps.collection_names,
            conditions=[*deps.conditions, *conditions],
        )
        paths = [item.path for item in lists]
    deps.rounds.append(RetrieveRound(number=number, queries=searched, hits=hits, paths=paths))
    deps.step("retrieve", {"round": number, "queries": searched, **_filter_detail(filters)}, len(hits), started)
    result: dict[str, Any] = {
        "round": number,
        "rounds_left": settings.agent_max_iterations - number,
        "found": len(hits),
        "results": [preview(hit, settings.agent_tool_preview_chars) for hit in hits[: settings.agent_preview_k]],
    }
    if note is not None:
        result["note"] = note
    return result


async def _within_request_filter(deps: AgentDeps, file_id: str) -> bool:
    """Whether a chunk of ``file_id`` in the tenants matches the request's ``filter`` (always, without one)."""
    if not deps.conditions:
        return True
    selector = scoped_filter(deps.collection_names, [match(MetaKey.FILE_ID, file_id), *deps.conditions])
    return await deps.search.store.count(selector) > 0


async def run_read_document(deps: AgentDeps, file_id: str) -> dict[str, Any]:
    """The read_document tool: the whole document into the side channel, a preview to the model."""
    started = time.perf_counter()
    deps.count_call("read_document")
    file_id = file_id.strip()
    if not file_id:
        raise ModelRetry("Give the file_id of a document from the results or from list_documents.")
    known = next((doc for (known_id, _), doc in deps.documents.items() if known_id == file_id), None)
    if known is None and len(deps.documents) >= MAX_DOCUMENTS_READ:
        deps.step("read_document", {"file_id": file_id, "refused": "document limit"}, 0, started)
        return {"file_id": file_id, "note": f"At most {MAX_DOCUMENTS_READ} documents can be read per search."}
    document = known or await read_whole_document(
        deps.search.store, file_id, deps.collection_names, max_chars=deps.settings.agent_document_max_chars
    )
    if document is None:
        # Another tenant's file is reported exactly like a missing one: the model learns nothing.
        if await deps.search.store.file_exists_anywhere(file_id):
            deps.tenant_violation("read_document", "a file outside the request's collections")
        deps.step("read_document", {"file_id": file_id, "found": False}, 0, started)
        return {"file_id": file_id, "found": False, "note": "No such document in the searchable collections."}
    if known is None and not await _within_request_filter(deps, document.file_id):
        # A document of the tenants that the request's ``filter`` excludes: not found, not a violation.
        deps.step("read_document", {"file_id": file_id, "found": False}, 0, started)
        return {"file_id": file_id, "found": False, "note": "No such document in the searchable collections."}
    deps.documents[(document.file_id, document.collection_name)] = document
    deps.step("read_document", {"file_id": file_id, "chunks": document.chunks_read}, 1, started)
    budget = deps.settings.agent_tool_preview_chars * deps.settings.agent_preview_k
    text = " ".join(document.text.split())
    return {
        "file_id": file_id,
        "found": True,
        **{key: value for key, value in _preview_meta(document.meta).items() if key != MetaKey.FILE_ID},
        "chunks": document.chunks,
        "characters": len(document.text),
        "truncated": document.truncated,
        "preview": text if len(text) <= budget else text[: budget - 1] + "…",
        "note": "The whole document is kept as a source; you do not need to retrieve its passages.",
    }


async def run_list_documents(
    deps: AgentDeps, filters: DocumentFilters | None, recent: bool, limit: int
) -> dict[str, Any]:
    """The list_documents tool: a filter-only listing, or the most recently added documents."""
    started = time.perf_counter()
    deps.count_call("list_documents")
    limit = max(1, min(limit, MAX_LISTED))
    conditions, note = await resolve_filters(deps, filters)
    entries: list[DocumentEntry] = []
    capped = False
    if conditions is not None:
        if conditions:
            entries, capped = await list_document_entries(
                deps.search.store, deps.collection_names, [*deps.conditions, *conditions]
            )
        else:
            entries, capped = await deps.listing()
    if recent:
        entries = sorted(entries, key=lambda entry: entry.seq, reverse=True)
    shown = entries[:limit]
    deps.step("list_documents", {"recent": recent, **_filter_detail(filters)}, len(shown), started)
    documents: list[dict[str, Any]] = []
    for entry in shown:
        item = {"file_id": entry.file_id, **_preview_meta(entry.meta)}
        item.pop(MetaKey.HEADERS, None)
        item.pop("page_number", None)  # the first chunk's page says nothing about a whole document
        day = ingested_on(entry.meta.get(MetaKey.INGEST_SEQ))
        if day is not None:
            item["ingested"] = day.isoformat()
        documents.append(item)
    result: dict[str, Any] = {
        "total": len(entries),
        "order": "newest first" if recent else "by name (not by relevance)",
        "documents": documents,
    }
    if capped:
        result["note"] = "The collections hold more documents than one listing scans; narrow it with filters."
    if note is not None:
        result["note"] = note
    return result


# The functions the agent registers (their docstrings are the tool descriptions the model reads).


async def retrieve(
    ctx: RunContext[AgentDeps], queries: list[str], filters: DocumentFilters | None = None
) -> dict[str, Any]:
    """Search the user's documents; returns short previews of the best passages.

    Args:
        queries: 1 or 2 short search queries (names and keywords, in the conversation's language).
        filters: Optional metadata filters; set them only when the user names a file, a language or a period.
    """
    return await run_retrieve(ctx.deps, queries, filters)


async def read_document(ctx: RunContext[AgentDeps], file_id: str) -> dict[str, Any]:
    """Read one whole document (all its passages in order) when a question needs more than one passage.

    Args:
        file_id: The document's file_id, from the results of retrieve or list_documents.
    """
    return await run_read_document(ctx.deps, file_id)


async def list_documents(
    ctx: RunContext[AgentDeps], filters: DocumentFilters | None = None, recent: bool = False, limit: int = 20
) -> dict[str, Any]:
    """List the documents that exist (no search): by name, language or date, or the most recently added.

    Args:
        filters: Optional metadata filters (file name, file ids, languages, date range).
        recent: True lists the most recently added documents first.
        limit: How many documents to list (at most 50).
    """
    return await run_list_documents(ctx.deps, filters, recent, limit)

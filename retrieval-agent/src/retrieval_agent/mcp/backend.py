"""The retrieval agent's own backend of the MCP tools (``/mcp``): the linear pipeline and the store, in process.

Same tenant rule as ``/search``: every read names its collection and the store filters on it, so a
tool never returns another tenant's chunk.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rag_runtime.store import KNOWLEDGE_BASES, ingested_at, tenant_counts, tenant_filter
from rag_runtime.store.document_filter import filter_conditions
from retrieval_agent.adapters.store import StoreSearch
from retrieval_agent.agent.documents import list_document_entries, read_whole_document
from retrieval_agent.error_table import classify
from retrieval_agent.errors import CollectionNotFoundError, DocumentNotFoundError, KnowledgeBaseError, RetrievalError
from retrieval_agent.mcp.models import (
    CollectionInfo,
    CollectionList,
    DocumentList,
    DocumentSummary,
    DocumentText,
    KnowledgeBackend,
    Passage,
    document_uri,
)
from retrieval_agent.search.citations import CitationLinks
from retrieval_agent.search.pipeline import LinearSearch
from retrieval_agent.search.scope import request_conditions
from shared_contract import ContractError, MetaKey
from shared_contract.document_filter import DocumentFilter
from shared_contract.schema import TenantKind, page_number, tenant_kind

logger = logging.getLogger(__name__)

__all__ = ["DOCUMENT_MAX_CHARS", "MAX_COLLECTIONS", "InProcessBackend", "KnowledgeBackend", "app_backend"]

# An MCP client asks for the whole document, not the agent's AGENT_DOCUMENT_MAX_CHARS budget; the cap
# only bounds one call's memory (a few hundred pages of text).
DOCUMENT_MAX_CHARS = 2_000_000
# Tenants one facet reports (most chunks first). Open WebUI makes a tenant per uploaded file, so a
# large deployment has many; beyond this the listing says it is incomplete.
MAX_COLLECTIONS = 10_000
# What list_collections lists with include_all: Open WebUI's tenants too, never memory.
_LISTED_KINDS_ALL: tuple[TenantKind, ...] = ("knowledge_base", "file", "user_memory")


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _failure(exc: Exception) -> KnowledgeBaseError:
    # The /search error codes and caller-facing messages (never the store's raw answer).
    _, code, message = classify(exc)
    return KnowledgeBaseError(f"{code}: {message}", cause=exc)


class InProcessBackend:
    """The tools over the app's lifespan-held search service and store.

    ``search`` and ``store`` are read at call time (the lifespan creates them after the app is built);
    ``citations`` signs each passage's links (None: no links).
    """

    def __init__(
        self,
        search: Callable[[], LinearSearch],
        store: Callable[[], StoreSearch],
        citations: CitationLinks | None = None,
    ) -> None:
        self._search = search
        self._store = store
        self._citations = citations

    async def search(
        self, query: str, collection: str, *, k: int, document_filter: DocumentFilter | None
    ) -> list[Passage]:
        _refuse_memory(collection)
        pipeline = self._search()
        try:
            conditions = request_conditions(document_filter, pipeline.settings.attribute_types)
            # The client's model wrote the query: no LLM query generation, no agent loop on top.
            outcome = await pipeline.search(
                queries=[query],
                messages=None,
                collection_names=[collection],
                k=k,
                use_generator=False,
                conditions=conditions,
            )
            hits = outcome.result_sets[0] if outcome.result_sets else []
            if not hits and not await self._holds_documents(collection):
                raise CollectionNotFoundError(collection)
        except (ContractError, RetrievalError) as exc:
            raise _failure(exc) from exc
        passages = []
        for rank, hit in enumerate(hits, start=1):
            file_id = _text(hit.meta.get(MetaKey.FILE_ID))
            tenant = _text(hit.meta.get(MetaKey.COLLECTION_NAME))
            urls = None if self._citations is None else self._citations.for_hit(hit)
            passages.append(
                Passage(
                    rank=rank,
                    text=hit.content,
                    name=_text(hit.meta.get(MetaKey.NAME)) or _text(hit.meta.get(MetaKey.SOURCE)),
                    path=_text(hit.meta.get(MetaKey.PATH)),
                    file_id=file_id,
                    collection=tenant,
                    page=_int(hit.meta.get(MetaKey.PAGE)),
                    page_number=page_number(hit.meta.get(MetaKey.PAGE)),
                    score=hit.relevance,
                    uri=document_uri(tenant, file_id) if tenant and file_id else None,
                    citation_url=None if urls is None else urls.page_image,
                    original_url=None if urls is None else urls.original,
                )
            )
        return passages

    async def _holds_documents(self, collection: str) -> bool:
        return await self._store().count(tenant_filter([collection])) > 0

    async def read_document(self, file_id: str, collection: str) -> DocumentText:
        _refuse_memory(collection)
        try:
            document = await read_whole_document(self._store(), file_id, [collection], max_chars=DOCUMENT_MAX_CHARS)
        except (ContractError, RetrievalError) as exc:
            raise _failure(exc) from exc
        if document is None:
            raise DocumentNotFoundError(file_id, collection)
        return DocumentText(
            file_id=file_id,
            collection=document.collection_name,
            name=_text(document.meta.get(MetaKey.NAME)),
            path=_text(document.meta.get(MetaKey.PATH)),
            text=document.text,
            chunks=document.chunks,
            truncated=document.truncated,
        )

    async def file_id_at(self, path: str, collection: str) -> str:
        _refuse_memory(collection)
        try:
            conditions = filter_conditions(DocumentFilter(paths=[path]), {})
            entries, _ = await list_document_entries(self._store(), [collection], conditions)
        except (ContractError, RetrievalError) as exc:
            raise _failure(exc) from exc
        if not entries:
            raise DocumentNotFoundError(path, collection)
        return max(entries, key=lambda entry: entry.seq).file_id

    async def list_documents(self, collection: str, *, limit: int, offset: int) -> DocumentList:
        _refuse_memory(collection)
        try:
            entries, _ = await list_document_entries(self._store(), [collection], [])
        except (ContractError, RetrievalError) as exc:
            raise _failure(exc) from exc
        if not entries:
            raise CollectionNotFoundError(collection)
        page = entries[offset : offset + limit]
        end = offset + len(page)
        return DocumentList(
            collection=collection,
            documents=[_summary(collection, entry.file_id, entry.meta) for entry in page],
            total=len(entries),
            next_offset=end if end < len(entries) else None,
        )

    async def list_collections(self, *, include_all: bool) -> CollectionList:
        try:
            kinds = _LISTED_KINDS_ALL if include_all else KNOWLEDGE_BASES
            tenants, complete = await tenant_counts(self._store().store, limit=MAX_COLLECTIONS, kinds=kinds)
        except ContractError as exc:
            raise _failure(exc) from exc
        return CollectionList(
            collections=[
                CollectionInfo(name=tenant.name, kind=tenant.kind, documents=tenant.documents, chunks=tenant.chunks)
                for tenant in tenants
            ],
            complete=complete,
        )


def app_backend(state: Any) -> InProcessBackend:
    """The tools over an app's ``state`` (its lifespan sets ``search`` and ``store``, read at call time;
    ``create_app`` sets ``citations`` before any backend is made)."""

    def search() -> LinearSearch:
        pipeline: LinearSearch = state.search
        return pipeline

    def store() -> StoreSearch:
        chunks: StoreSearch = state.store
        return chunks

    citations: CitationLinks | None = state.citations
    return InProcessBackend(search, store, citations)


def _refuse_memory(collection: str) -> None:
    """Users' long-term memory is never a knowledge base an MCP client can read."""
    if tenant_kind(collection) == "memory":
        raise CollectionNotFoundError(collection)


def _summary(collection: str, file_id: str, meta: dict[str, Any]) -> DocumentSummary:
    tags = meta.get(MetaKey.TAGS)
    return DocumentSummary(
        file_id=file_id,
        name=_text(meta.get(MetaKey.NAME)),
        path=_text(meta.get(MetaKey.PATH)),
        format=_text(meta.get(MetaKey.FORMAT)),
        tags=[tag for tag in tags if isinstance(tag, str)] if isinstance(tags, list) else [],
        category=_text(meta.get(MetaKey.CATEGORY)),
        chunks=_int(meta.get(MetaKey.CHUNK_COUNT)),
        ingested_at=ingested_at(meta),
        uri=document_uri(collection, file_id),
    )

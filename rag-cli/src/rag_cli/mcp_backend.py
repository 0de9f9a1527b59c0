"""``rag mcp``: the knowledge base's MCP server on stdio, over the two services' HTTP APIs.

The server definition is the retrieval agent's own (``retrieval_agent.mcp.server``), so the tools
answer as they do at ``/mcp``; only the backend differs: search is ``POST /search`` on
RAG_RETRIEVAL_URL (RETRIEVAL_API_KEY), documents and counts come from the ingestion service's
documents API on RAG_INGESTION_URL (INGESTION_API_KEY). The keys and the tenant rule are the
services' own: every call names its collection, and the services filter on it.

Stdout is the protocol channel: nothing here prints, logs go to stderr.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import httpx

from ingestion_service.api.models import DocumentView
from rag_cli.client import (
    RequestFailedError,
    SearchFailedError,
    collection_stats,
    collections_page,
    document_text,
    documents_page,
    search_reply,
)
from rag_cli.config import Endpoint
from rag_runtime.http import configure_logging
from retrieval_agent.api.models import SearchResponse
from retrieval_agent.errors import CollectionNotFoundError, DocumentNotFoundError, KnowledgeBaseError
from retrieval_agent.mcp.models import (
    CollectionInfo,
    CollectionList,
    DocumentList,
    DocumentSummary,
    DocumentText,
    Passage,
    collection_kind,
    document_uri,
)
from shared_contract.document_filter import DocumentFilter
from shared_contract.schema import MetaKey, page_number

# A search or a long document's text can take a while; the connection itself should not.
HTTP_TIMEOUT = httpx.Timeout(120.0, connect=10.0)
COLLECTIONS_ENV = "RAG_MCP_COLLECTIONS"


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _unreachable(service: str, endpoint: Endpoint, exc: httpx.HTTPError) -> KnowledgeBaseError:
    return KnowledgeBaseError(f"the {service} service at {endpoint.url} did not answer: {type(exc).__name__}: {exc}")


class HttpBackend:
    """The tools over HTTP. ``list_collections`` asks the ingestion service (GET /api/v1/collections);
    ``collections`` (``--collection`` or RAG_MCP_COLLECTIONS), when given, narrows what it reports.
    ``search`` and the document tools take any collection name, like the API."""

    def __init__(
        self, client: httpx.AsyncClient, *, retrieval: Endpoint, ingestion: Endpoint, collections: Sequence[str]
    ) -> None:
        self._client = client
        self._retrieval = retrieval
        self._ingestion = ingestion
        self._collections = list(dict.fromkeys(collections))

    async def search(
        self, query: str, collection: str, *, k: int, document_filter: DocumentFilter | None
    ) -> list[Passage]:
        try:
            reply = await search_reply(
                self._client,
                self._retrieval,
                query,
                collections=[collection],
                k=k,
                document_filter=None
                if document_filter is None
                else document_filter.model_dump(mode="json", exclude_none=True),
            )
        except SearchFailedError as exc:
            raise KnowledgeBaseError(str(exc)) from exc
        except httpx.HTTPError as exc:
            raise _unreachable("retrieval", self._retrieval, exc) from exc
        passages = _passages(reply.results)
        if not passages and await self._empty(collection):
            raise CollectionNotFoundError(collection)
        return passages

    async def _empty(self, collection: str) -> bool:
        try:
            stats = await collection_stats(self._client, self._ingestion, collection)
        except (RequestFailedError, httpx.HTTPError):
            return False  # no hits is still a true answer; only a known-empty collection is an error
        return stats.documents == 0

    async def read_document(self, file_id: str, collection: str) -> DocumentText:
        try:
            body = await document_text(self._client, self._ingestion, file_id, collection=collection)
        except RequestFailedError as exc:
            if exc.status == 404:
                raise DocumentNotFoundError(file_id, collection) from exc
            raise KnowledgeBaseError(str(exc)) from exc
        except httpx.HTTPError as exc:
            raise _unreachable("ingestion", self._ingestion, exc) from exc
        return DocumentText(
            file_id=file_id,
            collection=body.collection_name or collection,
            name=body.name or None,
            path=body.path,
            text=body.text,
            chunks=body.chunks,
        )

    async def file_id_at(self, path: str, collection: str) -> str:
        try:
            # Newest first: of files ingested under the same path, the latest is the one meant.
            page = await documents_page(
                self._client, self._ingestion, collection=collection, limit=1, offset=0, sort="-ingested_at", path=path
            )
        except RequestFailedError as exc:
            raise KnowledgeBaseError(str(exc)) from exc
        except httpx.HTTPError as exc:
            raise _unreachable("ingestion", self._ingestion, exc) from exc
        if not page.documents:
            raise DocumentNotFoundError(path, collection)
        return page.documents[0].file_id

    async def list_documents(self, collection: str, *, limit: int, offset: int) -> DocumentList:
        try:
            page = await documents_page(
                self._client, self._ingestion, collection=collection, limit=limit, offset=offset
            )
        except RequestFailedError as exc:
            raise KnowledgeBaseError(str(exc)) from exc
        except httpx.HTTPError as exc:
            raise _unreachable("ingestion", self._ingestion, exc) from exc
        if page.total == 0:
            raise CollectionNotFoundError(collection)
        next_offset = page.next_offset
        return DocumentList(
            collection=collection,
            documents=[_summary(collection, document) for document in page.documents],
            total=page.total,
            # The documents API's offset is opaque text; the tool's is the number it holds for this listing.
            next_offset=int(next_offset) if next_offset is not None and next_offset.isdigit() else None,
        )

    async def list_collections(self, *, include_all: bool) -> CollectionList:
        try:
            body = await collections_page(self._client, self._ingestion, include_all=include_all)
        except RequestFailedError as exc:
            raise KnowledgeBaseError(str(exc)) from exc
        except httpx.HTTPError as exc:
            raise _unreachable("ingestion", self._ingestion, exc) from exc
        infos = [
            CollectionInfo(name=row.name, kind=collection_kind(row.name), documents=row.documents, chunks=row.chunks)
            for row in body.collections
        ]
        if self._collections:
            # Started with --collection / RAG_MCP_COLLECTIONS: only those are offered to the client.
            wanted = set(self._collections)
            infos = [info for info in infos if info.name in wanted]
        return CollectionList(collections=infos, complete=body.complete)


def _passages(results: SearchResponse) -> list[Passage]:
    # /search answers parallel lists of lists; the first (merged) list is the ranking.
    hits = zip(
        results.documents[0] if results.documents else [],
        results.metadatas[0] if results.metadatas else [],
        results.distances[0] if results.distances else [],
        strict=False,
    )
    passages = []
    for rank, (text, meta, distance) in enumerate(hits, start=1):
        file_id, tenant = _text(meta.get("file_id")), _text(meta.get("collection_name"))
        passages.append(
            Passage(
                rank=rank,
                text=text,
                name=_text(meta.get("name")) or _text(meta.get("source")),
                path=_text(meta.get(MetaKey.PATH)),
                file_id=file_id,
                collection=tenant,
                page=_int(meta.get("page")),
                page_number=page_number(meta.get("page")),
                score=distance,
                uri=document_uri(tenant, file_id) if tenant and file_id else None,
                # The retrieval agent's signed links, passed on as /search gives them.
                citation_url=_text(meta.get("citation_url")),
                original_url=_text(meta.get("original_url")),
            )
        )
    return passages


def _summary(collection: str, document: DocumentView) -> DocumentSummary:
    return DocumentSummary(
        file_id=document.file_id,
        name=document.name or None,
        path=document.path,
        format=document.format or None,
        tags=document.tags,
        category=document.category or None,
        chunks=document.chunks,
        ingested_at=document.ingested_at,
        uri=document_uri(collection, document.file_id),
    )


async def serve_stdio(*, retrieval: Endpoint, ingestion: Endpoint, collections: Sequence[str]) -> None:
    """Serve MCP on stdin/stdout until the client closes it."""
    from retrieval_agent.mcp.server import build_mcp_server

    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as client:
        backend = HttpBackend(client, retrieval=retrieval, ingestion=ingestion, collections=collections)
        await build_mcp_server(backend).run_stdio_async()


def run_mcp(*, retrieval: Endpoint, ingestion: Endpoint, collections: Sequence[str]) -> int:
    """Entry point of ``rag mcp``."""
    # Before the server is built: the SDK configures the root logger only when nothing has.
    configure_logging("WARNING", "text")
    anyio.run(lambda: serve_stdio(retrieval=retrieval, ingestion=ingestion, collections=collections))
    return 0

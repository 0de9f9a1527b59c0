"""The knowledge base as an MCP server: one definition for both transports.

``/mcp`` on the retrieval agent (streamable HTTP, :class:`~retrieval_agent.mcp.backend.InProcessBackend`)
and ``rag mcp`` (stdio, ``rag_cli.mcp_backend.HttpBackend``) build the same server over different
backends, so a tool behaves the same whichever way a client connects. Importing this module loads
no model and opens nothing.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from retrieval_agent.errors import DocumentNotFoundError, KnowledgeBaseError
from retrieval_agent.mcp.models import (
    DEFAULT_K,
    MAX_K,
    MAX_PAGE,
    CollectionList,
    DocumentList,
    DocumentText,
    KnowledgeBackend,
    SearchResult,
    document_id,
    document_uri,
)
from shared_contract.document_filter import DocumentFilter
from shared_contract.names import CollectionName, is_collection_name
from shared_contract.paths import MAX_PATH_CHARS

SERVER_NAME = "rag-knowledge-base"
DOCUMENT_TEMPLATE = "kb://{collection}/{file_id}"
COLLECTIONS_URI = "kb://collections"

INSTRUCTIONS = """\
Search the organisation's knowledge bases (document collections) and read their documents.
Start with list_collections to learn the collection names, then search one collection with a
short, specific query. Each passage names its file (file_id, and its path when it was synced from a
folder) and page; read_document returns a whole document, by file_id or path, when the passages are
not enough. Cite the file name and page you used, and a passage's highlighted page link
when it has one."""

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

Collection = Annotated[
    CollectionName, Field(description="The collection (knowledge base) name, from list_collections.")
]


def _result(text: str, structured: SearchResult | DocumentText | DocumentList | CollectionList) -> CallToolResult:
    # Readable text for the model, the same data typed in structured_content for programs.
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured.model_dump(mode="json")
    )


def _search_text(result: SearchResult) -> str:
    if not result.passages:
        return f"No passage in {result.collection!r} matches {result.query!r}."
    blocks = []
    for passage in result.passages:
        where = passage.path or passage.name or passage.file_id or "?"
        page = f", page {passage.page_number}" if passage.page_number is not None else ""
        head = f"[{passage.rank}] {where}{page} (file_id {passage.file_id}, score {passage.score:.2f})"
        # The link a person can check the passage by, for the answer to show.
        link = f"\nhighlighted page: {passage.citation_url}" if passage.citation_url else ""
        blocks.append(f"{head}{link}\n{passage.text}")
    return "\n\n".join(blocks)


def _documents_text(listing: DocumentList) -> str:
    lines = [f"{listing.total} documents in {listing.collection!r}:"]
    lines += [f"- {doc.path or doc.name or doc.file_id} (file_id {doc.file_id})" for doc in listing.documents]
    if listing.next_offset is not None:
        lines.append(f"More: list_documents(offset={listing.next_offset}).")
    return "\n".join(lines)


def _collections_text(listing: CollectionList) -> str:
    if not listing.collections:
        return "No collections."
    lines = []
    for item in listing.collections:
        counts = ", ".join(
            f"{value} {label}"
            for value, label in ((item.documents, "documents"), (item.chunks, "chunks"))
            if value is not None
        )
        lines.append(f"- {item.name} ({item.kind}{', ' + counts if counts else ''})")
    if not listing.complete:
        lines.append("(listing stopped at the server's cap)")
    return "\n".join(lines)


def require_words(query: str) -> None:
    """A tool error for a query of blanks: the pipeline drops it, and "no passage matches" would be false."""
    if not query.strip():
        raise ToolError("query has no words: write what to look for.")


class _KnowledgeServer(MCPServer):
    """The SDK's server, whose refusal of a tool's arguments names the fields, not the values sent."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                problems = "; ".join(
                    f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
                    for error in exc.__cause__.errors()[:5]
                )
                raise ToolError(f"{name}: invalid arguments: {problems}") from None
            raise


def build_mcp_server(backend: KnowledgeBackend) -> MCPServer:
    """The MCP server over ``backend``: four read-only tools, a document resource template and a
    collections resource. :class:`KnowledgeBaseError` becomes a tool error (``isError``) carrying its
    message; anything else is the SDK's generic tool error, logged with its traceback."""
    server: MCPServer = _KnowledgeServer(SERVER_NAME, instructions=INSTRUCTIONS)

    @server.tool(annotations=_READ_ONLY)
    async def search(
        query: Annotated[str, Field(min_length=1, max_length=2000, description="What to look for, in words.")],
        collection: Collection,
        filters: Annotated[
            DocumentFilter | None,
            Field(description="Optional metadata filter (AND across keys): file_ids, names, formats, tags, ..."),
        ] = None,
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many passages to return.")] = DEFAULT_K,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Hybrid search (meaning and keywords) over one collection; the best passages first, each with
        its file name, file_id, page and a relevance score in [0, 1]. Only that collection's documents
        are searched."""
        require_words(query)
        try:
            passages = await backend.search(query, collection, k=k, document_filter=filters)
        except KnowledgeBaseError as exc:
            raise ToolError(str(exc)) from exc
        result = SearchResult(query=query, collection=collection, passages=passages)
        return _result(_search_text(result), result)

    @server.tool(annotations=_READ_ONLY)
    async def read_document(
        collection: Collection,
        file_id: Annotated[
            str | None, Field(min_length=1, max_length=512, description="The file_id a passage or listing gave.")
        ] = None,
        path: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=MAX_PATH_CHARS,
                description="Instead of file_id: the document's path relative to its synced folder (notes/plan.md).",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, DocumentText]:
        """The whole text of one document, rebuilt from its indexed chunks in order, by file_id or by
        path. The collection is required: the same file can sit in several collections, and a document
        is read only from the collection named (as the HTTP API does)."""
        try:
            document = await backend.read_document(await document_id(backend, collection, file_id, path), collection)
        except KnowledgeBaseError as exc:
            raise ToolError(str(exc)) from exc
        return _result(document.text, document)

    @server.tool(annotations=_READ_ONLY)
    async def list_documents(
        collection: Collection,
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE, description="Documents per page.")] = 50,
        offset: Annotated[int, Field(ge=0, description="The previous page's next_offset.")] = 0,
    ) -> Annotated[CallToolResult, DocumentList]:
        """The documents of one collection, by name: file_id, name, format, tags, chunks."""
        try:
            listing = await backend.list_documents(collection, limit=limit, offset=offset)
        except KnowledgeBaseError as exc:
            raise ToolError(str(exc)) from exc
        return _result(_documents_text(listing), listing)

    @server.tool(annotations=_READ_ONLY)
    async def list_collections(
        include_all: Annotated[
            bool,
            Field(
                description="Also Open WebUI's per-file (file-*) and per-user memory (user-memory-*) collections, "
                "which repeat what the knowledge bases hold or are private notes."
            ),
        ] = False,
    ) -> Annotated[CallToolResult, CollectionList]:
        """The collections (knowledge bases) there are to search, with their document and chunk counts."""
        try:
            listing = await backend.list_collections(include_all=include_all)
        except KnowledgeBaseError as exc:
            raise ToolError(str(exc)) from exc
        return _result(_collections_text(listing), listing)

    @server.resource(
        DOCUMENT_TEMPLATE,
        name="document",
        description="One document's whole text (as read_document returns it).",
        mime_type="text/markdown",
    )
    async def document(collection: str, file_id: str) -> str:
        if not is_collection_name(collection):
            raise ResourceNotFoundError(f"Unknown resource: {document_uri(collection, file_id)}")
        try:
            return (await backend.read_document(file_id, collection)).text
        except DocumentNotFoundError as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        except KnowledgeBaseError as exc:
            raise ResourceError(str(exc)) from exc

    @server.resource(
        COLLECTIONS_URI,
        name="collections",
        description="The knowledge bases (as list_collections returns them), JSON.",
        mime_type="application/json",
    )
    async def collections() -> str:
        try:
            listing = await backend.list_collections(include_all=False)
        except KnowledgeBaseError as exc:
            raise ResourceError(str(exc)) from exc
        return json.dumps(listing.model_dump(mode="json"), ensure_ascii=False)

    return server

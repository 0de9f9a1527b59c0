"""``/tools``: the knowledge-base tools as an OpenAPI tool server (Open WebUI's "OpenAPI" tool servers).

The main ``/openapi.json`` lists every route (health, metrics, chat, ...), and a tool server offers
each operation of its document to the model as a tool. ``/tools/openapi.json`` lists only these four:
search one collection, read a document, list a collection's documents, list the collections; the
same calls and answers as the MCP tools (``mcp/backend.py``), with descriptions written for a model.
In Open WebUI: URL ``<retrieval>``, path ``tools/openapi.json``, Bearer = the retrieval API_KEY.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, NoReturn

from fastapi import APIRouter, Depends, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rag_runtime.http import ERROR_RESPONSES, require_json_body
from retrieval_agent.api.auth import BEARER
from retrieval_agent.errors import KnowledgeBaseError
from retrieval_agent.mcp.backend import InProcessBackend, app_backend
from retrieval_agent.mcp.models import (
    DEFAULT_K,
    MAX_K,
    MAX_PAGE,
    CollectionList,
    DocumentList,
    DocumentText,
    SearchResult,
    document_id,
)
from shared_contract import CollectionName
from shared_contract.document_filter import DocumentFilter
from shared_contract.error_body import ErrorBody
from shared_contract.paths import MAX_PATH_CHARS, relative_path
from shared_contract.version import CONTRACT_VERSION

TOOLS_PREFIX = "/tools"

_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {
        "model": ErrorBody,
        "description": "COLLECTION_NOT_FOUND: the collection holds no documents; DOCUMENT_NOT_FOUND: no such file in it.",
    }
}
router = APIRouter(
    prefix=TOOLS_PREFIX,
    tags=["tools"],
    dependencies=[BEARER, Depends(require_json_body)],
    responses={**ERROR_RESPONSES, **_NOT_FOUND},
)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchToolRequest(_Body):
    query: str = Field(min_length=1, max_length=2000, description="What to look for, in words (a question works).")
    collection: CollectionName = Field(description="The collection (knowledge base) to search, from list_collections.")
    k: int = Field(default=DEFAULT_K, ge=1, le=MAX_K, description="How many passages to return.")
    filters: DocumentFilter | None = Field(
        default=None,
        description="Optional: only documents matching these metadata (file_ids, names, formats, tags, ...).",
    )

    @field_validator("query")
    @classmethod
    def _has_words(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query has no words: write what to look for")
        return value


class ReadDocumentRequest(_Body):
    file_id: str | None = Field(
        default=None, min_length=1, max_length=512, description="The file_id a passage or a listing gave."
    )
    path: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PATH_CHARS,
        description="Instead of file_id: the document's path relative to its synced folder (notes/plan.md).",
    )
    collection: CollectionName = Field(description="The collection the document is in (a passage's collection).")

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        return None if value is None else relative_path(value)

    @model_validator(mode="after")
    def _one_document(self) -> ReadDocumentRequest:
        if (self.file_id is None) == (self.path is None):
            raise ValueError("give file_id or path, one of them")
        return self


class ListDocumentsRequest(_Body):
    collection: CollectionName = Field(description="The collection (knowledge base), from list_collections.")
    limit: int = Field(default=50, ge=1, le=MAX_PAGE, description="Documents per page.")
    offset: int = Field(default=0, ge=0, description="The previous page's next_offset (0 for the first page).")


class ListCollectionsRequest(_Body):
    include_all: bool = Field(
        default=False,
        description="Also Open WebUI's per-file (file-*) and per-user memory collections, which repeat what the "
        "knowledge bases hold or are private notes.",
    )


async def get_tools(request: Request) -> InProcessBackend:
    """The MCP tools' backend over the app's search service and store."""
    return app_backend(request.app.state)


ToolsDep = Annotated[InProcessBackend, Depends(get_tools)]


def _raise(exc: KnowledgeBaseError) -> NoReturn:
    # A failure underneath (Qdrant down, the embedder) keeps its own code and status.
    raise exc.cause if exc.cause is not None else exc


@router.post("/search", operation_id="search_knowledge_base", response_model=SearchResult)
async def search_tool(body: SearchToolRequest, tools: ToolsDep) -> SearchResult:
    """Search one knowledge base for passages about the query (meaning and keywords). Returns the best
    passages first, each with its text, file name, file_id, page_number (as people count pages) and a
    relevance score in [0, 1]; a passage of a PDF or an image may carry citation_url, a link to its page
    with the passage highlighted. Cite the file name and page you used (with that link when there is
    one). Call read_document with a passage's file_id when the passages are not enough."""
    try:
        passages = await tools.search(body.query, body.collection, k=body.k, document_filter=body.filters)
    except KnowledgeBaseError as exc:
        _raise(exc)
    return SearchResult(query=body.query, collection=body.collection, passages=passages)


@router.post("/read_document", operation_id="read_document", response_model=DocumentText)
async def read_document_tool(body: ReadDocumentRequest, tools: ToolsDep) -> DocumentText:
    """The whole text of one document of a knowledge base, in order. Use the file_id (or the path) and
    collection a search passage or list_documents gave."""
    try:
        file_id = await document_id(tools, body.collection, body.file_id, body.path)
        return await tools.read_document(file_id, body.collection)
    except KnowledgeBaseError as exc:
        _raise(exc)


@router.post("/list_documents", operation_id="list_documents", response_model=DocumentList)
async def list_documents_tool(body: ListDocumentsRequest, tools: ToolsDep) -> DocumentList:
    """The documents of one knowledge base by name, with file_id, format, tags and size; page through
    with next_offset."""
    try:
        return await tools.list_documents(body.collection, limit=body.limit, offset=body.offset)
    except KnowledgeBaseError as exc:
        _raise(exc)


@router.post("/list_collections", operation_id="list_collections", response_model=CollectionList)
async def list_collections_tool(body: ListCollectionsRequest, tools: ToolsDep) -> CollectionList:
    """The knowledge bases there are to search, with their document and chunk counts."""
    try:
        return await tools.list_collections(include_all=body.include_all)
    except KnowledgeBaseError as exc:
        _raise(exc)


@cache
def tools_openapi() -> dict[str, Any]:
    """The OpenAPI document of the tools alone (what a tool server offers the model)."""
    return get_openapi(
        title="Knowledge base tools",
        version=CONTRACT_VERSION,
        description="Search and read the knowledge bases of this retrieval service.",
        routes=[route for route in router.routes if isinstance(route, APIRoute)],
    )


# The document itself: a GET beside the tools, kept out of both documents.
spec_router = APIRouter(dependencies=[BEARER])


@spec_router.get(f"{TOOLS_PREFIX}/openapi.json", include_in_schema=False)
async def tools_openapi_document() -> JSONResponse:
    return JSONResponse(tools_openapi())

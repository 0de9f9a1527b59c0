"""``rag mcp`` as an MCP client runs it: a subprocess on stdio (the SDK's stdio client), calling scripted
services on loopback that check the keys and record what they were asked."""

from __future__ import annotations

import socket
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent, TextResourceContents
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ingestion_service.api.models import (
    CollectionEntry,
    CollectionListResponse,
    CollectionStatsResponse,
    DocumentListResponse,
    DocumentTextResponse,
)
from retrieval_agent.api.models import SearchResponse

from .conftest import INGESTION_KEY, RETRIEVAL_KEY, document_view, error_reply, serving  # noqa: TID252

pytestmark = pytest.mark.anyio

PASSAGES = SearchResponse(
    documents=[["Refunds are paid within 14 days.", "Returns need a receipt."]],
    metadatas=[
        [
            {
                "name": "policy.pdf",
                "file_id": "f-policy",
                "collection_name": "kb-a",
                "page": 3,
                "citation_url": "http://ingest/api/v1/citations/t.s/page.png",
                "original_url": "http://ingest/api/v1/citations/t.s/original#page=4",
            },
            {"name": "faq.md", "file_id": "f-faq", "collection_name": "kb-a"},
        ]
    ],
    distances=[[0.91, 0.42]],
)
NO_PASSAGES = SearchResponse(documents=[[]], metadatas=[[]], distances=[[]])
STATS = {"kb-a": {"documents": 2, "chunks": 5}, "file-x": {"documents": 1, "chunks": 1}}


class Services:
    """Both services' routes on one app; ``requests`` records (path, query, JSON body)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], Any]] = []

    def _refused(self, request: Request, key: str) -> JSONResponse | None:
        if request.headers.get("authorization") != f"Bearer {key}":
            return error_reply(401, "UNAUTHORIZED", "Missing or wrong API key.")
        return None

    async def search(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append((request.url.path, dict(request.query_params), body))
        if refused := self._refused(request, RETRIEVAL_KEY):
            return refused
        if body.get("filter", {}).get("attributes"):
            return error_reply(422, "INVALID_REQUEST", "filter.attributes.year is not indexed")
        return JSONResponse((PASSAGES if body["collection_names"] == ["kb-a"] else NO_PASSAGES).model_dump())

    async def stats(self, request: Request) -> JSONResponse:
        self.requests.append((request.url.path, dict(request.query_params), None))
        if refused := self._refused(request, INGESTION_KEY):
            return refused
        name = request.path_params["name"]
        counts = STATS.get(name, {"documents": 0, "chunks": 0})
        stats = CollectionStatsResponse(
            collection_name=name,
            **counts,
            text_bytes=0,
            languages={},
            formats={},
            extractors={},
            last_ingest=None,
            outdated_documents=0,
        )
        return JSONResponse(stats.model_dump(mode="json"))

    async def collections(self, request: Request) -> JSONResponse:
        self.requests.append((request.url.path, dict(request.query_params), None))
        if refused := self._refused(request, INGESTION_KEY):
            return refused
        rows = [
            CollectionEntry(name=name, kind="file" if name.startswith("file-") else "knowledge_base", **counts)
            for name, counts in sorted(STATS.items())
        ]
        if request.query_params.get("include_all") != "true":
            rows = [row for row in rows if row.kind == "knowledge_base"]
        return JSONResponse(CollectionListResponse(collections=rows, complete=True).model_dump(mode="json"))

    async def documents(self, request: Request) -> JSONResponse:
        self.requests.append((request.url.path, dict(request.query_params), None))
        if refused := self._refused(request, INGESTION_KEY):
            return refused
        if request.query_params["collection_name"] != "kb-a":
            empty = DocumentListResponse(documents=[], total=0, next_offset=None)
            return JSONResponse(empty.model_dump(mode="json"))
        rows = [
            document_view(
                "f-faq",
                name="faq.md",
                collection_name="kb-a",
                format="md",
                chunks=1,
                tags=["support"],
                ingested_at="2026-11-29T03:16:47.690873Z",
            ),
            document_view(
                "f-policy", name="policy.pdf", collection_name="kb-a", format="pdf", chunks=4, category="legal"
            ),
        ]
        page = DocumentListResponse(documents=rows[:1], total=2, next_offset="1")
        return JSONResponse(page.model_dump(mode="json"))

    async def text(self, request: Request) -> JSONResponse:
        self.requests.append((request.url.path, dict(request.query_params), None))
        if refused := self._refused(request, INGESTION_KEY):
            return refused
        if (request.path_params["file_id"], request.query_params["collection_name"]) != ("f-policy", "kb-a"):
            return error_reply(404, "DOCUMENT_NOT_FOUND", "no such document")
        text = DocumentTextResponse(
            file_id="f-policy", collection_name="kb-a", name="policy.pdf", text="# Policy\n\nAll of it.", chunks=4
        )
        return JSONResponse(text.model_dump(mode="json"))

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/search", self.search, methods=["POST"]),
                Route("/api/v1/collections", self.collections),
                Route("/api/v1/collections/{name}/stats", self.stats),
                Route("/api/v1/documents", self.documents),
                Route("/api/v1/documents/{file_id}/text", self.text),
            ]
        )


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def services() -> Iterator[tuple[Services, str]]:
    fake = Services()
    with serving(fake.app()) as url:
        yield fake, url


@asynccontextmanager
async def rag_mcp(base_url: str, *args: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rag_cli", "mcp", *args],
        env={
            "RAG_RETRIEVAL_URL": base_url,
            "RETRIEVAL_API_KEY": RETRIEVAL_KEY,
            "RAG_INGESTION_URL": base_url,
            "INGESTION_API_KEY": INGESTION_KEY,
        },
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    data = result.structured_content
    assert isinstance(data, dict)
    return data


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def test_tools_call_the_services_with_their_keys(services: tuple[Services, str]) -> None:
    fake, url = services
    async with rag_mcp(url, "--collection", "kb-a", "--collection", "file-x") as session:
        tools = {tool.name for tool in (await session.list_tools()).tools}
        found = await session.call_tool(
            "search", {"query": "refund time", "collection": "kb-a", "k": 2, "filters": {"tags": ["policy"]}}
        )
        document = await session.call_tool("read_document", {"file_id": "f-policy", "collection": "kb-a"})
        listing = await session.call_tool("list_documents", {"collection": "kb-a", "limit": 1})
        collections = await session.call_tool("list_collections", {})
        every = await session.call_tool("list_collections", {"include_all": True})
        resource = await session.read_resource("kb://kb-a/f-policy")
    assert tools == {"search", "read_document", "list_documents", "list_collections"}
    passages = structured(found)["passages"]
    assert passages[0] == {
        "rank": 1,
        "text": "Refunds are paid within 14 days.",
        "name": "policy.pdf",
        "path": None,
        "file_id": "f-policy",
        "collection": "kb-a",
        "page": 3,
        "page_number": 4,
        "score": 0.91,
        "uri": "kb://kb-a/f-policy",
        # The retrieval agent's signed links, as /search gave them; a passage without them has none.
        "citation_url": "http://ingest/api/v1/citations/t.s/page.png",
        "original_url": "http://ingest/api/v1/citations/t.s/original#page=4",
    }
    assert (passages[1]["page"], passages[1]["page_number"]) == (None, None)
    assert "citation_url" not in passages[1]
    searched = next(body for path, _, body in fake.requests if path == "/search")
    assert searched == {
        "queries": ["refund time"],
        "collection_names": ["kb-a"],
        "k": 2,
        "filter": {"tags": ["policy"]},
    }
    assert structured(document)["text"] == "# Policy\n\nAll of it."
    page = structured(listing)
    assert page["total"] == 2
    assert page["next_offset"] == 1
    assert page["documents"][0]["uri"] == "kb://kb-a/f-faq"
    assert page["documents"][0]["ingested_at"] == "2026-11-29T03:16:47.690873Z"
    listed = next(query for path, query, _ in fake.requests if path == "/api/v1/documents")
    assert listed == {"collection_name": "kb-a", "limit": "1", "offset": "0", "sort": "name"}
    assert structured(collections)["collections"] == [
        {"name": "kb-a", "kind": "knowledge_base", "documents": 2, "chunks": 5}
    ]
    assert [item["name"] for item in structured(every)["collections"]] == ["file-x", "kb-a"]
    content = resource.contents[0]
    assert isinstance(content, TextResourceContents)
    assert content.text == "# Policy\n\nAll of it."


async def test_failures_are_tool_errors_and_the_server_keeps_serving(services: tuple[Services, str]) -> None:
    _, url = services
    async with rag_mcp(url) as session:
        everything = await session.call_tool("list_collections", {})
        empty = await session.call_tool("search", {"query": "refund", "collection": "kb-empty"})
        invalid = await session.call_tool(
            "search", {"query": "refund", "collection": "kb-a", "filters": {"attributes": {"year": 2024}}}
        )
        missing = await session.call_tool("read_document", {"file_id": "f-policy", "collection": "kb-b"})
        unlisted = await session.call_tool("list_documents", {"collection": "kb-empty"})
        with pytest.raises(MCPError, match="no document 'nope'"):
            await session.read_resource("kb://kb-a/nope")
        still = await session.call_tool("search", {"query": "refund", "collection": "kb-a"})
    # Started without --collection: every knowledge base the ingestion service lists.
    assert [item["name"] for item in structured(everything)["collections"]] == ["kb-a"]
    assert "collection 'kb-empty' holds no documents" in error_text(empty)
    assert "HTTP 422 INVALID_REQUEST: filter.attributes.year is not indexed" in error_text(invalid)
    assert "no document 'f-policy' in collection 'kb-b'" in error_text(missing)
    assert "collection 'kb-empty' holds no documents" in error_text(unlisted)
    assert structured(still)["passages"]


async def test_a_wrong_key_is_reported_not_crashed(services: tuple[Services, str]) -> None:
    _, url = services
    async with rag_mcp(
        url, "--retrieval-api-key", "wrong", "--ingestion-api-key", "wrong", "--collection", "kb-a"
    ) as session:
        found = await session.call_tool("search", {"query": "refund", "collection": "kb-a"})
        collections = await session.call_tool("list_collections", {})
    assert "HTTP 401 UNAUTHORIZED" in error_text(found)
    assert "HTTP 401 UNAUTHORIZED" in error_text(collections)


async def test_an_unreachable_service_is_a_tool_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with rag_mcp(closed) as session:
        found = await session.call_tool("search", {"query": "refund", "collection": "kb-a"})
    assert f"the retrieval service at {closed} did not answer" in error_text(found)

"""``/mcp`` end to end: the real app on uvicorn over a seeded embedded store, an SDK ``ClientSession``
over the streamable-HTTP client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent, TextResourceContents

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.store import ChunkStore, point_id_for
from retrieval_agent.main import create_app
from shared_contract.citations import verify_link

from ..citation_support import (  # noqa: TID252
    HANDBOOK_CHUNKS,
    HANDBOOK_FILE_ID,
    HANDBOOK_NAME,
    HANDBOOK_TENANT,
    KEY,
    LEAVE_QUESTION,
    LINKS_ON,
    NOW,
    TTL_SECONDS,
    add_handbook,
    clock,
    original_link,
    page_image_token,
)
from ..conftest import AUTH, add_chunk, chunk_meta, make_settings  # noqa: TID252
from ..contract_support import RebuildableStore, names_the_mismatch  # noqa: TID252

pytestmark = pytest.mark.anyio

EIFFEL = "When was the Eiffel Tower completed?"


@pytest.fixture
def mcp_url(serve: Callable[[Any], str], seeded: ChunkStore, embedder: ContractEmbedder) -> str:
    # A per-file tenant as Open WebUI makes one: listed only with include_all.
    anyio.run(
        lambda: add_chunk(
            seeded,
            embedder,
            "upload-0",
            "Uploaded notes about Lisbon trams.",
            chunk_meta("file-upload-1", "notes.md", 1, 0),
        )
    )
    app = create_app(make_settings(), embedder=embedder, store=seeded)
    return f"{serve(app)}/mcp"


@pytest.fixture
def linked_mcp_url(serve: Callable[[Any], str], seeded: ChunkStore, embedder: ContractEmbedder) -> str:
    """/mcp on a service that signs citation links, over kb-a with the handbook PDF."""
    anyio.run(add_handbook, seeded, embedder)
    app = create_app(make_settings(**LINKS_ON), embedder=embedder, store=seeded, clock=clock)
    return f"{serve(app)}/mcp"


@asynccontextmanager
async def connect(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers=AUTH if headers is None else headers, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
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


async def test_lists_the_four_tools_and_the_document_resources(mcp_url: str) -> None:
    async with connect(mcp_url) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        templates = (await session.list_resource_templates()).resource_templates
        resources = (await session.list_resources()).resources
    assert set(tools) == {"search", "read_document", "list_documents", "list_collections"}
    assert set(tools["search"].input_schema["required"]) == {"query", "collection"}
    assert "filters" in tools["search"].input_schema["properties"]
    # A document is read by file_id or by path: only the collection is always required.
    assert set(tools["read_document"].input_schema["required"]) == {"collection"}
    assert {"file_id", "path"} <= set(tools["read_document"].input_schema["properties"])
    assert tools["search"].output_schema is not None
    assert [(template.uri_template, template.mime_type) for template in templates] == [
        ("kb://{collection}/{file_id}", "text/markdown")
    ]
    assert [str(resource.uri) for resource in resources] == ["kb://collections"]


async def test_search_ranks_the_right_file_first_and_stays_in_its_collection(mcp_url: str) -> None:
    async with connect(mcp_url) as session:
        result = await session.call_tool("search", {"query": EIFFEL, "collection": "kb-a", "k": 5})
    data = structured(result)
    passages = data["passages"]
    assert passages[0]["name"] == "paris.pdf"
    assert passages[0]["file_id"] == "file-paris.pdf"
    assert (passages[0]["page"], passages[0]["page_number"]) == (1, 2)
    assert passages[0]["uri"] == "kb://kb-a/file-paris.pdf"
    assert [passage["rank"] for passage in passages] == list(range(1, len(passages) + 1))
    assert all(0.0 <= passage["score"] <= 1.0 for passage in passages)
    # kb-b holds an Eiffel Tower chunk too: never returned for kb-a.
    assert {passage["collection"] for passage in passages} == {"kb-a"}
    block = result.content[0]
    assert isinstance(block, TextContent)
    assert "paris.pdf, page 2 (file_id file-paris.pdf" in block.text  # as people count pages
    assert "Tenant B" not in block.text
    assert "BANANA" not in block.text


async def test_a_filter_narrows_the_search(mcp_url: str) -> None:
    async with connect(mcp_url) as session:
        result = await session.call_tool(
            "search", {"query": EIFFEL, "collection": "kb-a", "filters": {"names": ["biology.pdf"]}}
        )
    passages = structured(result)["passages"]
    assert passages, "the filter keeps biology.pdf's chunks"
    assert {passage["name"] for passage in passages} == {"biology.pdf"}


async def test_an_invalid_filter_is_a_tool_error(mcp_url: str) -> None:
    async with connect(mcp_url) as session:
        result = await session.call_tool(
            "search", {"query": EIFFEL, "collection": "kb-a", "filters": {"attributes": {"year": 2024}}}
        )
    assert "INDEXED_ATTRIBUTES" in error_text(result)


async def test_invalid_arguments_name_the_field_not_the_value_sent(mcp_url: str) -> None:
    async with connect(mcp_url) as session:
        result = await session.call_tool("search", {"query": {"token": "sk-SECRET-42"}, "collection": "kb-a"})
    assert error_text(result) == "search: invalid arguments: query: Input should be a valid string"


async def test_read_document_returns_the_stitched_text_of_that_collection_only(mcp_url: str) -> None:
    async with connect(mcp_url) as session:
        document = await session.call_tool("read_document", {"file_id": "file-biology.pdf", "collection": "kb-a"})
        elsewhere = await session.call_tool("read_document", {"file_id": "file-secret.txt", "collection": "kb-a"})
        missing = await session.call_tool("read_document", {"file_id": "file-nope", "collection": "kb-a"})
    data = structured(document)
    assert data["name"] == "biology.pdf"
    assert data["chunks"] == 2
    text = data["text"]
    assert text.index("Photosynthesis") < text.index("Mitochondria")
    # The file lives in kb-b: naming kb-a reads nothing of it.
    assert "no document 'file-secret.txt' in collection 'kb-a'" in error_text(elsewhere)
    assert "BANANA" not in str(elsewhere.content)
    assert "no document 'file-nope'" in error_text(missing)


async def test_read_document_takes_a_file_id_or_a_relative_path(mcp_url: str) -> None:
    async with connect(mcp_url) as session:
        neither = await session.call_tool("read_document", {"collection": "kb-a"})
        both = await session.call_tool("read_document", {"file_id": "x", "path": "x.md", "collection": "kb-a"})
        climbing = await session.call_tool("read_document", {"path": "../x.md", "collection": "kb-a"})
        unknown = await session.call_tool("read_document", {"path": "notes/x.md", "collection": "kb-a"})
    for refused in (neither, both):
        assert "read_document takes a file_id or a path, one of them." in error_text(refused)
    assert "path must not contain '..'" in error_text(climbing)
    assert "no document 'notes/x.md' in collection 'kb-a'" in error_text(unknown)


async def test_list_documents_pages_by_name(mcp_url: str) -> None:
    async with connect(mcp_url) as session:
        first = structured(await session.call_tool("list_documents", {"collection": "kb-a", "limit": 3}))
        rest = structured(
            await session.call_tool(
                "list_documents", {"collection": "kb-a", "limit": 3, "offset": first["next_offset"]}
            )
        )
    assert first["total"] == 4
    assert [doc["name"] for doc in first["documents"]] == ["biology.pdf", "denmark.pdf", "paris.pdf"]
    assert first["next_offset"] == 3
    assert [doc["file_id"] for doc in rest["documents"]] == ["file-shared.txt"]
    assert rest["next_offset"] is None
    assert rest["documents"][0]["uri"] == "kb://kb-a/file-shared.txt"
    # As the documents API (and so `rag mcp`) gives it: indexed_at, else ingest_seq's milliseconds (1
    # here: the epoch), in RFC 3339 with Z.
    assert rest["documents"][0]["ingested_at"] == "1970-01-01T00:00:00Z"


async def test_list_collections_counts_documents_and_hides_per_file_tenants(mcp_url: str) -> None:
    async with connect(mcp_url) as session:
        default = structured(await session.call_tool("list_collections", {}))
        everything = structured(await session.call_tool("list_collections", {"include_all": True}))
        resource = await session.read_resource("kb://collections")
    by_name = {item["name"]: item for item in default["collections"]}
    assert set(by_name) == {"kb-a", "kb-b", "kb-c"}
    assert by_name["kb-a"] == {"name": "kb-a", "kind": "knowledge_base", "documents": 4, "chunks": 5}
    assert default["complete"] is True
    assert {item["name"]: item["kind"] for item in everything["collections"]}["file-upload-1"] == "file"
    content = resource.contents[0]
    assert isinstance(content, TextResourceContents)
    assert '"kb-b"' in content.text
    assert "file-upload-1" not in content.text


async def test_the_document_resource_is_the_whole_text(mcp_url: str) -> None:
    async with connect(mcp_url) as session:
        result = await session.read_resource("kb://kb-b/file-secret.txt")
        with pytest.raises(MCPError, match=r"no document 'file-secret\.txt' in collection 'kb-a'"):
            await session.read_resource("kb://kb-a/file-secret.txt")
    content = result.contents[0]
    assert isinstance(content, TextResourceContents)
    assert content.mime_type == "text/markdown"
    assert "secret code word of tenant B" in content.text


async def test_unknown_collections_and_bad_names_are_tool_errors(mcp_url: str) -> None:
    async with connect(mcp_url) as session:
        unknown = await session.call_tool("search", {"query": EIFFEL, "collection": "kb-nope"})
        empty_listing = await session.call_tool("list_documents", {"collection": "kb-nope"})
        bad_name = await session.call_tool("search", {"query": EIFFEL, "collection": "../kb-a"})
        # The session still answers after the errors.
        still = await session.call_tool("list_collections", {})
    assert "collection 'kb-nope' holds no documents" in error_text(unknown)
    assert "collection 'kb-nope' holds no documents" in error_text(empty_listing)
    assert "collection" in error_text(bad_name)
    assert not still.is_error


async def test_mcp_needs_the_api_key(mcp_url: str) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=30) as http:
        missing = await http.post(mcp_url, json=initialize, headers=headers)
        wrong = await http.post(mcp_url, json=initialize, headers={**headers, "Authorization": "Bearer wrong"})
        right = await http.post(mcp_url, json=initialize, headers={**headers, **AUTH})
    for refused in (missing, wrong):
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"] == "Bearer"
    assert right.status_code == 200, right.text
    assert right.json()["result"]["serverInfo"]["name"] == "rag-knowledge-base"
    # The SDK client too: its transport's task group raises the refused request.
    with pytest.raises(ExceptionGroup) as caught:
        async with connect(mcp_url, headers={}) as session:
            await session.list_tools()
    assert caught.group_contains(MCPError, match="error response")


async def test_enable_mcp_false_serves_no_endpoint(
    serve: Callable[[Any], str], seeded: ChunkStore, embedder: ContractEmbedder
) -> None:
    base = serve(create_app(make_settings(enable_mcp=False), embedder=embedder, store=seeded))
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(f"{base}/mcp", json={}, headers=AUTH)
    assert response.status_code == 404


async def test_a_query_of_blanks_is_a_tool_error_not_an_empty_answer(mcp_url: str) -> None:
    async with connect(mcp_url) as session:
        result = await session.call_tool("search", {"query": " \t ", "collection": "kb-a"})
    assert error_text(result).endswith("query has no words: write what to look for.")


async def test_get_and_delete_are_405_since_the_stateless_server_has_no_stream_or_session(mcp_url: str) -> None:
    # GET used to open an SSE stream that carried only pings, forever.
    async with httpx.AsyncClient(timeout=30) as http:
        get = await http.get(mcp_url, headers={**AUTH, "Accept": "text/event-stream"})
        delete = await http.delete(mcp_url, headers=AUTH)
    for response in (get, delete):
        assert response.status_code == 405
        assert response.headers["Allow"] == "POST"
        assert response.json()["code"] == "METHOD_NOT_ALLOWED"


async def test_a_contract_mismatch_is_a_search_tool_error_naming_the_setting_until_it_is_fixed(
    serve: Callable[[Any], str], seeded: ChunkStore, embedder: ContractEmbedder
) -> None:
    store = RebuildableStore(seeded)
    base = serve(create_app(make_settings(), embedder=embedder, store=store))
    arguments = {"query": EIFFEL, "collection": "kb-a", "k": 3}
    store.rebuild()
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        assert (await http.get("/health/ready")).status_code == 503
        async with connect(f"{base}/mcp") as session:
            refused = await session.call_tool("search", arguments)
        store.restore()
        assert (await http.get("/health/ready")).status_code == 200
    message = error_text(refused)
    assert "COLLECTION_MISMATCH: " in message
    assert names_the_mismatch(message)
    async with connect(f"{base}/mcp") as session:
        answered = await session.call_tool("search", arguments)
    assert structured(answered)["passages"][0]["name"] == "paris.pdf"


async def test_search_passages_carry_their_citation_links(linked_mcp_url: str) -> None:
    async with connect(linked_mcp_url) as session:
        result = await session.call_tool("search", {"query": LEAVE_QUESTION, "collection": HANDBOOK_TENANT, "k": 8})
    passages = structured(result)["passages"]
    chunk_id, page, text = HANDBOOK_CHUNKS[0]
    passage = next(passage for passage in passages if text in passage["text"])
    token = page_image_token(passage["citation_url"])
    link = verify_link(token, KEY, now=NOW)
    assert (link.collection_name, link.file_id, link.page) == (HANDBOOK_TENANT, HANDBOOK_FILE_ID, page)
    assert (link.point_id, link.expires_at) == (point_id_for(chunk_id), int(NOW) + TTL_SECONDS)
    assert passage["original_url"] == original_link(token, page)
    # Passages with no page to show (the docx, the corpus's chunks) have none.
    unlinked = [passage for passage in passages if passage["name"] != HANDBOOK_NAME]
    assert unlinked
    assert all("citation_url" not in passage and "original_url" not in passage for passage in unlinked)
    # The text result gives the model the link to show.
    block = result.content[0]
    assert isinstance(block, TextContent)
    assert f"highlighted page: {passage['citation_url']}" in block.text


async def test_search_passages_have_no_links_without_the_settings(mcp_url: str) -> None:
    async with connect(mcp_url) as session:
        result = await session.call_tool("search", {"query": EIFFEL, "collection": "kb-a", "k": 5})
    passages = structured(result)["passages"]
    assert passages
    assert all("citation_url" not in passage and "original_url" not in passage for passage in passages)
    block = result.content[0]
    assert isinstance(block, TextContent)
    assert "highlighted page" not in block.text

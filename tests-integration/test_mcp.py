"""The knowledge base over MCP (issue 16) on the real stack, through the SDK's client on both transports:
`rag mcp` (stdio, a subprocess calling the two HTTP APIs) and the retrieval agent's `/mcp` (streamable
HTTP). Both answer the same tools with the same data."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from integration_support import FIXTURES, Stack, ingest_multipart
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextResourceContents

CONTRACT_PDF = FIXTURES / "kreuzberg__sample_contract.pdf"
WIKI_MD = FIXTURES / "docling__wiki.md"
QUESTION = "What insurance coverage must the consultant obtain and maintain?"

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def kb(stack: Stack, unique: str) -> dict[str, str]:
    name = f"kb-mcp-{unique}"
    pdf, md = str(uuid.uuid4()), str(uuid.uuid4())
    ingest_multipart(stack.ingestion(), CONTRACT_PDF, pdf, name)
    ingest_multipart(stack.ingestion(), WIKI_MD, md, name)
    return {"name": name, "pdf": pdf, "md": md}


@asynccontextmanager
async def over_stdio(stack: Stack, *args: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rag_cli", "mcp", *args],
        env={
            "RAG_RETRIEVAL_URL": stack.retrieval_url,
            "RETRIEVAL_API_KEY": stack.retrieval_key,
            "RAG_INGESTION_URL": stack.ingestion_url,
            "INGESTION_API_KEY": stack.ingestion_key,
        },
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def over_http(stack: Stack) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {stack.retrieval_key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        streamable_http_client(f"{stack.retrieval_url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    data = result.structured_content
    assert isinstance(data, dict)
    return data


async def exercise(session: ClientSession, kb: dict[str, str]) -> dict[str, Any]:
    """Every tool once; what each answered."""
    name = kb["name"]
    return {
        "tools": {tool.name for tool in (await session.list_tools()).tools},
        "search": structured(await session.call_tool("search", {"query": QUESTION, "collection": name, "k": 3})),
        "filtered": structured(
            await session.call_tool(
                "search", {"query": QUESTION, "collection": name, "filters": {"file_ids": [kb["md"]]}}
            )
        ),
        "document": structured(await session.call_tool("read_document", {"file_id": kb["md"], "collection": name})),
        "documents": structured(await session.call_tool("list_documents", {"collection": name})),
        "collections": structured(await session.call_tool("list_collections", {})),
        "missing": await session.call_tool("read_document", {"file_id": kb["pdf"], "collection": f"{name}-other"}),
        "resource": await session.read_resource(f"kb://{name}/{kb['md']}"),
    }


def check(answers: dict[str, Any], kb: dict[str, str]) -> None:
    assert answers["tools"] == {"search", "read_document", "list_documents", "list_collections"}
    top = answers["search"]["passages"][0]
    assert top["file_id"] == kb["pdf"]
    assert top["name"] == CONTRACT_PDF.name
    assert top["collection"] == kb["name"]
    assert "insurance" in top["text"].lower()
    assert {passage["file_id"] for passage in answers["filtered"]["passages"]} == {kb["md"]}
    document = answers["document"]
    assert document["name"] == WIKI_MD.name
    assert "International Business Machines Corporation" in document["text"]
    assert "Big Blue" in document["text"]
    documents = answers["documents"]
    assert documents["total"] == 2
    assert sorted(doc["file_id"] for doc in documents["documents"]) == sorted([kb["pdf"], kb["md"]])
    listed = {item["name"]: item for item in answers["collections"]["collections"]}
    assert listed[kb["name"]]["documents"] == 2
    assert answers["missing"].is_error
    content = answers["resource"].contents[0]
    assert isinstance(content, TextResourceContents)
    assert content.text == document["text"]


async def test_rag_mcp_on_stdio_answers_every_tool(stack: Stack, kb: dict[str, str]) -> None:
    async with over_stdio(stack, "--collection", kb["name"]) as session:
        check(await exercise(session, kb), kb)


async def test_the_retrieval_agents_mcp_endpoint_answers_the_same(stack: Stack, kb: dict[str, str]) -> None:
    async with over_http(stack) as session:
        http = await exercise(session, kb)
    check(http, kb)
    async with over_stdio(stack, "--collection", kb["name"]) as session:
        stdio = await exercise(session, kb)
    # One server definition over two backends: the same ranking and the same document text.
    assert [p["file_id"] for p in http["search"]["passages"]] == [p["file_id"] for p in stdio["search"]["passages"]]
    assert http["document"]["text"] == stdio["document"]["text"]

"""Replies the CLI reads as the services' wire models: a 2xx body that is not one is a clear error."""

from __future__ import annotations

import io
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import httpx
import pytest
from rich.console import Console
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rag_cli.client import (
    RequestFailedError,
    SearchFailedError,
    collections_page,
    delete_document,
    document_text,
    search_reply,
)
from rag_cli.commands import run_search
from rag_cli.config import Endpoint

ENDPOINT = Endpoint("http://service", "k" * 40)


def answering(path: str, body: Any, *, method: str = "GET") -> httpx.ASGITransport:
    async def reply(_: Request) -> JSONResponse:
        return JSONResponse(body)

    return httpx.ASGITransport(app=Starlette(routes=[Route(path, reply, methods=[method])]))


def call(transport: httpx.AsyncBaseTransport, request: Callable[[httpx.AsyncClient], Coroutine[Any, Any, Any]]) -> Any:
    async def run() -> Any:
        async with httpx.AsyncClient(transport=transport) as client:
            return await request(client)

    return anyio.run(run)


def test_a_search_reply_without_distances_names_the_missing_field() -> None:
    transport = answering("/search", {"documents": [["text"]], "metadatas": [[{}]]}, method="POST")

    with pytest.raises(SearchFailedError) as raised:
        call(transport, lambda client: search_reply(client, ENDPOINT, "q", collections=["kb"], k=1))

    assert str(raised.value) == (
        "unexpected reply (distances: Field required): {'documents': [['text']], 'metadatas': [[{}]]}"
    )


def test_rag_search_reports_a_malformed_reply_and_exits_1() -> None:
    buffer = io.StringIO()
    transport = answering("/search", {"documents": [[1]], "metadatas": [[{}]], "distances": [["far"]]}, method="POST")

    code = run_search(
        ENDPOINT, "q", collections=["kb"], k=1, console=Console(file=buffer, width=300), transport=transport
    )

    assert code == 1
    assert "search failed: unexpected reply (documents.0.0: Input should be a valid string): " in buffer.getvalue()


def test_a_document_text_reply_that_is_not_one_is_a_request_failure() -> None:
    transport = answering("/api/v1/documents/f-1/text", {"file_id": "f-1", "text": "all of it"})

    with pytest.raises(RequestFailedError) as raised:
        call(transport, lambda client: document_text(client, ENDPOINT, "f-1", collection="kb"))

    assert str(raised.value) == (
        "unexpected reply (collection_name: Field required): {'file_id': 'f-1', 'text': 'all of it'}"
    )
    assert raised.value.status is None


def test_a_collections_reply_with_a_bad_row_names_it() -> None:
    body = {
        "collections": [{"name": "kb", "kind": "knowledge_base", "documents": "many", "chunks": 1}],
        "complete": True,
    }

    with pytest.raises(RequestFailedError, match=r"^unexpected reply \(collections\.0\.documents: Input should be"):
        call(
            answering("/api/v1/collections", body), lambda client: collections_page(client, ENDPOINT, include_all=True)
        )


def test_a_delete_reply_without_its_count_is_a_request_failure() -> None:
    transport = answering("/api/v1/documents/f-1", {"status": True, "file_id": "f-1"}, method="DELETE")

    with pytest.raises(RequestFailedError, match=r"^unexpected reply \(chunks_deleted: Field required\)"):
        call(transport, lambda client: delete_document(client, ENDPOINT, "f-1", collection="kb"))


def test_a_reply_that_is_not_json_is_quoted() -> None:
    transport = httpx.MockTransport(lambda _: httpx.Response(200, text="<html>proxy login</html>"))

    with pytest.raises(RequestFailedError, match=r"^unexpected reply: <html>proxy login</html>$"):
        call(transport, lambda client: document_text(client, ENDPOINT, "f-1", collection="kb"))


def test_well_formed_replies_are_read_as_the_services_models() -> None:
    text = {"file_id": "f-1", "collection_name": "kb", "name": "", "text": "all of it", "chunks": 2}
    document = call(
        answering("/api/v1/documents/f-1/text", text),
        lambda client: document_text(client, ENDPOINT, "f-1", collection="kb"),
    )
    deleted = call(
        answering("/api/v1/documents/f-1", {"status": True, "file_id": "f-1", "chunks_deleted": 3}, method="DELETE"),
        lambda client: delete_document(client, ENDPOINT, "f-1", collection="kb"),
    )

    assert document.model_dump() == text
    assert deleted == 3

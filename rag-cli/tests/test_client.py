"""Replies the CLI reads as the services' wire models: a 2xx body that is not one is a clear error; an
error body is the services' ErrorBody, anything else is quoted."""

from __future__ import annotations

import io
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from rich.console import Console
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ingestion_service.api.models import CollectionStatsResponse, ExtractionInfo, IngestResponse
from rag_cli.client import (
    RequestFailedError,
    SearchFailedError,
    collection_stats,
    collections_page,
    delete_document,
    document_text,
    documents_page,
    ingest_s3_object,
    list_documents,
    search_reply,
    upload_file,
)
from rag_cli.commands import run_ingest, run_search
from rag_cli.config import Endpoint

from .conftest import document_row, error_reply  # noqa: TID252

ENDPOINT = Endpoint("http://service", "k" * 40)


def answering(path: str, body: Any, *, method: str = "GET", status: int = 200) -> httpx.ASGITransport:
    async def reply(_: Request) -> JSONResponse:
        return JSONResponse(body, status_code=status)

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
    text = {
        "file_id": "f-1",
        "collection_name": "kb",
        "name": "",
        "path": "notes/f.md",
        "text": "all of it",
        "chunks": 2,
    }
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


INGESTED = IngestResponse(
    collection_name="kb", chunks_count=3, content_hash="ab" * 32, extraction=ExtractionInfo(engine="fake")
).model_dump(mode="json", exclude_none=True)


def test_an_ingest_reply_is_read_as_the_services_model(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("alpha")
    reply = call(
        answering("/api/v1/ingest", {**INGESTED, "unchanged": True}, method="PUT"),
        lambda client: upload_file(client, ENDPOINT, tmp_path / "a.md", file_id="f-1", collection="kb", user_id="u"),
    )

    assert (reply.ok, reply.chunks, reply.unchanged, reply.content_hash, reply.error) == (
        True,
        3,
        True,
        "ab" * 32,
        None,
    )


def test_an_ingest_reply_without_its_chunk_count_fails_the_file(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("alpha")
    body = {key: value for key, value in INGESTED.items() if key != "chunks_count"}
    buffer = io.StringIO()

    code = run_ingest(
        ENDPOINT,
        [tmp_path / "a.md"],
        collection="kb",
        user_id="u",
        concurrency=1,
        console=Console(file=buffer, width=300),
        transport=answering("/api/v1/ingest", body, method="PUT"),
    )

    assert code == 1
    assert "unexpected reply (chunks_count: Field required): " in buffer.getvalue()
    assert "0/1 files ok" in buffer.getvalue()


def test_an_s3_ingest_reply_with_a_bad_field_names_it() -> None:
    body = {**INGESTED, "extraction": {"engine": 7}}

    reply = call(
        answering("/api/v1/ingest", body, method="PUT"),
        lambda client: ingest_s3_object(
            client, ENDPOINT, bucket="b", key="k.md", file_id="f-1", filename="k.md", collection="kb", user_id="u"
        ),
    )

    assert not reply.ok
    assert reply.error is not None
    assert reply.error.startswith("unexpected reply (extraction.engine: Input should be a valid string): ")


def test_an_ingest_reply_with_status_false_is_a_failure(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("alpha")
    reply = call(
        answering("/api/v1/ingest", {**INGESTED, "status": False}, method="PUT"),
        lambda client: upload_file(client, ENDPOINT, tmp_path / "a.md", file_id="f-1", collection="kb", user_id="u"),
    )

    assert not reply.ok
    assert reply.error is not None
    assert reply.error.startswith("unexpected reply: {'status': False")


def test_the_documents_listing_is_read_page_by_page_as_the_services_model() -> None:
    pages = {
        "": {"documents": [document_row("f-1", name="a.md")], "total": 2, "next_offset": "1"},
        "1": {"documents": [document_row("f-2", attributes={"sync_path": "b.md"})], "total": 2, "next_offset": None},
    }

    async def listing(request: Request) -> JSONResponse:
        return JSONResponse(pages[request.query_params.get("offset", "")])

    transport = httpx.ASGITransport(app=Starlette(routes=[Route("/api/v1/documents", listing)]))
    documents = call(transport, lambda client: list_documents(client, ENDPOINT, collection="kb"))

    assert [(document.file_id, document.name, document.attributes) for document in documents] == [
        ("f-1", "a.md", {}),
        ("f-2", None, {"sync_path": "b.md"}),
    ]


def test_a_documents_listing_with_a_bad_row_names_it() -> None:
    body = {"documents": [{**document_row("f-1"), "attributes": None}], "total": 1, "next_offset": None}

    with pytest.raises(RequestFailedError, match=r"^unexpected reply \(documents\.0\.attributes: Input should be"):
        call(answering("/api/v1/documents", body), lambda client: list_documents(client, ENDPOINT, collection="kb"))


def test_a_documents_page_without_its_total_names_it() -> None:
    body = {"documents": [document_row("f-1")], "next_offset": None}

    with pytest.raises(RequestFailedError, match=r"^unexpected reply \(total: Field required\)"):
        call(
            answering("/api/v1/documents", body),
            lambda client: documents_page(client, ENDPOINT, collection="kb", limit=10, offset=0),
        )


def test_collection_stats_are_read_as_the_services_model() -> None:
    stats = CollectionStatsResponse(
        collection_name="kb",
        documents=2,
        chunks=5,
        text_bytes=10,
        languages={"en": 2},
        formats={"md": 2},
        extractors={"text": 2},
        last_ingest=None,
        outdated_documents=0,
    )
    transport = answering("/api/v1/collections/kb/stats", stats.model_dump(mode="json"))

    assert call(transport, lambda client: collection_stats(client, ENDPOINT, "kb")) == stats

    partial = answering("/api/v1/collections/kb/stats", {"collection_name": "kb", "documents": 0, "chunks": 0})
    with pytest.raises(RequestFailedError, match=r"^unexpected reply \(text_bytes: Field required\)"):
        call(partial, lambda client: collection_stats(client, ENDPOINT, "kb"))


def failure(transport: httpx.AsyncBaseTransport) -> RequestFailedError:
    with pytest.raises(RequestFailedError) as raised:
        call(transport, lambda client: document_text(client, ENDPOINT, "f-1", collection="kb"))
    return raised.value


def test_the_services_error_body_gives_status_code_and_message() -> None:
    async def refused(_: Request) -> JSONResponse:
        return error_reply(404, "DOCUMENT_NOT_FOUND", "No document 'f-1' in 'kb'.")

    transport = httpx.ASGITransport(app=Starlette(routes=[Route("/api/v1/documents/f-1/text", refused)]))
    error = failure(transport)

    assert str(error) == "HTTP 404 DOCUMENT_NOT_FOUND: No document 'f-1' in 'kb'."
    assert error.status == 404


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (httpx.Response(502, text="<html>Bad Gateway</html>"), "HTTP 502: <html>Bad Gateway</html>"),
        (httpx.Response(404, json={"detail": "Not Found"}), "HTTP 404: {'detail': 'Not Found'}"),
        # Without its hint and request id it is not the services' body.
        (
            httpx.Response(500, json={"code": "INTERNAL_ERROR", "error": "boom"}),
            "HTTP 500: {'code': 'INTERNAL_ERROR', 'error': 'boom'}",
        ),
        (httpx.Response(503, json=["down"]), "HTTP 503: ['down']"),
    ],
    ids=["proxy-page", "fastapi-detail", "partial-body", "not-an-object"],
)
def test_an_error_body_that_is_not_the_services_is_quoted(reply: httpx.Response, message: str) -> None:
    error = failure(httpx.MockTransport(lambda _: reply))

    assert str(error) == message
    assert error.status == reply.status_code


def test_a_search_error_is_the_services_code_and_message() -> None:
    async def refused(_: Request) -> JSONResponse:
        return error_reply(503, "QDRANT_UNAVAILABLE", "Qdrant is unreachable or failed.")

    transport = httpx.ASGITransport(app=Starlette(routes=[Route("/search", refused, methods=["POST"])]))
    with pytest.raises(SearchFailedError) as raised:
        call(transport, lambda client: search_reply(client, ENDPOINT, "q", collections=["kb"], k=1))

    assert str(raised.value) == "HTTP 503 QDRANT_UNAVAILABLE: Qdrant is unreachable or failed."

"""HTTP calls to the two services, as Open WebUI makes them.

Every reply is read as the services' own wire models (``retrieval_agent.api.models``,
``ingestion_service.api.models``), every error body as their ``shared_contract.error_body.ErrorBody``.
The CLI and the services ship together: a 2xx body that does not fit its model is an
:class:`UnexpectedReplyError` naming the field. An error body that is not an ``ErrorBody`` (a proxy's
page, another app's ``{"detail": ...}``, text) is quoted as it came.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from ingestion_service.api.models import (
    CollectionListResponse,
    CollectionStatsResponse,
    DeleteResponse,
    DocumentListResponse,
    DocumentTextResponse,
    DocumentView,
    IngestResponse,
)
from rag_cli.config import Endpoint
from retrieval_agent.api.models import SearchResponse
from shared_contract.error_body import ErrorBody

_Reply = TypeVar("_Reply", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    """One file's (or web page's) result."""

    path: Path | str
    ok: bool
    chunks: int | None = None
    error: str | None = None
    # Found in a folder and answered as no document (NOT_A_DOCUMENT): not a failure.
    skipped: bool = False


def file_id_for(path: Path) -> str:
    """A stable id per absolute path, so ingesting the same file again overwrites it."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, path.resolve().as_uri()))


def file_id_for_url(url: str) -> str:
    """A stable id per URL, so ingesting the same page again overwrites it (or is ``unchanged``)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, url))


def error_body(response: httpx.Response) -> ErrorBody | str:
    """A 4xx/5xx reply's ``ErrorBody``, else the start of what came instead (text, or JSON as Python
    writes it) for a message to quote."""
    try:
        body: Any = response.json()
    except ValueError:
        return response.text[:200]
    try:
        return ErrorBody.model_validate(body)
    except ValidationError:
        return str(body)[:200]


def _error_text(response: httpx.Response) -> str:
    """``HTTP 422 CODE: message`` from the services' error body; ``HTTP 502: <body start>`` otherwise."""
    body = error_body(response)
    if isinstance(body, str):
        return f"HTTP {response.status_code}: {body}"
    return f"HTTP {response.status_code} {body.code}: {body.error}".strip()


@dataclass(frozen=True, slots=True)
class IngestReply:
    """What ``PUT /api/v1/ingest`` answered, whichever mode sent the file."""

    ok: bool
    chunks: int | None = None
    # The service already held these bytes under the same settings and re-embedded nothing.
    unchanged: bool = False
    content_hash: str | None = None
    error: str | None = None
    # The error body's code (UNSUPPORTED_CONTENT, EXTRACTION_FAILED, ...), when the service sent one.
    code: str | None = None

    @property
    def not_a_document(self) -> bool:
        """The service read the bytes as no document type it extracts (a thumbnail cache, a binary)."""
        return self.code == NOT_A_DOCUMENT


# What the ingestion service answers for bytes that are no document: a folder's junk, skipped.
NOT_A_DOCUMENT = "UNSUPPORTED_CONTENT"


def _ingest_reply(response: httpx.Response) -> IngestReply:
    if response.status_code >= 400:
        failure = error_body(response)
        code = None if isinstance(failure, str) else failure.code
        return IngestReply(ok=False, error=_error_text(response), code=code)
    try:
        body = json_object(response)
        reply = validated(body, IngestResponse)
    except UnexpectedReplyError as exc:
        return IngestReply(ok=False, error=str(exc))
    if not reply.status:
        # Open WebUI checks only `status`: false is a failed ingest whatever else came.
        return IngestReply(ok=False, error=f"unexpected reply: {str(body)[:200]}")
    return IngestReply(ok=True, chunks=reply.chunks_count, unchanged=reply.unchanged, content_hash=reply.content_hash)


def _optional_fields(force: bool | None, attributes: dict[str, Any] | None, path: str | None) -> dict[str, str]:
    # Only what the caller set: Open WebUI's fields, plus these.
    fields: dict[str, str] = {}
    if force is not None:
        fields["force"] = "true" if force else "false"
    if attributes is not None:
        fields["attributes"] = json.dumps(attributes, ensure_ascii=False)
    if path is not None:
        fields["path"] = path
    return fields


async def upload_file(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    path: Path,
    *,
    file_id: str,
    collection: str,
    user_id: str,
    force: bool | None = None,
    attributes: dict[str, Any] | None = None,
    relative_path: str | None = None,
) -> IngestReply:
    """Multipart ``PUT /api/v1/ingest`` of one file under ``file_id`` (``relative_path``: its ``path``
    relative to the folder it was found in)."""
    fields = {
        "file_id": file_id,
        "filename": path.name,
        "collection_name": collection,
        "collection_type": "file",
        "user_id": user_id,
        "overwrite": "true",
        **_optional_fields(force, attributes, relative_path),
    }
    try:
        with path.open("rb") as handle:
            response = await client.put(
                f"{endpoint.url}/api/v1/ingest",
                data=fields,
                files={"file": (path.name, handle, "application/octet-stream")},
                headers=endpoint.headers,
            )
    except httpx.HTTPError as exc:
        return IngestReply(ok=False, error=f"{type(exc).__name__}: {exc}")
    except OSError as exc:
        return IngestReply(ok=False, error=f"cannot read file: {exc}")
    return _ingest_reply(response)


async def ingest_s3_object(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    *,
    bucket: str,
    key: str,
    file_id: str,
    filename: str,
    collection: str,
    user_id: str,
    force: bool = False,
    attributes: dict[str, Any] | None = None,
    relative_path: str | None = None,
) -> IngestReply:
    """JSON ``PUT /api/v1/ingest``: the service reads ``s3://bucket/key`` from its own S3 endpoint."""
    body: dict[str, Any] = {
        "s3_bucket": bucket,
        "s3_key": key,
        "file_id": file_id,
        "filename": filename,
        "collection_name": collection,
        "collection_type": "file",
        "user_id": user_id,
        "overwrite": True,
        "force": force,
    }
    if attributes is not None:
        body["attributes"] = attributes
    if relative_path is not None:
        body["path"] = relative_path
    try:
        response = await client.put(f"{endpoint.url}/api/v1/ingest", json=body, headers=endpoint.headers)
    except httpx.HTTPError as exc:
        return IngestReply(ok=False, error=f"{type(exc).__name__}: {exc}")
    return _ingest_reply(response)


async def ingest_url(
    client: httpx.AsyncClient, endpoint: Endpoint, url: str, *, collection: str, user_id: str
) -> IngestOutcome:
    """JSON ``PUT /api/v1/ingest`` with ``url``: the service fetches the page or document itself,
    under :func:`file_id_for_url`; its name in listings and citations is the URL."""
    body = {
        "url": url,
        "file_id": file_id_for_url(url),
        "collection_name": collection,
        "collection_type": "file",
        "user_id": user_id,
        "overwrite": True,
    }
    try:
        response = await client.put(f"{endpoint.url}/api/v1/ingest", json=body, headers=endpoint.headers)
    except httpx.HTTPError as exc:
        return IngestOutcome(url, ok=False, error=f"{type(exc).__name__}: {exc}")
    reply = _ingest_reply(response)
    return IngestOutcome(url, ok=reply.ok, chunks=reply.chunks, error=reply.error)


async def ingest_file(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    path: Path,
    *,
    collection: str,
    user_id: str,
    relative_path: str | None = None,
    skip_junk: bool = False,
) -> IngestOutcome:
    """Multipart ``PUT /api/v1/ingest`` of one file, under its path's :func:`file_id_for`
    (``skip_junk``: bytes that are no document are skipped, not failed)."""
    reply = await upload_file(
        client,
        endpoint,
        path,
        file_id=file_id_for(path),
        collection=collection,
        user_id=user_id,
        relative_path=relative_path,
    )
    skipped = skip_junk and reply.not_a_document
    return IngestOutcome(path, ok=reply.ok, chunks=reply.chunks, error=reply.error, skipped=skipped)


class RequestFailedError(Exception):
    """A documents call failed; the message is the service's error (``HTTP 422 CODE: message``)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


DOCUMENTS_PAGE = 1000


async def list_documents(client: httpx.AsyncClient, endpoint: Endpoint, *, collection: str) -> list[DocumentView]:
    """Every document of ``collection``: ``GET /api/v1/documents``, page by page until ``next_offset`` is null."""
    documents: list[DocumentView] = []
    offset: str | None = None
    while True:
        params = {"collection_name": collection, "limit": str(DOCUMENTS_PAGE)}
        if offset is not None:
            params["offset"] = offset
        page = _parsed(await _get(client, endpoint, "/api/v1/documents", params), DocumentListResponse)
        documents.extend(page.documents)
        if page.next_offset is None or page.next_offset == offset:
            return documents
        offset = page.next_offset


class UnexpectedReplyError(ValueError):
    """A 2xx body that is not the JSON object the API documents; the message quotes its start."""


def json_object(response: httpx.Response) -> dict[str, Any]:
    """The response's JSON object, else :class:`UnexpectedReplyError` (a proxy's HTML page, a list)."""
    try:
        body: Any = response.json()
    except ValueError as exc:
        raise UnexpectedReplyError(f"unexpected reply: {response.text[:200]}") from exc
    if not isinstance(body, dict):
        raise UnexpectedReplyError(f"unexpected reply: {str(body)[:200]}")
    return body


def validated(body: dict[str, Any], model: type[_Reply]) -> _Reply:
    """``body`` as the service's wire ``model``, else :class:`UnexpectedReplyError` naming the first
    field that does not fit and quoting the body's start."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        problem = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in problem["loc"]) or "body"
        raise UnexpectedReplyError(f"unexpected reply ({where}: {problem['msg']}): {str(body)[:200]}") from None


def _parsed(response: httpx.Response, model: type[_Reply]) -> _Reply:
    """The documents API's reply as ``model``; a reply that is not one is a :class:`RequestFailedError`."""
    try:
        return validated(json_object(response), model)
    except UnexpectedReplyError as exc:
        raise RequestFailedError(str(exc)) from exc


async def _get(client: httpx.AsyncClient, endpoint: Endpoint, path: str, params: dict[str, str]) -> httpx.Response:
    response = await client.get(f"{endpoint.url}{path}", params=params, headers=endpoint.headers)
    if response.status_code >= 400:
        raise RequestFailedError(_error_text(response), response.status_code)
    return response


async def documents_page(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    *,
    collection: str,
    limit: int,
    offset: int,
    sort: str = "name",
    path: str | None = None,
) -> DocumentListResponse:
    """One page of ``GET /api/v1/documents`` (``path``: only the documents at this relative path)."""
    params = {"collection_name": collection, "limit": str(limit), "offset": str(offset), "sort": sort}
    if path is not None:
        params["path"] = path
    return _parsed(await _get(client, endpoint, "/api/v1/documents", params), DocumentListResponse)


async def document_text(
    client: httpx.AsyncClient, endpoint: Endpoint, file_id: str, *, collection: str
) -> DocumentTextResponse:
    """``GET /api/v1/documents/{file_id}/text`` in ``collection`` (RequestFailedError status 404 when absent)."""
    path = f"/api/v1/documents/{quote(file_id, safe='')}/text"
    response = await _get(client, endpoint, path, {"collection_name": collection})
    return _parsed(response, DocumentTextResponse)


async def collections_page(
    client: httpx.AsyncClient, endpoint: Endpoint, *, include_all: bool, limit: int | None = None
) -> CollectionListResponse:
    """``GET /api/v1/collections``: the tenants with their documents and chunks (``limit``: the service's default)."""
    params = {"include_all": str(include_all).lower()}
    if limit is not None:
        params["limit"] = str(limit)
    response = await _get(client, endpoint, "/api/v1/collections", params)
    return _parsed(response, CollectionListResponse)


async def collection_stats(client: httpx.AsyncClient, endpoint: Endpoint, collection: str) -> CollectionStatsResponse:
    """``GET /api/v1/collections/{name}/stats`` (zeros for a collection that holds nothing)."""
    response = await _get(client, endpoint, f"/api/v1/collections/{quote(collection, safe='')}/stats", {})
    return _parsed(response, CollectionStatsResponse)


async def delete_document(client: httpx.AsyncClient, endpoint: Endpoint, file_id: str, *, collection: str) -> int:
    """``DELETE /api/v1/documents/{file_id}`` in ``collection`` only (idempotent); the chunks it removed."""
    response = await client.delete(
        f"{endpoint.url}/api/v1/documents/{quote(file_id, safe='')}",
        params={"collection_name": collection},
        headers=endpoint.headers,
    )
    if response.status_code >= 400:
        raise RequestFailedError(_error_text(response), response.status_code)
    return _parsed(response, DeleteResponse).chunks_deleted


class SearchFailedError(Exception):
    """The retrieval service answered with an error."""


async def search(
    client: httpx.AsyncClient, endpoint: Endpoint, query: str, *, collections: list[str], k: int
) -> dict[str, Any]:
    """``POST /search`` with one query; the raw response body."""
    return (await search_reply(client, endpoint, query, collections=collections, k=k)).body


@dataclass(frozen=True, slots=True)
class SearchReply:
    """The body (as sent, for ``--json``, and as the service's model) and, in agentic mode, how the
    agent's run went (response headers)."""

    body: dict[str, Any]
    results: SearchResponse
    # X-RAG-Agent-Outcome; None when the service ran the linear pipeline.
    agent_outcome: str | None = None
    agent_fallback: str | None = None
    agent_steps: list[dict[str, Any]] | None = None


def _steps(header: str | None) -> list[dict[str, Any]] | None:
    if header is None:
        return None
    try:
        decoded: Any = json.loads(header)
    except ValueError:
        return None
    return [step for step in decoded if isinstance(step, dict)] if isinstance(decoded, list) else None


async def search_reply(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    query: str,
    *,
    collections: list[str],
    k: int,
    agent_steps: bool = False,
    document_filter: dict[str, Any] | None = None,
) -> SearchReply:
    """``POST /search`` with one query; ``agent_steps`` asks an agentic service for its steps
    (``X-RAG-Debug: steps``, a header Open WebUI never sends; the body keeps its shape).
    ``document_filter`` is the request's ``filter`` (sent only when given)."""
    headers = dict(endpoint.headers)
    if agent_steps:
        headers["X-RAG-Debug"] = "steps"
    request: dict[str, Any] = {"queries": [query], "collection_names": collections, "k": k}
    if document_filter is not None:
        request["filter"] = document_filter
    response = await client.post(f"{endpoint.url}/search", json=request, headers=headers)
    if response.status_code >= 400:
        raise SearchFailedError(_error_text(response))
    try:
        body = json_object(response)
        results = validated(body, SearchResponse)
    except UnexpectedReplyError as exc:
        raise SearchFailedError(str(exc)) from exc
    return SearchReply(
        body=body,
        results=results,
        agent_outcome=response.headers.get("X-RAG-Agent-Outcome"),
        agent_fallback=response.headers.get("X-RAG-Agent-Fallback"),
        agent_steps=_steps(response.headers.get("X-RAG-Agent-Steps")),
    )

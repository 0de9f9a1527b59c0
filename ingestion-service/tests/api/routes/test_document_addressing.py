"""Which documents the documents routes reach: ids with '/', the reserved ``memory-*`` tenants, ids
with surrounding whitespace, and the media type of the JSON bodies (PATCH, reindex)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ingestion_service.adapters import chunk_index
from ingestion_service.error_table import RESERVED_HINT
from rag_runtime.http import hint_for
from rag_runtime.store import ChunkPoint

if TYPE_CHECKING:
    from ...conftest import AppFactory, Points, Upload  # noqa: TID252

DOCUMENTS = "/api/v1/documents"
TABLE = "md/unstructured__simple-table.md"
WIKI = "md/docling__wiki.md"
MEMORY = "memory-carol"
RESERVED = "collection_name 'memory-…' is reserved for long-term memory (the retrieval agent's /api/v1/memory)."


def url(file_id: str, suffix: str = "") -> str:
    """The document's URL as rag-cli builds it (``quote(file_id, safe='')``: '/' travels as %2F)."""
    return f"{DOCUMENTS}/{quote(file_id, safe='')}{suffix}"


def ingested(client: TestClient, upload: Upload, path: Path, file_id: str, collection_name: str) -> int:
    response = upload(client, path, file_id=file_id, collection_name=collection_name)
    assert response.status_code == 200, response.text
    chunks: int = response.json()["chunks_count"]
    return chunks


def assert_error(response: Any, status: int, code: str, hint: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert (body["status"], body["code"]) == (False, code), body
    if hint is not None:
        assert body["hint"] == hint
    return body


# --- ids with '/' --------------------------------------------------------------------------------


def test_a_file_id_with_slashes_is_read_patched_and_deleted_through_its_quoted_url(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    file_id = "docs/2024/report"
    chunks = ingested(client, upload, docs / TABLE, file_id, "kb-slash")
    scope = {"collection_name": "kb-slash"}

    text = client.get(url(file_id, "/text"), params=scope)
    assert text.status_code == 200, text.text
    assert (text.json()["file_id"], text.json()["chunks"]) == (file_id, chunks)

    patched = client.patch(url(file_id), params=scope, json={"tags": ["annual"]})
    assert patched.status_code == 200, patched.text
    assert (patched.json()["file_id"], patched.json()["tags"]) == (file_id, ["annual"])
    assert {tuple(record.payload["meta"]["tags"]) for record in points(client, file_id=file_id)} == {("annual",)}

    deleted = client.delete(url(file_id), params=scope)
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {
        "status": True,
        "file_id": file_id,
        "collection_name": "kb-slash",
        "chunks_deleted": chunks,
    }
    assert points(client, file_id=file_id) == []


def test_a_file_id_ending_in_text_is_its_own_document(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    # The GET routes end in a fixed segment, so ``a/text`` + ``/text`` is the text of file ``a/text``;
    # PATCH and DELETE have no suffix and take the whole path.
    ingested(client, upload, docs / TABLE, "a", "kb-t")
    ingested(client, upload, docs / WIKI, "a/text", "kb-t")
    scope = {"collection_name": "kb-t"}

    own = client.get(url("a/text", "/text"), params=scope)
    assert (own.status_code, own.json()["file_id"], own.json()["name"]) == (200, "a/text", Path(WIKI).name)
    # Unquoted too: the route keeps its suffix, whatever the id holds.
    assert client.get(f"{DOCUMENTS}/a/text/text", params=scope).json()["file_id"] == "a/text"
    plain = client.get(url("a", "/text"), params=scope)
    assert (plain.status_code, plain.json()["file_id"], plain.json()["name"]) == (200, "a", Path(TABLE).name)

    assert client.patch(url("a/text"), params=scope, json={"category": "wiki"}).json()["category"] == "wiki"
    assert client.get(f"{DOCUMENTS}", params=scope).json()["total"] == 2
    assert {record.payload["meta"].get("category") for record in points(client, file_id="a")} == {None}

    assert client.delete(url("a/text"), params=scope).json()["chunks_deleted"] >= 1
    assert points(client, file_id="a/text") == []
    assert points(client, file_id="a")


def test_an_empty_file_id_is_422(client: TestClient) -> None:
    assert_error(client.get(f"{DOCUMENTS}//text", params={"collection_name": "kb-t"}), 422, "INVALID_REQUEST")


# --- the reserved memory-* tenants ---------------------------------------------------------------


def copy_into_memory(client: TestClient, points: Points, file_id: str, copies: int = 1) -> int:
    """Store the file's points again as tenant ``memory-carol`` (as the retrieval agent's memory would)."""
    assert isinstance(client.app, FastAPI)
    assert client.portal is not None
    copied = []
    for _ in range(copies):
        for record in points(client, file_id=file_id):
            meta = {**record.payload["meta"], "collection_name": MEMORY, "live_in": MEMORY}
            dense = record.vectors["text-dense"] if record.vectors else []
            assert isinstance(dense, list)
            payload = {**record.payload, "meta": meta}
            copied.append(ChunkPoint(point_id=str(uuid.uuid4()), dense=dense, sparse=None, payload=payload))
    client.portal.call(client.app.state.runtime.store.upsert, copied)
    return len(copied)


def test_the_documents_api_refuses_a_memory_tenant_as_ingest_does(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points
) -> None:
    with app_client(enable_inspection_api=True) as client:
        ingested(client, upload, docs / TABLE, "fact-1", "kb-a")
        stored = copy_into_memory(client, points, "fact-1")
        scope = {"collection_name": MEMORY}
        ingest = upload(client, docs / TABLE, file_id="fact-1", collection_name=MEMORY)
        assert ingest.status_code == 403
        expected = {"error": RESERVED, "code": "INVALID_REQUEST", "hint": RESERVED_HINT}
        assert {key: ingest.json()[key] for key in expected} == expected

        for response in (
            client.delete(url("fact-1"), params=scope),
            client.patch(url("fact-1"), params=scope, json={"tags": ["hijacked"]}),
            client.get(url("fact-1", "/text"), params=scope),
            client.get(url("fact-1", "/chunks"), params=scope),
            client.get(DOCUMENTS, params=scope),
            client.post(f"/api/v1/collections/{MEMORY}/reindex", json={}),
        ):
            body = assert_error(response, 403, "INVALID_REQUEST")
            assert {key: body[key] for key in expected} == expected

        memory = points(client, file_id="fact-1", collection_name=MEMORY)
        assert len(memory) == stored
        assert {tuple(record.payload["meta"].get("tags") or ()) for record in memory} == {()}
        assert 'delete_requests_total{code="INVALID_REQUEST",outcome="failure"} 1.0' in client.get("/metrics").text


@pytest.mark.parametrize("tenants_page", [1000, 1], ids=["one-facet", "facet-pages-of-one"])
def test_a_delete_without_collection_leaves_memory_tenants_alone(
    client: TestClient,
    upload: Upload,
    docs: Path,
    points: Points,
    monkeypatch: pytest.MonkeyPatch,
    tenants_page: int,
) -> None:
    monkeypatch.setattr(chunk_index, "_FILE_TENANTS_PAGE", tenants_page)
    in_kbs = ingested(client, upload, docs / TABLE, "fact-2", "kb-a")
    in_kbs += ingested(client, upload, docs / TABLE, "fact-2", "user-memory-user-1")
    # Twice as many points as either other tenant: the memory tenant heads every facet.
    stored = copy_into_memory(client, points, "fact-2", copies=2)

    response = client.delete(url("fact-2"))
    assert response.status_code == 200, response.text
    assert response.json() == {"status": True, "file_id": "fact-2", "chunks_deleted": in_kbs}
    remaining = points(client, file_id="fact-2")
    assert len(remaining) == stored
    assert {record.payload["meta"]["collection_name"] for record in remaining} == {MEMORY}
    assert client.delete(url("fact-2")).json()["chunks_deleted"] == 0


# --- file_id is refused, never trimmed -----------------------------------------------------------


def test_a_file_id_with_surrounding_whitespace_is_refused_not_trimmed(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    multipart = upload(client, docs / TABLE, file_id=" ws1 ", collection_name="kb-ws")
    json_mode = client.put(
        "/api/v1/ingest",
        json={
            "s3_bucket": "openwebui",
            "s3_key": "ws1.md",
            "file_id": "ws1\t",
            "filename": "ws1.md",
            "collection_name": "kb-ws",
            "user_id": "u1",
        },
    )
    for response in (multipart, json_mode):
        body = assert_error(response, 422, "INVALID_REQUEST", hint_for("INVALID_REQUEST"))
        assert body["error"] == "Invalid request: file_id: Value error, must not start or end with whitespace"
    assert points(client, file_id="ws1") == []
    # Other fields keep their trimming.
    trimmed = upload(client, docs / TABLE, file_id="ws1", collection_name="kb-ws", user_id=" u1 ")
    assert trimmed.status_code == 200, trimmed.text
    assert {record.payload["meta"]["user_id"] for record in points(client, file_id="ws1")} == {"u1"}


@pytest.mark.parametrize("file_id", ["nl\nid", "tab\tinside", "bell\x07"])
def test_a_file_id_with_a_control_character_is_refused_since_no_route_could_address_it(
    client: TestClient, upload: Upload, docs: Path, points: Points, file_id: str
) -> None:
    response = upload(client, docs / TABLE, file_id=file_id, collection_name="kb-cc")
    body = assert_error(response, 422, "INVALID_REQUEST", hint_for("INVALID_REQUEST"))
    assert (
        body["error"] == "Invalid request: file_id: Value error, must not contain control characters (a newline, a tab)"
    )
    assert points(client, file_id=file_id) == []


# --- JSON bodies must say application/json (415) -------------------------------------------------

NOT_JSON = "Invalid request: Content-Type: the body must be sent as application/json."


@pytest.mark.parametrize(
    "headers",
    [{"Content-Type": "text/plain"}, {"Content-Type": "application/x-www-form-urlencoded"}, {}],
    ids=["text-plain", "form", "none"],
)
def test_patch_with_a_body_that_is_not_json_is_415(
    client: TestClient, upload: Upload, docs: Path, points: Points, headers: dict[str, str]
) -> None:
    ingested(client, upload, docs / TABLE, "ct-1", "kb-ct")
    response = client.patch(
        url("ct-1"), params={"collection_name": "kb-ct"}, content=b'{"tags": ["x"]}', headers=headers
    )
    body = assert_error(response, 415, "INVALID_REQUEST")
    assert body["error"] == NOT_JSON
    assert {tuple(record.payload["meta"].get("tags") or ()) for record in points(client, file_id="ct-1")} == {()}
    charset = {"Content-Type": "application/json; charset=utf-8"}
    accepted = client.patch(
        url("ct-1"), params={"collection_name": "kb-ct"}, content=b'{"tags": ["x"]}', headers=charset
    )
    assert accepted.status_code == 200, accepted.text


def test_reindex_with_a_body_that_is_not_json_is_415_and_without_a_body_needs_no_header(
    app_client: AppFactory, tmp_path: Path
) -> None:
    with app_client(ingest_state_dir=tmp_path) as client:
        path = "/api/v1/collections/kb-empty/reindex"
        for headers in ({"Content-Type": "text/plain"}, {}):
            response = client.post(path, content=b'{"force": true}', headers=headers)
            assert assert_error(response, 415, "INVALID_REQUEST")["error"] == NOT_JSON
        started = client.post(path)
        assert started.status_code == 202, started.text
        job_url = started.headers["location"]
        deadline = time.monotonic() + 60
        while client.get(job_url).json()["state"] not in {"succeeded", "failed", "cancelled"}:
            assert time.monotonic() < deadline, "the job never finished"
            time.sleep(0.05)

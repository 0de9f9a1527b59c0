"""Every request shape Open WebUI sends to the ingestion service, built as its clients build them.

The AarhusAI fork (``retrieval/external_service.py``), with ``requests``:

- S3 storage: ``requests.put(f"{url.rstrip('/')}/api/v1/ingest", json=payload,
  headers={Authorization, "Content-Type": "application/json"})`` with ``s3_bucket``, ``s3_key`` (the
  object key of ``file.path = s3://<bucket>/<key>``: ``[S3_KEY_PREFIX/]<file_id>_<name>``),
  ``file_id``, ``filename``, ``collection_name`` (``file-<id>`` or a knowledge base's uuid),
  ``collection_type: "file"``, ``user_id`` and ``overwrite: true``.
- local storage: ``requests.put(endpoint, files={"file": (filename, fh)}, data={...})``: the same
  fields as strings (``overwrite: "true"``), no ``s3_*``, the form fields before the file part.
- file deletion: ``requests.delete(f"{url}/api/v1/documents/{file_id}")``, no body, no collection.

Stock Open WebUI's external document loader (``retrieval/loaders/external_document.py``):
``requests.put(f"{url}/process", data=<file bytes>, headers=...)`` with ``Content-Type: <the
upload's MIME type>`` (none when unknown), ``X-Filename: quote(basename(file_path))`` (the stored
file ``<file_id>_<name>``; older versions sent it unquoted, and an ``X-Extract-Images`` header),
the Bearer key and, with ENABLE_FORWARD_USER_INFO_HEADERS, ``X-OpenWebUI-User-*``.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import boto3
import pytest
from fastapi.testclient import TestClient
from starlette.types import Message, Scope
from urllib3 import encode_multipart_formdata
from urllib3.fields import RequestField

from ...conftest import AUTH  # noqa: TID252

if TYPE_CHECKING:
    import httpx2

    from ...conftest import AppFactory, Points  # noqa: TID252

MD = "md/docling__wiki.md"
PDF_2P = "pdf/unstructured__multi-column-2p.pdf"
USER_ID = "0f8fad5b-d9cb-469f-a165-70867728950e"
KB_ID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
# A name as people give them: spaces, Danish letters, an en dash, brackets.
NAME = "Årsrapport 2024 – endelig (æøå).md"


def new_file_id() -> str:
    return str(uuid.uuid4())


def fork_json(client: TestClient, fields: dict[str, Any]) -> httpx2.Response:
    """``requests.put(endpoint, json=payload, headers={..., "Content-Type": "application/json"})``."""
    body = json.dumps(fields, allow_nan=False).encode("utf-8")  # requests' json= encoding
    return client.put("/api/v1/ingest", content=body, headers={"Content-Type": "application/json"})


def s3_payload(bucket: str, key: str, file_id: str, *, collection_name: str | None = None) -> dict[str, Any]:
    """The fork's JSON body, every field it sends."""
    return {
        "s3_bucket": bucket,
        "s3_key": key,
        "file_id": file_id,
        "filename": NAME,
        "collection_name": collection_name or f"file-{file_id}",
        "collection_type": "file",
        "user_id": USER_ID,
        "overwrite": True,
    }


def fork_multipart(
    client: TestClient, path: Path, file_id: str, *, filename: str = NAME, collection_name: str | None = None
) -> httpx2.Response:
    """``requests.put(endpoint, files={"file": (filename, fh)}, data={...})``, encoded as requests
    encodes it (urllib3's encoder; data fields first, a file part with no Content-Type)."""
    data = {
        "file_id": file_id,
        "filename": filename,
        "collection_name": collection_name or f"file-{file_id}",
        "collection_type": "file",
        "user_id": USER_ID,
        "overwrite": "true",
    }
    fields: list[Any] = [(name, value.encode("utf-8")) for name, value in data.items()]
    part = RequestField(name="file", data=path.read_bytes(), filename=filename)
    part.make_multipart(content_type=None)
    fields.append(part)
    body, content_type = encode_multipart_formdata(fields)
    return client.put("/api/v1/ingest", content=body, headers={"Content-Type": content_type})


def stored_metas(points: Points, client: TestClient, file_id: str, collection_name: str) -> list[dict[str, Any]]:
    return [record.payload["meta"] for record in points(client, file_id=file_id, collection_name=collection_name)]


@pytest.fixture
def bucket(s3_endpoint: str) -> str:
    name = f"openwebui-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client(
        "s3", endpoint_url=s3_endpoint, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    )
    s3.create_bucket(Bucket=name)
    return name


def put_object(endpoint: str, bucket: str, key: str, path: Path) -> None:
    s3 = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    )
    s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())


# --- the fork, S3 storage: JSON ----------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["", "uploads/"], ids=["no-key-prefix", "S3_KEY_PREFIX"])
@pytest.mark.parametrize("collection", ["file", "knowledge-base"])
def test_json_ingest_as_the_fork_sends_it(
    app_client: AppFactory, s3_endpoint: str, bucket: str, docs: Path, points: Points, prefix: str, collection: str
) -> None:
    file_id = new_file_id()
    key = f"{prefix}{file_id}_{NAME}"
    put_object(s3_endpoint, bucket, key, docs / MD)
    collection_name = f"file-{file_id}" if collection == "file" else KB_ID
    body = s3_payload(bucket, key, file_id, collection_name=collection_name)
    assert "\\u00c5rsrapport" in json.dumps(body)  # non-ASCII goes escaped, as requests sends it
    with app_client(s3_endpoint_url=s3_endpoint, s3_allowed_buckets=bucket) as client:
        response = fork_json(client, body)
        assert response.status_code == 200, response.text
        reply = response.json()
        # Open WebUI reads only a truthy `status` after raise_for_status().
        assert reply["status"] is True
        assert reply["collection_name"] == collection_name
        records = points(client, file_id=file_id, collection_name=collection_name)
    metas = [record.payload["meta"] for record in records]
    assert len(metas) == reply["chunks_count"] > 1
    assert {(m["name"], m["source"], m["file_id"], m["user_id"], m["collection_type"]) for m in metas} == {
        (NAME, NAME, file_id, USER_ID, "file")
    }
    # The object's text was read (the key with spaces and non-ASCII letters was fetched).
    assert "International Business Machines" in " ".join(record.payload["content"] for record in records)


def test_json_ingest_without_the_optional_fields(
    app_client: AppFactory, s3_endpoint: str, bucket: str, docs: Path, points: Points
) -> None:
    # collection_type and overwrite have defaults ("file", true), as in the reference schema.
    file_id = new_file_id()
    key = f"{file_id}_{NAME}"
    put_object(s3_endpoint, bucket, key, docs / MD)
    body = s3_payload(bucket, key, file_id)
    del body["collection_type"], body["overwrite"]
    with app_client(s3_endpoint_url=s3_endpoint) as client:
        response = fork_json(client, body)
        assert response.status_code == 200, response.text
        metas = stored_metas(points, client, file_id, f"file-{file_id}")
    assert {m["collection_type"] for m in metas} == {"file"}
    assert response.json()["extraction"]["kept_existing"] is False


def test_json_ingest_to_a_users_memory_collection(
    app_client: AppFactory, s3_endpoint: str, bucket: str, docs: Path
) -> None:
    file_id = new_file_id()
    key = f"{file_id}_{NAME}"
    put_object(s3_endpoint, bucket, key, docs / MD)
    body = s3_payload(bucket, key, file_id, collection_name=f"user-memory-{USER_ID}")
    with app_client(s3_endpoint_url=s3_endpoint) as client:
        response = fork_json(client, body)
    assert response.status_code == 200, response.text
    assert response.json()["collection_name"] == f"user-memory-{USER_ID}"


def test_json_ingest_with_a_charset_parameter(
    app_client: AppFactory, s3_endpoint: str, bucket: str, docs: Path
) -> None:
    file_id = new_file_id()
    key = f"{file_id}_{NAME}"
    put_object(s3_endpoint, bucket, key, docs / MD)
    body = json.dumps(s3_payload(bucket, key, file_id), ensure_ascii=False).encode("utf-8")
    with app_client(s3_endpoint_url=s3_endpoint) as client:
        response = client.put(
            "/api/v1/ingest", content=body, headers={"Content-Type": "application/json; charset=utf-8"}
        )
    assert response.status_code == 200, response.text


# --- the fork, local storage: multipart -----------------------------------------------------------------


@pytest.mark.parametrize("collection", ["file", "knowledge-base"])
def test_multipart_ingest_as_the_fork_sends_it(client: TestClient, docs: Path, points: Points, collection: str) -> None:
    file_id = new_file_id()
    collection_name = f"file-{file_id}" if collection == "file" else KB_ID
    response = fork_multipart(client, docs / MD, file_id, collection_name=collection_name)
    assert response.status_code == 200, response.text
    assert response.json()["status"] is True
    metas = stored_metas(points, client, file_id, collection_name)
    assert len(metas) == response.json()["chunks_count"] > 1
    assert {(m["name"], m["file_id"], m["user_id"]) for m in metas} == {(NAME, file_id, USER_ID)}


def test_multipart_pdf_keeps_its_pages(client: TestClient, docs: Path, points: Points) -> None:
    file_id = new_file_id()
    response = fork_multipart(client, docs / PDF_2P, file_id, filename="Mødereferat 2024.pdf")
    assert response.status_code == 200, response.text
    pages = [m["page"] for m in stored_metas(points, client, file_id, f"file-{file_id}")]
    assert set(pages) == {0, 1}
    assert all(type(page) is int for page in pages)


# --- the fork: file deletion -------------------------------------------------------------------------------


def test_delete_as_the_fork_sends_it_removes_every_collection(client: TestClient, docs: Path, points: Points) -> None:
    # The same file in its own collection and in a knowledge base (process_file per membership).
    file_id = new_file_id()
    own = fork_multipart(client, docs / MD, file_id).json()["chunks_count"]
    in_kb = fork_multipart(client, docs / MD, file_id, collection_name=KB_ID).json()["chunks_count"]
    response = client.delete(f"/api/v1/documents/{file_id}")
    assert response.status_code == 200
    assert response.json() == {"status": True, "file_id": file_id, "chunks_deleted": own + in_kb}
    assert points(client, file_id=file_id) == []
    again = client.delete(f"/api/v1/documents/{file_id}")
    assert again.json() == {"status": True, "file_id": file_id, "chunks_deleted": 0}


def test_delete_scoped_to_one_collection(client: TestClient, docs: Path, points: Points) -> None:
    # Not sent by the fork (it deletes by file id only); the service's own option.
    file_id = new_file_id()
    fork_multipart(client, docs / MD, file_id)
    in_kb = fork_multipart(client, docs / MD, file_id, collection_name=KB_ID).json()["chunks_count"]
    response = client.delete(f"/api/v1/documents/{file_id}", params={"collection_name": KB_ID})
    assert response.status_code == 200
    assert response.json() == {"status": True, "file_id": file_id, "collection_name": KB_ID, "chunks_deleted": in_kb}
    assert points(client, file_id=file_id, collection_name=KB_ID) == []
    assert points(client, file_id=file_id, collection_name=f"file-{file_id}")


# --- stock Open WebUI: PUT /process (external document loader) ----------------------------------------------


def loader_put(
    client: TestClient, path: Path, *, x_filename: str | bytes | None, mime: str | None, url: str = "", **extra: str
) -> httpx2.Response:
    """``requests.put(f"{url}/process", data=bytes, headers=...)``: no Content-Type when the MIME is unknown."""
    headers: dict[str, Any] = dict(extra)
    if mime is not None:
        headers["Content-Type"] = mime
    if x_filename is not None:
        headers["X-Filename"] = x_filename
    return client.put(f"{url}/process", content=path.read_bytes(), headers=headers)


def page_numbers(response: httpx2.Response) -> list[int]:
    assert response.status_code == 200, response.text
    return [page["metadata"]["page"] for page in response.json()]


STORED = f"{uuid.UUID(int=1)}_Mødereferat 2024 (æøå).pdf"  # basename of Open WebUI's upload path


@pytest.mark.parametrize("url", ["", "/api/v1"], ids=["base-url", "base-url-with-api-v1"])
def test_loader_request_as_open_webui_sends_it(client: TestClient, docs: Path, url: str) -> None:
    response = loader_put(client, docs / PDF_2P, x_filename=quote(STORED), mime="application/pdf", url=url)
    assert page_numbers(response) == [0, 1]
    for page in response.json():
        assert page["metadata"]["source"] == STORED
        assert page["page_content"].strip()


@pytest.mark.parametrize(
    "mime",
    ["application/pdf", "application/octet-stream", None, "application/pdf; charset=binary"],
    ids=["pdf", "octet-stream", "no-content-type", "with-parameter"],
)
def test_loader_content_type_variants(client: TestClient, docs: Path, mime: str | None) -> None:
    response = loader_put(client, docs / PDF_2P, x_filename=quote(STORED), mime=mime)
    assert page_numbers(response) == [0, 1]


@pytest.mark.parametrize(
    ("mime", "source"),
    [("application/pdf", "upload.pdf"), ("application/octet-stream", "upload"), (None, "upload")],
    ids=["pdf", "octet-stream", "no-content-type"],
)
def test_loader_without_x_filename_reads_the_bytes(
    client: TestClient, docs: Path, mime: str | None, source: str
) -> None:
    response = loader_put(client, docs / PDF_2P, x_filename=None, mime=mime)
    assert page_numbers(response) == [0, 1]
    assert {page["metadata"]["source"] for page in response.json()} == {source}


def raw_put(client: TestClient, path: str, body: bytes, headers: list[tuple[bytes, bytes]]) -> tuple[int, Any]:
    """One request straight into the app with these exact header bytes (the TestClient would re-encode
    a latin-1 header value as UTF-8; a real server passes the bytes through)."""
    sent: list[Message] = []
    chunks = [body]

    async def receive() -> Message:
        if chunks:
            return {"type": "http.request", "body": chunks.pop(), "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "PUT",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"authorization", AUTH["Authorization"].encode()), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
    }
    assert client.portal is not None
    client.portal.call(client.app, scope, receive, send)
    return int(sent[0]["status"]), json.loads(b"".join(m.get("body", b"") for m in sent[1:]))


def test_older_open_webui_sends_the_name_unquoted_and_x_extract_images(client: TestClient, docs: Path) -> None:
    # Before the name was quoted, requests sent the str header as latin-1 bytes.
    name = f"{uuid.UUID(int=2)}_Møde æøå.pdf"
    headers = [
        (b"content-type", b"application/pdf"),
        (b"x-filename", name.encode("latin-1")),
        (b"x-extract-images", b"true"),
    ]
    status, pages = raw_put(client, "/process", (docs / PDF_2P).read_bytes(), headers)
    assert status == 200, pages
    assert [page["metadata"]["page"] for page in pages] == [0, 1]
    assert {page["metadata"]["source"] for page in pages} == {name}


def test_loader_ignores_forwarded_user_headers(client: TestClient, docs: Path) -> None:
    headers = {
        "X-OpenWebUI-User-Name": "Jens J%C3%B8rgensen",
        "X-OpenWebUI-User-Id": USER_ID,
        "X-OpenWebUI-User-Email": "jens@example.dk",
        "X-OpenWebUI-User-Role": "user",
    }
    response = loader_put(
        client, docs / MD, x_filename=quote(f"{uuid.UUID(int=3)}_{NAME}"), mime="text/markdown", **headers
    )
    assert response.status_code == 200, response.text
    [document] = response.json()
    assert "IBM" in document["page_content"]


@pytest.mark.parametrize(
    ("path", "mime", "needle"),
    [
        (
            "docx/docling__word_tables.docx",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "Merged Cell",
        ),
        (MD, "text/markdown", "IBM"),
        (MD, "text/plain; charset=utf-8", "IBM"),
        (MD, "application/octet-stream", "IBM"),
    ],
    ids=["docx", "markdown", "text-plain-charset", "markdown-as-octet-stream"],
)
def test_loader_other_formats(client: TestClient, docs: Path, path: str, mime: str, needle: str) -> None:
    name = f"{uuid.UUID(int=4)}_{Path(path).name}"
    response = loader_put(client, docs / path, x_filename=quote(name), mime=mime)
    assert response.status_code == 200, response.text
    content = " ".join(page["page_content"] for page in response.json())
    assert content.strip()
    assert needle in content

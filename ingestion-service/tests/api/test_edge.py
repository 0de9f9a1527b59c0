"""The HTTP edge: auth before the body, a body cap on every route, one error shape, request ids,
process metrics and the OpenAPI document."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from fastapi.testclient import TestClient
from starlette.types import Message, Scope

from ingestion_service.api.uploads import FORM_OVERHEAD_BYTES
from rag_runtime.http import hint_for

if TYPE_CHECKING:
    from ..conftest import AppFactory  # noqa: TID252


class RawCall:
    """One request straight through the app's ASGI interface, counting the body messages it reads."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)
        self.read = 0
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        if not self.chunks:
            return {"type": "http.disconnect"}
        self.read += 1
        body = self.chunks.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(self.chunks)}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def body(self) -> Any:
        return json.loads(b"".join(m.get("body", b"") for m in self.sent[1:]))


def raw_call(client: TestClient, method: str, path: str, chunks: list[bytes], headers: dict[str, str]) -> RawCall:
    call = RawCall(chunks)
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
    }
    assert client.portal is not None
    client.portal.call(client.app, scope, call.receive, call.send)
    return call


NO_KEY = {"Authorization": ""}


@pytest.mark.parametrize(("method", "path"), [("PUT", "/api/v1/ingest"), ("POST", "/api/v1/extract")])
def test_no_body_byte_is_read_without_the_key(client: TestClient, method: str, path: str) -> None:
    call = raw_call(client, method, path, [b"x" * 2**20] * 50, {"content-type": "application/json"})
    assert call.status == 401
    assert call.read == 0
    assert (b"www-authenticate", b"Bearer") in call.sent[0]["headers"]
    assert call.body["code"] == "UNAUTHORIZED"


def test_malformed_json_without_a_key_is_401(client: TestClient) -> None:
    response = client.put(
        "/api/v1/ingest", content=b"{not json", headers={**NO_KEY, "content-type": "application/json"}
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json() == {
        "status": False,
        "error": "Missing or wrong API key.",
        "code": "UNAUTHORIZED",
        "hint": hint_for("UNAUTHORIZED"),
        "request_id": response.headers["x-request-id"],
    }


def test_a_body_on_a_route_without_one_is_capped_by_max_request_bytes(app_client: AppFactory) -> None:
    with app_client(max_request_bytes=1000) as client:
        headers = {"Authorization": client.headers["authorization"], "content-length": "5000"}
        declared = raw_call(client, "DELETE", "/api/v1/documents/x", [b"x" * 5000], headers)
        assert declared.status == 413
        assert declared.read == 0
        assert declared.body["code"] == "PAYLOAD_TOO_LARGE"
        assert "MAX_REQUEST_BYTES (1000 bytes)" in declared.body["error"]


def test_a_declared_upload_over_max_upload_bytes_is_413_before_it_is_read(app_client: AppFactory) -> None:
    with app_client(max_upload_bytes=10_000) as client:
        headers = {
            "Authorization": client.headers["authorization"],
            "content-type": "multipart/form-data; boundary=b",
            "content-length": str(10_000 + FORM_OVERHEAD_BYTES + 1),
        }
        call = raw_call(client, "PUT", "/api/v1/ingest", [b"x" * 1000], headers)
        assert call.status == 413
        assert call.read == 0
        assert call.body["code"] == "PAYLOAD_TOO_LARGE"


def test_validation_errors_are_422(client: TestClient) -> None:
    response = client.put("/api/v1/ingest", json={"file_id": "x"})
    assert response.status_code == 422
    assert response.json()["code"] == "INVALID_REQUEST"


def test_unknown_route_and_wrong_method_are_flat(client: TestClient) -> None:
    missing = client.get("/api/v1/nope")
    assert missing.status_code == 404
    assert missing.json() == {
        "status": False,
        "error": "Not Found",
        "code": "NOT_FOUND",
        "hint": hint_for("NOT_FOUND"),
        "request_id": missing.headers["x-request-id"],
    }
    wrong = client.get("/api/v1/ingest")
    assert wrong.status_code == 405
    assert wrong.json()["code"] == "METHOD_NOT_ALLOWED"
    assert client.get("/api/v1/nope", headers=NO_KEY).status_code == 401


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/api/v1/ingest", "PUT"),
        # Two routes share the path: Starlette named only the first one's method.
        ("PUT", "/api/v1/documents/abc", "DELETE, PATCH"),
        ("PUT", "/api/v1/ingest/jobs/abc", "DELETE, GET"),
    ],
)
def test_a_wrong_method_lists_every_method_the_path_takes(
    client: TestClient, method: str, path: str, allowed: str
) -> None:
    wrong = client.request(method, path)
    assert wrong.status_code == 405
    assert wrong.headers["allow"] == allowed


def test_probes_and_docs_stay_public(client: TestClient) -> None:
    for path in ("/health", "/health/ready", "/openapi.json", "/docs"):
        assert client.get(path, headers=NO_KEY).status_code == 200, path
    assert client.get("/metrics", headers=NO_KEY).status_code == 401


def test_request_id_is_echoed_in_the_header_and_the_error_body(client: TestClient) -> None:
    response = client.put("/api/v1/ingest", json={}, headers={"X-Request-ID": "upload-9"})
    assert response.headers["x-request-id"] == "upload-9"
    assert response.json()["request_id"] == "upload-9"
    generated = client.get("/health", headers={"X-Request-ID": "no spaces allowed"}).headers["x-request-id"]
    assert len(generated) == 32


def test_metrics_include_process_series(client: TestClient) -> None:
    text = client.get("/metrics").text
    for series in ("process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds"):
        assert f"\n{series} " in text


def test_openapi_declares_bodies_bearer_and_errors(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["BearerAuth"]["scheme"] == "bearer"
    ingest = spec["paths"]["/api/v1/ingest"]["put"]
    content = ingest["requestBody"]["content"]
    assert set(content) == {"application/json", "multipart/form-data"}
    # JSON: an S3 object or a URL.
    s3_body, url_body = content["application/json"]["schema"]["oneOf"]
    assert {"s3_bucket", "s3_key", "filename"} <= set(s3_body["required"])
    assert "url" in url_body["required"]
    assert "filename" not in url_body["properties"]
    form = content["multipart/form-data"]["schema"]
    assert form["properties"]["file"] == {**form["properties"]["file"], "type": "string", "format": "binary"}
    assert {"file", "file_id", "filename", "collection_name", "user_id"} <= set(form["required"])
    extract = spec["paths"]["/api/v1/extract"]["post"]
    assert set(extract["requestBody"]["content"]) == {"multipart/form-data"}
    for path, method in (
        ("/api/v1/ingest", "put"),
        ("/api/v1/extract", "post"),
        ("/api/v1/documents/{file_id}", "delete"),
        ("/metrics", "get"),
    ):
        operation = spec["paths"][path][method]
        assert operation["security"] == [{"BearerAuth": []}], path
        for status in ("401", "413", "415", "422"):
            schema = operation["responses"][status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (path, status)
    # The routes that apply the bucket and collection rules declare their 403.
    for path, method in (
        ("/api/v1/ingest", "put"),
        ("/api/v1/documents/{file_id}", "delete"),
        ("/api/v1/collections/{name}/reindex", "post"),
    ):
        assert "INVALID_REQUEST" in spec["paths"][path][method]["responses"]["403"]["description"], path
    assert "403" not in spec["paths"]["/api/v1/extract"]["post"]["responses"]
    # Ingest's own failures: the S3 read and its run's time limit.
    assert "S3_FETCH_FAILED" in ingest["responses"]["502"]["description"]
    assert "INGEST_TIMEOUT" in ingest["responses"]["504"]["description"]
    assert "URL_FETCH_FAILED" in ingest["responses"]["502"]["description"]
    assert "URL_FETCH_TIMEOUT" in ingest["responses"]["504"]["description"]
    web_loader = spec["paths"]["/process"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert web_loader["required"] == ["urls"]
    chunks = spec["paths"]["/api/v1/documents/{file_id}/chunks"]["get"]["responses"]["404"]
    assert "ENABLE_INSPECTION_API" in chunks["description"]
    assert "security" not in spec["paths"]["/health"]["get"]

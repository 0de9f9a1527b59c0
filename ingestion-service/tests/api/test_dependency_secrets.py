"""Credentials in dependency URLs and upstream error texts stay out of answers and logs.

VISION_LLM_API_BASE_URL and S3_ENDPOINT_URL may carry ``user:pass@``, and upstream errors echo
request details. Driven through the HTTP API against loopback stand-ins; every log record at INFO
and above is searched: its message, its ``extra=`` fields and its traceback.
"""

from __future__ import annotations

import json
import logging
import threading
import traceback
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fastapi.testclient import TestClient

from ingestion_service.adapters.s3 import S3Source, build_s3_client
from ingestion_service.errors import S3FetchError
from rag_runtime.http import REQUEST_FAILED
from rag_runtime.http.logs import QUIET_LOGGERS

from ..conftest import free_port  # noqa: TID252
from ..scripted_servers import RecordedRequest, ScriptedVisionServer  # noqa: TID252

if TYPE_CHECKING:
    import httpx2

    from ..conftest import AppFactory, MakeSettings  # noqa: TID252

JPEG = "jpg/unstructured__double-column-A.jpg"
VISION_PASSWORD = "vision-pass-7f3a"
S3_PASSWORD = "s3-pass-9c1e"
# What an upstream (a LiteLLM proxy) echoes of the request in its error text.
UPSTREAM_BASIC = "dmlzaW9uOnNlY3JldC12YWx1ZQ=="
UPSTREAM_KEY = "sk-livekey1234567890abcdef"
VISION_SETTINGS = "VISION_LLM_API_BASE_URL, VISION_LLM_API_KEY and VISION_LLM_MODEL"
SECRETS = (VISION_PASSWORD, S3_PASSWORD, UPSTREAM_BASIC, UPSTREAM_KEY)


class EchoingVisionServer(ScriptedVisionServer):
    """Every chat-completions call fails with HTTP 500, the error text echoing credentials."""

    def answer(self, request: RecordedRequest) -> tuple[int, str, bytes, float]:
        message = f"litellm.InternalServerError: upstream refused; auth=Basic {UPSTREAM_BASIC} key {UPSTREAM_KEY}"
        body = json.dumps({"error": {"message": message, "type": "server_error"}}).encode()
        return 500, "application/json", body, 0.0


@pytest.fixture(autouse=True)
def _production_log_levels(caplog: pytest.LogCaptureFixture) -> None:
    """INFO and above, with the HTTP clients' request lines quieted as the service's logging set-up does."""
    caplog.set_level(logging.INFO)
    for name in QUIET_LOGGERS:
        caplog.set_level(logging.WARNING, logger=name)


@pytest.fixture
def echoing_vision() -> Iterator[EchoingVisionServer]:
    with EchoingVisionServer() as server:
        yield server


def logged_text(caplog: pytest.LogCaptureFixture) -> str:
    """Everything the records at INFO and above carry: message, extra fields and traceback."""
    standard = set(vars(logging.makeLogRecord({})))
    formatter = logging.Formatter()
    parts: list[str] = []
    for record in caplog.records:
        if record.levelno < logging.INFO:
            continue
        parts.append(record.getMessage())
        parts.extend(f"{name}={value}" for name, value in vars(record).items() if name not in standard)
        if record.exc_info:
            parts.append(formatter.formatException(record.exc_info))
    return "\n".join(parts)


def the_failure(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    [record] = [record for record in caplog.records if record.getMessage() == REQUEST_FAILED]
    return record


def assert_no_secrets(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


def _extract(client: TestClient, path: Path, **fields: str) -> httpx2.Response:
    with path.open("rb") as handle:
        return client.post("/api/v1/extract", data=fields, files={"file": (path.name, handle)})


# --- the vision endpoint ------------------------------------------------------------------------


def _failed_vision_extract(
    app_client: AppFactory, docs: Path, caplog: pytest.LogCaptureFixture, base_url: str, **settings: Any
) -> tuple[httpx2.Response, str]:
    """``/api/v1/extract`` of the JPEG through the vision engine at ``base_url``, which fails: the
    response (500) and the ``cause`` of its request_failed line."""
    with app_client(vision_llm_api_base_url=base_url, **settings) as client:
        caplog.clear()
        response = _extract(client, docs / JPEG, engine="vision-llm")
    assert response.status_code == 500
    return response, str(getattr(the_failure(caplog), "cause", ""))


# A bare model goes through our OpenAI client; a provider-prefixed one through LiteLLM's own,
# whose chained httpx error repeats the request URL.
@pytest.mark.parametrize("model", ["gemma4-nvfp4", "hosted_vllm/gemma"])
def test_vision_failure_answers_a_fixed_message_and_logs_only_redacted_text(
    app_client: AppFactory,
    echoing_vision: EchoingVisionServer,
    docs: Path,
    caplog: pytest.LogCaptureFixture,
    model: str,
) -> None:
    base_url = f"http://vision-user:{VISION_PASSWORD}@127.0.0.1:{echoing_vision.port}/v1"
    response, cause = _failed_vision_extract(app_client, docs, caplog, base_url, vision_llm_model=model)
    # The status and a fixed phrase; nothing the upstream said.
    assert response.json()["error"] == (
        f"Document extraction failed: the vision endpoint answered HTTP 500 (check {VISION_SETTINGS})."
    )
    # The log names the endpoint and keeps what the upstream said, both redacted.
    assert f"vision endpoint http://***@127.0.0.1:{echoing_vision.port}/v1 answered HTTP 500: " in cause
    assert "upstream refused; auth=Basic ***" in cause
    assert_no_secrets(response.text, logged_text(caplog))


def test_unreachable_vision_endpoint_is_named_without_its_credentials(
    app_client: AppFactory, docs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    base_url = f"http://vision-user:{VISION_PASSWORD}@127.0.0.1:{port}/v1"
    response, cause = _failed_vision_extract(app_client, docs, caplog, base_url)
    assert response.json()["error"] == (
        f"Document extraction failed: the vision endpoint is unreachable (check {VISION_SETTINGS})."
    )
    assert f"vision endpoint http://***@127.0.0.1:{port}/v1 is unreachable (" in cause
    assert_no_secrets(response.text, logged_text(caplog))


def test_async_job_failure_keeps_vision_credentials_out_of_the_job_and_its_log(
    app_client: AppFactory, echoing_vision: EchoingVisionServer, docs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base_url = f"http://vision-user:{VISION_PASSWORD}@127.0.0.1:{echoing_vision.port}/v1"
    file_id = uuid.uuid4().hex
    form = {"file_id": file_id, "filename": "scan.jpg", "collection_name": f"file-{file_id}", "user_id": "u1"}
    settings: dict[str, Any] = {"vision_llm_api_base_url": base_url, "extraction_engine": "vision-llm"}
    with app_client(**settings) as client:
        caplog.clear()
        with (docs / JPEG).open("rb") as handle:
            submitted = client.put(
                "/api/v1/ingest",
                data=form,
                files={"file": ("scan.jpg", handle)},
                headers={"Prefer": "respond-async"},
            )
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["job_id"]
        job = client.get(f"/api/v1/ingest/jobs/{job_id}").json()
        while job["state"] not in {"succeeded", "failed", "aborted"}:
            job = client.get(f"/api/v1/ingest/jobs/{job_id}").json()
    assert job["state"] == "failed"
    assert job["error"]["error"] == (
        f"Document extraction failed: the vision endpoint answered HTTP 500 (check {VISION_SETTINGS})."
    )
    [ended] = [record for record in caplog.records if getattr(record, "job_id", None) == job_id and record.exc_info]
    assert f"http://***@127.0.0.1:{echoing_vision.port}/v1 answered HTTP 500" in ended.getMessage()
    assert_no_secrets(json.dumps(job), logged_text(caplog))


# --- S3 ---------------------------------------------------------------------------------------


class _ClosingS3(ThreadingHTTPServer):
    daemon_threads = True
    close_on: str


class _ClosingS3Handler(BaseHTTPRequestHandler):
    """Answers HEAD with a small object, unless the server closes on HEAD; closes on GET."""

    server: _ClosingS3

    def do_HEAD(self) -> None:
        if self.server.close_on == "HEAD":
            return  # no answer: the connection closes
        self.send_response(200)
        self.send_header("Content-Length", "10")
        self.send_header("Content-Type", "text/markdown")
        self.send_header("ETag", '"e"')
        self.end_headers()

    def do_GET(self) -> None:
        return  # no answer: the connection closes

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def closing_s3(close_on: str) -> Iterator[int]:
    """A loopback S3 stand-in that closes the connection on ``close_on`` (HEAD or GET); yields its port."""
    server = _ClosingS3(("127.0.0.1", 0), _ClosingS3Handler)
    server.close_on = close_on
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.mark.parametrize("close_on", ["HEAD", "GET"])
def test_s3_connection_failure_is_logged_without_credentials_or_traceback(
    app_client: AppFactory, caplog: pytest.LogCaptureFixture, close_on: str
) -> None:
    body = {
        "s3_bucket": "openwebui",
        "s3_key": "uploads/notes.md",
        "file_id": "s3-secret",
        "filename": "notes.md",
        "collection_name": "file-s3-secret",
        "user_id": "u1",
    }
    with (
        closing_s3(close_on) as port,
        app_client(s3_endpoint_url=f"http://s3-user:{S3_PASSWORD}@127.0.0.1:{port}") as client,
    ):
        caplog.clear()
        response = client.put("/api/v1/ingest", json=body)
    assert response.status_code == 502
    assert (response.json()["code"], response.json()["error"]) == ("S3_FETCH_FAILED", "S3 object fetch failed.")
    record = the_failure(caplog)
    assert record.levelno == logging.ERROR
    # A typed dependency failure: its cause, not a traceback (docs/contract.md).
    assert record.exc_info is None
    operation = "head_object" if close_on == "HEAD" else "get_object"
    cause = str(getattr(record, "cause", ""))
    assert cause.startswith(f"S3FetchError: {operation} failed: ConnectionClosedError: ")
    assert f"http://***@127.0.0.1:{port}/openwebui/uploads/notes.md" in cause
    assert_no_secrets(response.text, logged_text(caplog))


@pytest.mark.parametrize("close_on", ["HEAD", "GET"])
def test_s3_fetch_error_traceback_has_no_credentials(
    make_test_settings: MakeSettings, tmp_path: Path, close_on: str
) -> None:
    # A log line with the failure's traceback (an async job's end line) prints its chain too:
    # botocore's error, which names the endpoint URL in full, must not be part of it.
    with closing_s3(close_on) as port:
        source = S3Source(
            build_s3_client(make_test_settings(s3_endpoint_url=f"http://s3-user:{S3_PASSWORD}@127.0.0.1:{port}"))
        )

        def fetch() -> None:  # as the service does: head_object, then the download
            source.head("openwebui", "notes.md")
            source.download("openwebui", "notes.md", tmp_path / "notes.md", max_bytes=100)

        try:
            with pytest.raises(S3FetchError) as caught:
                fetch()
        finally:
            source.close()
    rendered = "".join(traceback.format_exception(caught.value))
    assert "ConnectionClosedError" in rendered
    assert f"http://***@127.0.0.1:{port}/openwebui/notes.md" in rendered
    assert_no_secrets(rendered)
    assert not (tmp_path / "notes.md").exists()

"""The services' log format: JSON lines that keep ``extra=`` fields and the request id; no forged or leaking lines."""

from __future__ import annotations

import io
import json
import logging

import httpx
import pytest

from rag_runtime.http import REQUEST_FAILED, configure_logging, current_request_id, log_handler, log_request_failed
from rag_runtime.http.logs import QUIET_LOGGERS


def _log_one(log_format: str, **extra: object) -> str:
    stream = io.StringIO()
    logger = logging.getLogger("shared_contract.tests.logs")
    logger.propagate = False
    handler = log_handler(log_format, stream)  # type: ignore[arg-type]
    logger.addHandler(handler)
    token = current_request_id.set("req-1")
    try:
        logger.warning("ingest aborted (%s)", "CLIENT_DISCONNECTED", extra=extra)
    finally:
        current_request_id.reset(token)
        logger.removeHandler(handler)
    return stream.getvalue()


def test_json_lines_keep_extra_fields_and_the_request_id() -> None:
    entry = json.loads(_log_one("json", file_id="f-1", ingest_version="00017"))
    assert entry["message"] == "ingest aborted (CLIENT_DISCONNECTED)"
    assert entry["level"] == "WARNING"
    assert entry["logger"] == "shared_contract.tests.logs"
    assert (entry["request_id"], entry["file_id"], entry["ingest_version"]) == ("req-1", "f-1", "00017")


def test_text_lines_carry_the_request_id() -> None:
    assert "[req-1]: ingest aborted (CLIENT_DISCONNECTED)" in _log_one("text")


def test_text_lines_escape_line_breaks_in_the_message() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("shared_contract.tests.forged")
    logger.propagate = False
    handler = log_handler("text", stream)
    logger.addHandler(handler)
    try:
        logger.warning("model %s failed", "m\n2026-01-01 00:00:00,000 CRITICAL forged [-]: FORGED")
    finally:
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].endswith("model m\\n2026-01-01 00:00:00,000 CRITICAL forged [-]: FORGED failed")


def test_configured_logging_leaves_out_http_clients_request_lines(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, {name: logging.getLogger(name).level for name in QUIET_LOGGERS})
    try:
        configure_logging("INFO", "text")
        transport = httpx.MockTransport(lambda _request: httpx.Response(200))
        with httpx.Client(transport=transport) as client:
            client.get("http://user:s3cret@llm.internal/v1/models")
        logging.getLogger("retrieval_agent.tests").info("still logged")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        for name, level in saved[2].items():
            logging.getLogger(name).setLevel(level)
    written = capsys.readouterr().err
    assert "still logged" in written
    assert "s3cret" not in written
    assert "HTTP Request" not in written


def test_a_request_failed_line_caps_the_error_message(caplog: pytest.LogCaptureFixture) -> None:
    scope = {"type": "http", "method": "POST", "path": "/search"}
    with caplog.at_level(logging.WARNING):
        log_request_failed(scope, 422, "INVALID_REQUEST", "x" * 2_000_000, request_id="r-1")
    (record,) = [record for record in caplog.records if record.getMessage() == REQUEST_FAILED]
    assert len(vars(record)["error"]) == 2000

"""The services' log format: JSON lines that keep ``extra=`` fields and the request id."""

from __future__ import annotations

import io
import json
import logging

from shared_contract.http import current_request_id, log_handler


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

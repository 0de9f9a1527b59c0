"""Log set-up of both services: every line carries its request's id; JSON lines or plain text."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Literal, TextIO

from shared_contract.http.request_id import current_request_id

LogFormat = Literal["json", "text"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"
# A LogRecord's own attributes; everything else on a record came from ``extra=`` and is kept.
_RECORD_FIELDS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "request_id", "taskName"}


class RequestIdFilter(logging.Filter):
    """Stamps each record with the current request's id (``-`` outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id.get() or "-"
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id, the record's extras, traceback."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or current_request_id.get(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_FIELDS and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # default=str: an extra that is not JSON (a Path, an enum) is logged as its text, never dropped.
        return json.dumps(entry, default=str, ensure_ascii=False)


def log_handler(log_format: LogFormat, stream: TextIO | None = None) -> logging.Handler:
    """A stream handler with the request-id filter and the chosen format."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    return handler


def configure_logging(level: str, log_format: LogFormat) -> None:
    """Replace the root logger's handlers with one :func:`log_handler`.

    Run uvicorn with ``log_config=None`` so its own loggers (access lines included) reach this handler.
    """
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(log_handler(log_format))
    root.setLevel(level)

"""Log set-up of both services: every line carries its request's id; JSON lines or plain text.

Also the one ``request_failed`` line each failed request writes (:func:`log_request_failed`).
"""

from __future__ import annotations

import copy
import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from pythonjsonlogger.core import RESERVED_ATTRS, merge_record_extra
from pythonjsonlogger.json import JsonFormatter as _LibraryJsonFormatter
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.types import Scope

from rag_runtime.http.request_id import current_request_id, request_id_of_exception

LogFormat = Literal["json", "text"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"
# A LogRecord's own attributes; everything else on a record came from ``extra=`` and is kept.
# uvicorn's ``color_message`` repeats the message with ANSI colours: noise in both formats.
_RECORD_FIELDS = frozenset(RESERVED_ATTRS) | {"request_id", "taskName", "color_message"}
# JSON keys: the record attributes python-json-logger reads, renamed to the names the lines have.
_JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s"
_JSON_NAMES = {
    "asctime": "time",
    "levelname": "level",
    "name": "logger",
    "exc_info": "exception",
    "stack_info": "stack",
}

REQUEST_FAILED = "request_failed"
# What a request_failed line names when the request carried it (path, query, or noted by the route).
LOGGED_REQUEST_FIELDS = ("file_id", "collection_name")
_NOTED_FIELDS = "log_fields"  # the key in the request's scope["state"]
_MAX_FIELD_CHARS = 200
_MAX_CAUSE_CHARS = 2000
_MAX_ERROR_CHARS = 2000
# HTTP clients' INFO lines name every request's URL, credentials in an endpoint setting included.
QUIET_LOGGERS = ("httpx", "httpx2", "httpcore")

failure_logger = logging.getLogger("rag_runtime.http.failures")


def record_extras(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a record got from ``extra=`` (the request id is formatted on its own)."""
    return merge_record_extra(record, {}, reserved=_RECORD_FIELDS)


class RequestIdFilter(logging.Filter):
    """Stamps each record with the current request's id (``-`` outside a request).

    A record logging an exception that escaped a request (the server's traceback of a 500) gets the
    id the edge middleware put on the exception.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            escaped = record.exc_info[1] if record.exc_info else None
            record.request_id = current_request_id.get() or request_id_of_exception(escaped) or "-"
        return True


class JsonFormatter(_LibraryJsonFormatter):
    """One JSON object per line: time, level, logger, message, request id, the record's extras, and
    ``exception`` / ``stack`` when the record has them (python-json-logger's formatter, keys renamed)."""

    def __init__(self) -> None:
        super().__init__(
            _JSON_FIELDS,
            rename_fields=_JSON_NAMES,
            reserved_attrs=sorted(_RECORD_FIELDS),
            # str: an extra that is not JSON (a Path, an enum) is logged as its text, never dropped.
            json_default=str,
            json_ensure_ascii=False,
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: ARG002 - logging's signature
        """ISO 8601 in UTC, to the millisecond."""
        return datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds")


def _escaped(text: str) -> str:
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def _text_value(value: object) -> str:
    text = str(value)
    if text and text.isprintable() and not any(char.isspace() or char in "\"'=\\" for char in text):
        return text
    # Quoted and escaped: a value (a path, a file id) must never start a forged line of its own.
    quoted = json.dumps(text, ensure_ascii=False)
    return quoted if quoted.isprintable() else json.dumps(text)


class TextFormatter(logging.Formatter):
    """:data:`TEXT_FORMAT`, then the record's ``extra=`` fields as ``key=value`` (quoted when needed)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        if not record.message.isprintable():
            # A line break or control character in a message (from a value it names) would start a
            # forged line; a traceback is appended after this, with its own line breaks.
            record = copy.copy(record)
            record.message = _escaped(record.message)
        line = super().formatMessage(record)
        fields = " ".join(f"{key}={_text_value(value)}" for key, value in record_extras(record).items())
        return f"{line} {fields}" if fields else line


def log_handler(log_format: LogFormat, stream: TextIO | None = None) -> logging.Handler:
    """A stream handler with the request-id filter and the chosen format."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
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
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def note_request_fields(request: Request, **fields: str | None) -> None:
    """Name fields a route read from the body (``file_id``, ``collection_name``) on the request's
    ``request_failed`` line, should it fail; path and query parameters are found without this."""
    noted: dict[str, str] = request.scope.setdefault("state", {}).setdefault(_NOTED_FIELDS, {})
    noted.update({name: value for name, value in fields.items() if value})


def _route_path(scope: Scope) -> str:
    # The route's template (/api/v1/documents/{file_id}, converters such as ":path" left out) groups
    # lines; before routing, the raw path.
    route = scope.get("route")
    template = getattr(route, "path_format", None) or getattr(route, "path", None)
    path = template if isinstance(template, str) else str(scope.get("path", ""))
    return path[:_MAX_FIELD_CHARS]


def _carried_fields(scope: Scope) -> dict[str, str]:
    noted = (scope.get("state") or {}).get(_NOTED_FIELDS) or {}
    path_params = scope.get("path_params") or {}
    query = QueryParams(scope.get("query_string", b""))
    found: dict[str, str] = {}
    for name in LOGGED_REQUEST_FIELDS:
        value = noted.get(name) or path_params.get(name) or query.get(name)
        if value:
            found[name] = str(value)[:_MAX_FIELD_CHARS]
    return found


def log_request_failed(
    scope: Scope,
    status: int,
    code: str,
    message: str,
    *,
    request_id: str | None = None,
    cause: BaseException | None = None,
    log_traceback: bool = False,
) -> None:
    """The one ``request_failed`` line of a failed request: WARNING for 4xx, ERROR for 5xx.

    Fields (JSON keys, or ``key=value`` in text): request_id, method, path (the route template when
    routed), status, code, error (the body's message), file_id and collection_name when the request
    carried them, and cause (the exception's own text, for operators) when it adds to the message.
    Never the body or a header. ``request_id`` is passed explicitly because Starlette's server-error
    handler runs outside the edge middleware.
    """
    fields: dict[str, object] = {
        "request_id": request_id or current_request_id.get() or "-",
        "method": scope.get("method", "-"),
        "path": _route_path(scope),
        "status": status,
        "code": code,
        "error": message[:_MAX_ERROR_CHARS],
        **_carried_fields(scope),
    }
    if cause is not None:
        text = str(cause)
        if text != message:
            fields["cause"] = (f"{type(cause).__name__}: {text}" if text else type(cause).__name__)[:_MAX_CAUSE_CHARS]
    level = logging.ERROR if status >= 500 else logging.WARNING
    failure_logger.log(level, REQUEST_FAILED, extra=fields, exc_info=cause if log_traceback else None)

"""Request ids: one per request, in the response header, in error bodies and in every log line."""

from __future__ import annotations

import re
import uuid
from contextvars import ContextVar

from starlette.requests import Request

REQUEST_ID_HEADER = "X-Request-ID"
# A caller's id is kept only when it is a short plain token; anything else could forge log lines.
_SANE_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

# Set by EdgeMiddleware for the request's task; worker threads inherit it (anyio copies the context).
current_request_id: ContextVar[str | None] = ContextVar("current_request_id", default=None)


def new_request_id() -> str:
    """A fresh id (32 hex characters)."""
    return uuid.uuid4().hex


def accept_request_id(value: bytes | None) -> str:
    """The caller's ``X-Request-ID`` when it is a sane short token, else a fresh id."""
    if value is not None:
        text = value.decode("latin-1")
        if _SANE_ID.match(text):
            return text
    return new_request_id()


def request_id_of(request: Request) -> str:
    """The id EdgeMiddleware gave ``request`` (kept in ``request.state``), else the context's, else fresh.

    Handlers outside the middleware (Starlette's server-error handler) still see ``request.state``.
    """
    stored = getattr(request.state, "request_id", None)
    if isinstance(stored, str):
        return stored
    return current_request_id.get() or new_request_id()

"""Request ids: one per request, in the response header, in error bodies and in every log line."""

# Not asgi-correlation-id: its middleware appends X-Request-ID to every response, also to the error
# responses that already carry it (they must: Starlette's 500 is sent outside every middleware), so
# clients would read the id twice; and it runs apart from the key and body checks of EdgeMiddleware.

from __future__ import annotations

import re
import uuid
from contextlib import suppress
from contextvars import ContextVar

from starlette.requests import Request

REQUEST_ID_HEADER = "X-Request-ID"
# A caller's id is kept only when it is a short plain token; anything else could forge log lines.
_SANE_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

# Set by EdgeMiddleware for the request's task; worker threads inherit it (anyio copies the context).
current_request_id: ContextVar[str | None] = ContextVar("current_request_id", default=None)


# Set on an exception that escapes a request (see EdgeMiddleware), read by the log filter.
_EXCEPTION_ATTRIBUTE = "_rag_request_id"


def tag_exception(exc: BaseException, request_id: str) -> None:
    """Remember on ``exc`` the request it escaped from (kept if an inner request tagged it first)."""
    if getattr(exc, _EXCEPTION_ATTRIBUTE, None) is None:
        with suppress(AttributeError):  # an exception type with __slots__ cannot carry it
            setattr(exc, _EXCEPTION_ATTRIBUTE, request_id)


def request_id_of_exception(exc: BaseException | None) -> str | None:
    """The id :func:`tag_exception` put on ``exc``, if any."""
    value = getattr(exc, _EXCEPTION_ATTRIBUTE, None)
    return value if isinstance(value, str) else None


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

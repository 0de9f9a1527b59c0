"""The services' HTTP edge, as one pure ASGI middleware: request id, then the API key, then the body cap.

FastAPI reads and parses a route's body before any dependency runs, so a key checked in a
dependency comes after a body of any size was read into memory. This middleware runs first: a
request without the key is refused before one body byte is read, and a body is counted as it
arrives and refused with 413 once over its route's cap (never buffered here).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable, Collection
from dataclasses import dataclass

from fastapi import FastAPI
from pydantic import SecretStr
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag_runtime.http.errors import SHUTTING_DOWN_MESSAGE, UNAUTHORIZED_MESSAGE, error_content
from rag_runtime.http.logs import log_request_failed
from rag_runtime.http.request_id import REQUEST_ID_HEADER, accept_request_id, current_request_id, tag_exception
from shared_contract.error_codes import PAYLOAD_TOO_LARGE, SHUTTING_DOWN, UNAUTHORIZED


@dataclass(frozen=True, slots=True)
class BodyLimit:
    """A route's request body cap and the variable that sets it (named in the 413 message)."""

    max_bytes: int
    variable: str

    def message(self) -> str:
        """What the 413 body says."""
        return f"The request body is larger than {self.variable} ({self.max_bytes} bytes)."


class RequestBodyTooLargeError(HTTPException):
    """Raised from ``receive`` once a streamed body passes its cap; the app's handlers answer 413."""

    def __init__(self, limit: BodyLimit) -> None:
        super().__init__(status_code=413, detail=limit.message())


HEALTH_PATHS = frozenset({"/health", "/health/ready"})


def public_paths(app: FastAPI) -> frozenset[str]:
    """Served without a key: the probes and FastAPI's own docs pages."""
    docs = {app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url}
    return HEALTH_PATHS | {path for path in docs if path}


def bearer_token_matches(authorization: bytes | None, expected: SecretStr) -> bool:
    """``Authorization: Bearer <token>`` with the token equal to ``expected``, compared in constant time.

    Bytes are compared, so a non-ASCII token is simply wrong, never an error.
    """
    if authorization is None:
        return False
    scheme, _, token = authorization.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return False
    return secrets.compare_digest(token.strip(), expected.get_secret_value().encode("utf-8"))


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value)
    return None


def _declared_length(scope: Scope) -> int | None:
    value = _header(scope, b"content-length")
    if value is None or not value.strip().isdigit():
        return None  # no or a malformed length: the streaming count still applies
    return int(value)


class EdgeMiddleware:
    """Request id, API key and body cap for every HTTP request of one app.

    Args:
        app: the wrapped ASGI app.
        api_key: the Bearer token every path outside ``public_paths`` needs.
        public_paths: exact paths served without a key (health probes, API docs).
        body_limit: the body cap of a path.
        public_prefixes: path prefixes served without a key, whose routes authorize the request
            themselves (signed citation links).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        api_key: SecretStr,
        public_paths: Collection[str],
        body_limit: Callable[[str], BodyLimit],
        public_prefixes: Collection[str] = (),
    ) -> None:
        self.app = app
        self.api_key = api_key
        self.public_paths = frozenset(public_paths)
        self.public_prefixes = tuple(public_prefixes)
        self.body_limit = body_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = accept_request_id(_header(scope, b"x-request-id"))
        # request.state reads scope["state"]: handlers outside this middleware (500s) find the id there.
        scope.setdefault("state", {})["request_id"] = request_id
        token = current_request_id.set(request_id)
        try:
            await self._handle(scope, receive, send, request_id)
        except Exception as exc:
            # Starlette's server-error handler and the server ("Exception in ASGI application") log
            # this exception after it left here, outside the id's context: it carries the id to them.
            tag_exception(exc, request_id)
            raise
        finally:
            current_request_id.reset(token)

    async def _handle(self, scope: Scope, receive: Receive, send: Send, request_id: str) -> None:
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                if REQUEST_ID_HEADER not in headers:
                    headers.append(REQUEST_ID_HEADER, request_id)
            await send(message)

        path: str = scope["path"]
        public = path in self.public_paths or (bool(self.public_prefixes) and path.startswith(self.public_prefixes))
        if not public and not bearer_token_matches(_header(scope, b"authorization"), self.api_key):
            await _send_error(
                scope,
                send_with_id,
                401,
                UNAUTHORIZED,
                UNAUTHORIZED_MESSAGE,
                request_id,
                [(b"www-authenticate", b"Bearer")],
            )
            return
        limit = self.body_limit(path)
        declared = _declared_length(scope)
        if declared is not None and declared > limit.max_bytes:
            await _send_error(scope, send_with_id, 413, PAYLOAD_TOO_LARGE, limit.message(), request_id)
            return
        received = 0

        async def capped_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit.max_bytes:
                    raise RequestBodyTooLargeError(limit)
            return message

        try:
            await self.app(scope, capped_receive, send_with_id)
        except RequestBodyTooLargeError:
            # Normally the app's HTTPException handler answers; this covers code that let it escape.
            if started:
                raise
            await _send_error(scope, send_with_id, 413, PAYLOAD_TOO_LARGE, limit.message(), request_id)
        except asyncio.CancelledError:
            # Only the server cancels a request's task: uvicorn, when its graceful-shutdown timeout ran
            # out. The app's own clean-up has run on the way here; the client gets the error shape,
            # not uvicorn's plain-text 500 (and no "Exception in ASGI application" traceback).
            if started:
                raise
            await _send_error(scope, send_with_id, 503, SHUTTING_DOWN, SHUTTING_DOWN_MESSAGE, request_id)


async def _send_error(
    scope: Scope,
    send: Send,
    status: int,
    code: str,
    message: str,
    request_id: str,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """An error answered here, before the app: the flat body and the request's request_failed line."""
    log_request_failed(scope, status, code, message, request_id=request_id)
    body = json.dumps(error_content(message, code, request_id)).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(extra_headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

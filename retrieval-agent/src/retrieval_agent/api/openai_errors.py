"""The /v1 routes' errors in OpenAI's shape, ``{"error": {"message", "type", "code", "param"}}``.

The rest of the service answers the flat shape (``rag_runtime.http``); OpenAI SDKs read
``error.message``, so /v1 is the documented exception. Two pieces: the handler of :class:`ChatError`
(the chat's own failures, upstream statuses included), and a middleware that rewrites the flat errors
other layers answer on /v1 paths (the edge's 401 and 413, validation errors as 400, store failures)
into the same shape, keeping their status and code.
"""

from __future__ import annotations

import json

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag_runtime.http.logs import log_request_failed
from rag_runtime.http.request_id import REQUEST_ID_HEADER, request_id_of
from retrieval_agent.chat.errors import ChatError, error_type_for, openai_error

OPENAI_PREFIX = "/v1/"


async def _on_chat_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ChatError)
    request_id = request_id_of(request)
    log_request_failed(request.scope, exc.status, exc.code, exc.message, request_id=request_id, cause=exc)
    headers = {**exc.headers, REQUEST_ID_HEADER: request_id}
    return JSONResponse(status_code=exc.status, content=exc.body(), headers=headers)


def reshaped(status: int, body: bytes) -> tuple[int, bytes] | None:
    """A flat error body as OpenAI's (422 becomes 400, as OpenAI answers a malformed request); None when
    ``body`` is not a flat error."""
    try:
        flat = json.loads(body)
    except ValueError:
        return None
    if not (isinstance(flat, dict) and flat.get("status") is False and isinstance(flat.get("error"), str)):
        return None
    status = 400 if status == 422 else status
    code = flat.get("code") if isinstance(flat.get("code"), str) else None
    return status, json.dumps(openai_error(flat["error"], error_type_for(status), code)).encode()


def is_openai_path(path: str) -> bool:
    return path.startswith(OPENAI_PREFIX)


def as_openai(response: Response) -> Response:
    """A flat error response in OpenAI's shape, headers (``X-Request-ID``) kept; other responses as they are.

    For the catch-all handler of unexpected errors, which Starlette runs in its ServerErrorMiddleware,
    outside :class:`OpenAIErrorShape`.
    """
    new = reshaped(response.status_code, bytes(response.body))
    if new is None:
        return response
    status, body = new
    headers = {key: value for key, value in response.headers.items() if key not in ("content-length", "content-type")}
    return Response(body, status_code=status, headers=headers, media_type="application/json")


class OpenAIErrorShape:
    """Rewrites flat JSON error responses on /v1 paths; every other response passes through untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_openai_path(str(scope["path"])):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def reshaping_send(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and message["status"] >= 400:
                start = message  # held until the body is complete (error bodies are small)
                return
            if start is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            status = int(start["status"])
            new = reshaped(status, body)
            if new is not None:
                status, body = new
                headers = MutableHeaders(scope=start)
                headers["content-length"] = str(len(body))
                headers["content-type"] = "application/json"
            await send({**start, "status": status})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, reshaping_send)


def install_openai_errors(app: FastAPI) -> None:
    """The ChatError handler, and the reshaping middleware (outermost: it sees the edge's answers too)."""
    app.add_exception_handler(ChatError, _on_chat_error)
    app.add_middleware(OpenAIErrorShape)

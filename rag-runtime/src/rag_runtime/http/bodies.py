"""The one Content-Type rule for JSON routes, shared so both services refuse a non-JSON body alike."""

from __future__ import annotations

from fastapi import Request
from starlette.exceptions import HTTPException as StarletteHTTPException

NOT_JSON_MESSAGE = "Invalid request: Content-Type: the body must be sent as application/json."


async def require_json_body(request: Request) -> None:
    """A route dependency: a body must be sent as ``application/json`` (415 INVALID_REQUEST; a missing
    Content-Type too); no body needs no header. Without it FastAPI reads such a body as bytes and
    answers a 422 about the body's type, which does not name the header."""
    if not await request.body():
        return
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise StarletteHTTPException(415, NOT_JSON_MESSAGE)

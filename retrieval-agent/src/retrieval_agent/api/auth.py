"""Bearer authentication with a constant-time comparison."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from retrieval_agent.api.errors import UnauthorizedError
from retrieval_agent.settings import Settings

_bearer = HTTPBearer(auto_error=False)


async def require_api_key(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    """401 with ``WWW-Authenticate: Bearer`` unless the Bearer token equals API_KEY.

    ``async`` so FastAPI runs it on the event loop instead of a worker thread (it never blocks).
    """
    settings: Settings = request.app.state.settings
    expected = settings.api_key.get_secret_value().encode("utf-8")
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise UnauthorizedError()
    if not hmac.compare_digest(credentials.credentials.encode("utf-8"), expected):
        raise UnauthorizedError()

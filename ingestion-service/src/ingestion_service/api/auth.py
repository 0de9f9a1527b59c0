"""Bearer API_KEY on /api/* and /metrics, compared in constant time."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

_bearer = HTTPBearer(auto_error=False)


async def verify_api_key(request: Request) -> None:
    """401 with ``WWW-Authenticate: Bearer`` for a missing, malformed or wrong token."""
    credentials: HTTPAuthorizationCredentials | None = await _bearer(request)
    expected: bytes = request.app.state.settings.api_key.get_secret_value().encode()
    supplied = credentials.credentials.encode() if credentials is not None else b""
    # Compare bytes so non-ASCII tokens are just wrong, never a 500.
    if credentials is None or not hmac.compare_digest(supplied, expected):
        raise HTTPException(
            status_code=status.HTTP_401_UNAUTHORIZED,
            detail="Invalid API key",
            headers={"WWW-Authenticate": "Bearer"},
        )

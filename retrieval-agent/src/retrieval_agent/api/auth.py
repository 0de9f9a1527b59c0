"""The HTTP edge: Bearer API_KEY on everything but the health probes and API docs, checked before a
body is read (constant time), and MAX_REQUEST_BYTES on every body (``shared_contract.http.EdgeMiddleware``)."""

from __future__ import annotations

from fastapi import FastAPI, Security

from retrieval_agent.settings import Settings
from shared_contract.http import BodyLimit, EdgeMiddleware, bearer_scheme

HEALTH_PATHS = frozenset({"/health", "/health/ready"})

# Routes declare the scheme with this (OpenAPI); the middleware has already checked the key.
BEARER = Security(bearer_scheme)


def public_paths(app: FastAPI) -> frozenset[str]:
    """Served without a key: the probes and FastAPI's own docs pages."""
    docs = {app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url}
    return HEALTH_PATHS | {path for path in docs if path}


def install_edge(app: FastAPI, settings: Settings) -> None:
    """Add the edge middleware to ``app``."""
    limit = BodyLimit(settings.max_request_bytes, "MAX_REQUEST_BYTES")
    app.add_middleware(
        EdgeMiddleware, api_key=settings.api_key, public_paths=public_paths(app), body_limit=lambda _path: limit
    )

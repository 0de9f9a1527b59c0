"""The HTTP edge: Bearer API_KEY on everything but the health probes and API docs, checked before a
body is read (constant time), and MAX_REQUEST_BYTES on every body (``rag_runtime.http.EdgeMiddleware``)."""

from __future__ import annotations

from fastapi import FastAPI, Security

from rag_runtime.http import BodyLimit, EdgeMiddleware, bearer_scheme, public_paths
from retrieval_agent.settings import Settings

# Routes declare the scheme with this (OpenAPI); the middleware has already checked the key.
BEARER = Security(bearer_scheme)


def install_edge(app: FastAPI, settings: Settings) -> None:
    """Add the edge middleware to ``app``."""
    limit = BodyLimit(settings.max_request_bytes, "MAX_REQUEST_BYTES")
    app.add_middleware(
        EdgeMiddleware, api_key=settings.api_key, public_paths=public_paths(app), body_limit=lambda _path: limit
    )

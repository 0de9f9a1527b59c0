"""The HTTP edge: Bearer API_KEY on everything but the health probes, API docs and signed citation
links (whose token is their authorization), checked before a body is read (constant time), and a
body cap on every route (``rag_runtime.http.EdgeMiddleware``)."""

from __future__ import annotations

from fastapi import FastAPI, Security

from ingestion_service.api.uploads import FORM_OVERHEAD_BYTES
from ingestion_service.settings import Settings
from rag_runtime.http import BodyLimit, EdgeMiddleware, bearer_scheme, public_paths
from shared_contract.citations import CITATIONS_PATH

UPLOAD_PATHS = frozenset({"/api/v1/ingest", "/api/v1/extract", "/process", "/api/v1/process"})

# Routes declare the scheme with this (OpenAPI); the middleware has already checked the key.
BEARER = Security(bearer_scheme)


def install_edge(app: FastAPI, settings: Settings) -> None:
    """Add the edge middleware: uploads get MAX_UPLOAD_BYTES (plus the form's overhead), the rest MAX_REQUEST_BYTES.

    The upload routes cap more finely themselves (the file part, the 64 KiB JSON body); this is the
    backstop that keeps a body sent to any route from being read past its cap.
    """
    upload = BodyLimit(settings.max_upload_bytes + FORM_OVERHEAD_BYTES, "MAX_UPLOAD_BYTES")
    other = BodyLimit(settings.max_request_bytes, "MAX_REQUEST_BYTES")

    def limit_for(path: str) -> BodyLimit:
        return upload if path in UPLOAD_PATHS else other

    app.add_middleware(
        EdgeMiddleware,
        api_key=settings.api_key,
        public_paths=public_paths(app),
        body_limit=limit_for,
        public_prefixes=(f"{CITATIONS_PATH}/",),
    )

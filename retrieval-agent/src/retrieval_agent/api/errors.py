"""The one place domain errors become HTTP responses, in the shared flat shape (``rag_runtime.http``).

What each error maps to is ``retrieval_agent/error_table.py``.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from rag_runtime.http import classified_response, install_framework_error_handlers
from retrieval_agent.api.openai_errors import as_openai, is_openai_path
from retrieval_agent.error_table import ERROR_TABLE


def _count(request: Request, code: str) -> None:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None and request.url.path.endswith("/search"):
        metrics.requests.labels(outcome="error", code=code).inc()


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``: the shared framework handlers plus the domain errors."""
    install_framework_error_handlers(app, observe=_count)

    async def on_domain(request: Request, exc: Exception) -> JSONResponse:
        classified = ERROR_TABLE.classify(exc)
        _count(request, classified.code)
        # A typed dependency failure needs its text, not a traceback; a bug needs the traceback.
        return classified_response(request, classified, cause=exc)

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        response = await on_domain(request, exc)
        # Starlette runs this handler in ServerErrorMiddleware, outside the /v1 reshaping middleware.
        return as_openai(response) if is_openai_path(str(request.scope["path"])) else response

    for error_type in ERROR_TABLE.error_types:
        app.add_exception_handler(error_type, on_domain)
    app.add_exception_handler(Exception, on_unexpected)

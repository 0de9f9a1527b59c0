"""The one place typed errors become wire bodies, in the shared flat shape (``shared_contract.http``)."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from ingestion_service.errors import IngestionError, PipelineFailedError
from shared_contract.http import error_response, install_framework_error_handlers

logger = logging.getLogger(__name__)

CLEANUP_NOTE = " Removing this run's partial chunks failed too; the next ingest of this file removes them."


def error_message(exc: IngestionError, *, debug: bool) -> str:
    """The body's ``error``. Only DEBUG=true appends the exception's own text."""
    message = exc.detail()
    if exc.cleanup_failed:
        message += CLEANUP_NOTE
    if debug and str(exc) and str(exc) != message:
        message = f"{message} ({type(exc).__name__}: {exc})"
    return message


def error_status(exc: IngestionError) -> int:
    """The contract's status policy: a request that fails validation is 422 in both services.

    ``InvalidRequestError`` still defaults to 400 in ``errors.py``; this is the one place that maps it.
    """
    return 422 if exc.status_code == 400 else exc.status_code


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``: the shared framework handlers plus the domain errors."""
    install_framework_error_handlers(app)

    def debug_of(request: Request) -> bool:
        return bool(request.app.state.settings.debug)

    async def on_ingestion_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, IngestionError)
        if exc.status_code >= 500 and exc.server_fault:
            logger.error("request failed: %s: %s", exc.code, exc, exc_info=exc)
        return error_response(request, error_status(exc), exc.code, error_message(exc, debug=debug_of(request)))

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error", exc_info=exc)
        error = PipelineFailedError(f"{type(exc).__name__}: {exc}")
        return error_response(request, 500, error.code, error_message(error, debug=debug_of(request)))

    app.add_exception_handler(IngestionError, on_ingestion_error)
    app.add_exception_handler(Exception, on_unexpected)

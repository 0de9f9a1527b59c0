"""The one place typed errors become wire bodies: ``{"status": false, "error", "code"}`` (flat)."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from ingestion_service.errors import IngestionError, InvalidRequestError, PipelineFailedError

logger = logging.getLogger(__name__)

CLEANUP_NOTE = " Removing this run's partial chunks failed too; the next ingest of this file removes them."


def error_body(exc: IngestionError, *, debug: bool) -> dict[str, object]:
    """The flat error body. Only DEBUG=true appends the exception's own text."""
    message = exc.detail()
    if exc.cleanup_failed:
        message += CLEANUP_NOTE
    if debug and str(exc) and str(exc) != message:
        message = f"{message} ({type(exc).__name__}: {exc})"
    return {"status": False, "error": message, "code": exc.code}


def validation_message(exc: RequestValidationError) -> str:
    """Field locations and pydantic's messages; never the submitted values."""
    parts = []
    for error in exc.errors()[:5]:
        location = ".".join(str(part) for part in error.get("loc", ()) if part not in ("body", "query", "path"))
        parts.append(f"{location or 'request'}: {error.get('msg', 'invalid')}")
    return "Invalid request: " + "; ".join(parts)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``."""

    def debug_of(request: Request) -> bool:
        return bool(request.app.state.settings.debug)

    async def on_ingestion_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, IngestionError)
        if exc.status_code >= 500:
            logger.error("request failed: %s: %s", exc.code, exc, exc_info=exc)
        return JSONResponse(status_code=exc.status_code, content=error_body(exc, debug=debug_of(request)))

    async def on_validation_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        error = InvalidRequestError(validation_message(exc))
        return JSONResponse(status_code=400, content=error_body(error, debug=False))

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error", exc_info=exc)
        error = PipelineFailedError(f"{type(exc).__name__}: {exc}")
        return JSONResponse(status_code=500, content=error_body(error, debug=debug_of(request)))

    app.add_exception_handler(IngestionError, on_ingestion_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(Exception, on_unexpected)

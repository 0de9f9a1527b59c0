"""The one place typed errors become wire bodies, in the shared flat shape (``rag_runtime.http``).

What each error maps to (code, status, message, hint) is ``ingestion_service/error_table.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from ingestion_service.error_table import ERROR_TABLE
from ingestion_service.errors import IngestionError, PipelineFailedError
from rag_runtime.http import classified_response, install_framework_error_handlers
from shared_contract import ContractError

CLEANUP_NOTE = " Removing this run's partial chunks failed too; the next ingest of this file removes them."


def error_message(exc: IngestionError, *, debug: bool) -> str:
    """The body's ``error``. Only DEBUG=true appends the exception's own text."""
    message = exc.detail()
    if exc.cleanup_failed:
        message += CLEANUP_NOTE
    if debug and str(exc) and str(exc) != message:
        message = f"{message} ({type(exc).__name__}: {exc})"
    return message


def hint_of(exc: IngestionError) -> str:
    """The body's ``hint``: the error's row's own, else its code's."""
    return ERROR_TABLE.classify(exc).hint


@contextmanager
def store_failures(as_error: Callable[[str], IngestionError]) -> Iterator[None]:
    """The store's typed failures inside the block become ``as_error``: the route names the code."""
    try:
        yield
    except ContractError as exc:
        raise as_error(str(exc)) from exc


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``: the shared framework handlers plus the domain errors."""
    install_framework_error_handlers(app)

    def debug_of(request: Request) -> bool:
        return bool(request.app.state.settings.debug)

    async def on_ingestion_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, IngestionError)
        # Expected 5xx outcomes (timeout, shutdown) need no traceback; the route says what happened.
        message = error_message(exc, debug=debug_of(request))
        return classified_response(request, ERROR_TABLE.classify(exc), cause=exc, message=message)

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        error = PipelineFailedError(f"{type(exc).__name__}: {exc}")
        message = error_message(error, debug=debug_of(request))
        return classified_response(request, ERROR_TABLE.classify(error), cause=exc, message=message)

    app.add_exception_handler(IngestionError, on_ingestion_error)
    app.add_exception_handler(Exception, on_unexpected)

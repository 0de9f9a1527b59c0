"""``python -m ingestion_service``: serve the app with uvicorn on HOST:PORT."""

from __future__ import annotations

import os
import sys

# Haystack decides at import time whether to phone home; a self-hosted service must not
# (an explicit HAYSTACK_TELEMETRY_ENABLED still wins).
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ingestion_service.main import create_app, server_config
from ingestion_service.settings import get_settings
from rag_runtime.http import configure_logging
from shared_contract import ContractConfigError

# docs/contract.md: an invalid setting stops start-up with one line naming the variable.
CONFIG_ERROR_EXIT = 2


class _StartupConfigErrors:
    """Lets a ContractConfigError raised while the lifespan starts (SCRATCH_DIR, OCR_LANGUAGES)
    end start-up quietly, so ``main`` reports it in one line instead of uvicorn's traceback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.error: ContractConfigError | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        held: list[Message] = []

        async def hold_failure(message: Message) -> None:
            # Starlette reports a failed start-up (with the traceback) before it re-raises: wait
            # for the exception to decide what uvicorn gets to log.
            if message["type"] == "lifespan.startup.failed":
                held.append(message)
                return
            await send(message)

        try:
            await self.app(scope, receive, hold_failure)
        except ContractConfigError as exc:
            if not held:
                raise
            self.error = exc
            await send({"type": "lifespan.startup.failed", "message": ""})
        except BaseException:
            for message in held:
                await send(message)
            raise


def main() -> None:
    """Read settings, configure logging, run uvicorn; an invalid setting exits 2 with one line on stderr."""
    try:
        settings = get_settings()
    except ContractConfigError as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(CONFIG_ERROR_EXIT)
    configure_logging(settings.log_level, settings.log_format)
    service = create_app(settings)
    app = _StartupConfigErrors(service)
    config = server_config(service, settings)
    config.app = app
    try:
        uvicorn.Server(config).run()
    except SystemExit:
        # uvicorn exits 3 on any failed start-up; a setting's error gets its own line and status.
        if app.error is None:
            raise
    if app.error is not None:
        sys.stderr.write(f"{app.error}\n")
        sys.exit(CONFIG_ERROR_EXIT)


if __name__ == "__main__":
    main()

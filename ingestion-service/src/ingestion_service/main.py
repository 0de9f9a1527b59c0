"""The FastAPI app factory and its lifespan."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from fastapi import Depends, FastAPI

from ingestion_service.api.auth import verify_api_key
from ingestion_service.api.errors import install_error_handlers
from ingestion_service.api.routes import documents, extract, health, ingest, metrics
from ingestion_service.runtime import ServiceHooks, ServiceRuntime
from ingestion_service.settings import Settings, get_settings

logger = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, *, hooks: ServiceHooks | None = None) -> FastAPI:
    """Build the app. Nothing heavy happens here: models load in the lifespan's background task."""
    resolved = settings if settings is not None else get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = ServiceRuntime(resolved, hooks)
        app.state.runtime = runtime
        # Warm-up runs in the background so /health answers during a slow model load;
        # /health/ready stays 503 until it is done.
        start = asyncio.create_task(runtime.start(), name="ingestion-warm-up")
        try:
            yield
        finally:
            if not start.done():
                start.cancel()
            with suppress(asyncio.CancelledError):
                await start
            await runtime.close()

    app = FastAPI(title="Ingestion Service", version="0.1.0", lifespan=lifespan)
    app.state.settings = resolved
    install_error_handlers(app)
    app.include_router(health.router)
    protected = [Depends(verify_api_key)]
    app.include_router(ingest.router, dependencies=protected)
    app.include_router(extract.router, dependencies=protected)
    app.include_router(documents.router, dependencies=protected)
    app.include_router(metrics.router, dependencies=protected)
    return app

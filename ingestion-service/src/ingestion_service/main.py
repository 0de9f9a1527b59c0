"""The FastAPI app factory and its lifespan."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import uvicorn
from fastapi import FastAPI
from prometheus_client import ProcessCollector

from ingestion_service.api.auth import BEARER, install_edge
from ingestion_service.api.errors import install_error_handlers
from ingestion_service.api.routes import (
    citations,
    collections,
    documents,
    extract,
    health,
    ingest,
    jobs,
    loader,
    metrics,
    reindex,
    sources,
    web_loader,
)
from ingestion_service.citations import CitationPages
from ingestion_service.jobs.ingest import JobRegistry
from ingestion_service.jobs.reindex import ReindexManager
from ingestion_service.runtime import ABORT_WAIT_SECONDS, ServiceHooks, ServiceRuntime
from ingestion_service.settings import Settings, get_settings
from ingestion_service.sources.manager import SourceManager
from rag_runtime.http import ERROR_RESPONSES

logger = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, *, hooks: ServiceHooks | None = None) -> FastAPI:
    """Build the app. Nothing heavy happens here: models load in the lifespan's background task."""
    resolved = settings if settings is not None else get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = ServiceRuntime(resolved, hooks)
        app.state.runtime = runtime
        app.state.citation_pages = CitationPages(runtime)
        # The app's own registry has no process series by default: memory, CPU seconds, open fds.
        ProcessCollector(registry=runtime.metrics.registry)
        await runtime.scratch.claim()
        # Async ingests are no requests the server waits for: they get SHUTDOWN_GRACE_SECONDS at exit.
        jobs = JobRegistry(
            max_jobs=resolved.ingest_jobs_max,
            ttl_seconds=resolved.ingest_job_ttl_seconds,
            timeout_seconds=resolved.ingest_timeout_seconds,
            metrics=runtime.metrics,
            clock=runtime.hooks.job_clock or time.monotonic,
        )
        app.state.jobs = jobs
        manager = ReindexManager(runtime)
        app.state.reindex = manager
        # Unfinished reindex jobs of an earlier run go on; each waits until the service is ready.
        await manager.resume()
        # Registered sources are loaded; a sync a restart interrupted runs again once the service is ready.
        source_manager = SourceManager(runtime)
        app.state.sources = source_manager
        await source_manager.start()
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
            # Before the store closes: running reindex jobs stop and resume at the next start; async
            # ingests get the grace period, then are aborted (their previous versions kept).
            await manager.shutdown()
            await source_manager.shutdown()
            await jobs.shutdown(grace_seconds=resolved.shutdown_grace_seconds, abort_wait_seconds=ABORT_WAIT_SECONDS)
            await runtime.close()

    app = FastAPI(title="Ingestion Service", version="0.1.0", lifespan=lifespan)
    app.state.settings = resolved
    install_error_handlers(app)
    install_edge(app, resolved)
    app.include_router(health.router)
    # Opened without a key: the signed token authorizes the request (the edge lets the prefix through).
    app.include_router(citations.router, responses=ERROR_RESPONSES)
    routers = (
        ingest.router,
        jobs.router,
        extract.router,
        loader.router,
        web_loader.router,
        documents.router,
        collections.router,
        reindex.router,
        sources.router,
        metrics.router,
    )
    for router in routers:
        app.include_router(router, dependencies=[BEARER], responses=ERROR_RESPONSES)
    return app


def server_config(app: FastAPI, settings: Settings) -> uvicorn.Config:
    """uvicorn's configuration for ``app``.

    On SIGTERM uvicorn stops accepting, waits SHUTDOWN_GRACE_SECONDS for running requests, then
    cancels them; a cancelled ingest aborts its run and keeps the previous version.
    """
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=settings.shutdown_grace_seconds,
        # uvicorn's loggers (access lines too) go to the root handler: same format, request ids.
        log_config=None,
    )

"""Dependency aliases: routes reach lifespan-held objects only through these."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ingestion_service.errors import InvalidRequestError
from ingestion_service.jobs.ingest import JobRegistry
from ingestion_service.jobs.reindex import ReindexManager
from ingestion_service.metrics import IngestMetrics
from ingestion_service.runtime import ServiceRuntime
from ingestion_service.settings import Settings
from ingestion_service.sources.manager import SourceManager
from shared_contract.attributes import shown_key


def get_runtime(request: Request) -> ServiceRuntime:
    """The app's runtime (built in the lifespan)."""
    runtime: ServiceRuntime = request.app.state.runtime
    return runtime


def get_jobs(request: Request) -> JobRegistry:
    """The app's async ingest jobs (built in the lifespan)."""
    jobs: JobRegistry = request.app.state.jobs
    return jobs


def get_reindex(request: Request) -> ReindexManager:
    """The app's reindex jobs (built in the lifespan)."""
    manager: ReindexManager = request.app.state.reindex
    return manager


def get_sources(request: Request) -> SourceManager:
    """The app's registered sources (built in the lifespan)."""
    sources: SourceManager = request.app.state.sources
    return sources


def get_settings_dep(request: Request) -> Settings:
    """The app's settings."""
    settings: Settings = request.app.state.settings
    return settings


def get_metrics(request: Request) -> IngestMetrics:
    """The app's metrics registry."""
    return get_runtime(request).metrics


def reject_repeated_query_params(request: Request) -> None:
    """A repeated query key is a 400: Starlette keeps only the last value, which once picked another tenant."""
    keys = [key for key, _ in request.query_params.multi_items()]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        names = ", ".join(shown_key(key) for key in repeated[:10])
        raise InvalidRequestError(f"Invalid request: query parameter(s) {names} given more than once.")


RuntimeDep = Annotated[ServiceRuntime, Depends(get_runtime)]
JobsDep = Annotated[JobRegistry, Depends(get_jobs)]
ReindexDep = Annotated[ReindexManager, Depends(get_reindex)]
SourcesDep = Annotated[SourceManager, Depends(get_sources)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
MetricsDep = Annotated[IngestMetrics, Depends(get_metrics)]

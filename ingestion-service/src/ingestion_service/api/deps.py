"""Dependency aliases: routes reach lifespan-held objects only through these."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ingestion_service.metrics import IngestMetrics
from ingestion_service.runtime import ServiceRuntime
from ingestion_service.settings import Settings


def get_runtime(request: Request) -> ServiceRuntime:
    """The app's runtime (built in the lifespan)."""
    runtime: ServiceRuntime = request.app.state.runtime
    return runtime


def get_settings_dep(request: Request) -> Settings:
    """The app's settings."""
    settings: Settings = request.app.state.settings
    return settings


def get_metrics(request: Request) -> IngestMetrics:
    """The app's metrics registry."""
    return get_runtime(request).metrics


RuntimeDep = Annotated[ServiceRuntime, Depends(get_runtime)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
MetricsDep = Annotated[IngestMetrics, Depends(get_metrics)]

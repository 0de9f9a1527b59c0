"""Annotated dependency aliases; lifespan-held objects are reached only through these."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from retrieval_agent.adapters.qdrant import QdrantSearch
from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.search.pipeline import LinearSearch
from retrieval_agent.settings import Settings


def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_search(request: Request) -> LinearSearch:
    search: LinearSearch = request.app.state.search
    return search


def get_qdrant(request: Request) -> QdrantSearch:
    qdrant: QdrantSearch = request.app.state.qdrant
    return qdrant


def get_metrics(request: Request) -> SearchMetrics:
    metrics: SearchMetrics = request.app.state.metrics
    return metrics


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
SearchDep = Annotated[LinearSearch, Depends(get_search)]
QdrantDep = Annotated[QdrantSearch, Depends(get_qdrant)]
MetricsDep = Annotated[SearchMetrics, Depends(get_metrics)]

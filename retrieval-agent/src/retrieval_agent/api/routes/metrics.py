"""GET /metrics: Prometheus text, Bearer-authenticated; 404 when METRICS_ENABLED=false."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from rag_runtime.http import ERROR_RESPONSES, PROMETHEUS_TEXT_RESPONSE
from retrieval_agent.api.auth import BEARER
from retrieval_agent.api.deps import MetricsDep, SettingsDep

router = APIRouter(tags=["metrics"], dependencies=[BEARER], responses=ERROR_RESPONSES)


@router.get("/metrics", response_model=None, responses=PROMETHEUS_TEXT_RESPONSE)
async def metrics(settings: SettingsDep, metrics: MetricsDep) -> Response:
    """Stage timings, path taken, rerank failures, query-generation fallbacks."""
    if not settings.metrics_enabled:
        raise HTTPException(status_code=404, detail="metrics disabled")
    return Response(content=metrics.render(), media_type=CONTENT_TYPE_LATEST)

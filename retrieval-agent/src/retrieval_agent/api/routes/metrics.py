"""GET /metrics: Prometheus text, Bearer-authenticated; 404 when METRICS_ENABLED=false."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from retrieval_agent.api.auth import require_api_key
from retrieval_agent.api.deps import MetricsDep, SettingsDep

router = APIRouter(tags=["metrics"], dependencies=[Depends(require_api_key)])


@router.get("/metrics", response_model=None)
async def metrics(settings: SettingsDep, metrics: MetricsDep) -> Response:
    """Stage timings, path taken, rerank failures, query-generation fallbacks."""
    if not settings.metrics_enabled:
        return JSONResponse(status_code=404, content={"detail": "metrics disabled"})
    return Response(content=metrics.render(), media_type=CONTENT_TYPE_LATEST)

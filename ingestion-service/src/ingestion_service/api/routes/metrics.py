"""GET /metrics: Prometheus text, behind the API key; 404 when METRICS_ENABLED=false."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from ingestion_service.api.deps import RuntimeDep
from rag_runtime.http import PROMETHEUS_TEXT_RESPONSE

router = APIRouter(tags=["metrics"])


@router.get("/metrics", response_model=None, responses=PROMETHEUS_TEXT_RESPONSE)
async def metrics(runtime: RuntimeDep) -> Response:
    """The app's own registry (several apps in one process never share series)."""
    if not runtime.settings.metrics_enabled:
        raise HTTPException(status_code=404, detail="metrics disabled")
    return Response(content=runtime.metrics.render(), media_type=CONTENT_TYPE_LATEST)

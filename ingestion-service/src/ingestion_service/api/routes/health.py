"""GET /health (liveness) and GET /health/ready (readiness); both unauthenticated."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ingestion_service.api.deps import RuntimeDep

router = APIRouter(tags=["health"])


@router.get("/health")
async def health() -> dict[str, str]:
    """200 whenever the process serves requests (never touches a dependency)."""
    return {"status": "ok"}


@router.get("/health/ready")
async def ready(runtime: RuntimeDep) -> JSONResponse:
    """503 until the pipeline is warm and the collection is reachable, bootstrapped and matches the contract.

    The body also says which OCR languages are in use and installed. Vision endpoints and
    Gotenberg are not probed: a document that needs them fails on its own, the service stays ready.
    """
    readiness = runtime.readiness
    collection_ok = await runtime.ensure_collection()
    # A failed warm-up is retried here, as the bootstrap is (an endpoint that came up late).
    pipeline_ok = await runtime.ensure_pipeline()
    problems: dict[str, str] = {}
    ocr = runtime.ocr.report()
    if not pipeline_ok:
        problems["pipeline"] = readiness.pipeline_error or "warming up"
    if not collection_ok:
        problems["qdrant"] = readiness.collection_error or "not ready"
    if problems:
        return JSONResponse(status_code=503, content={"status": "error", "detail": problems, "ocr": ocr})
    return JSONResponse(status_code=200, content={"status": "ok", "ocr": ocr})

"""Liveness and readiness probes (unauthenticated)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from retrieval_agent.api.deps import StoreDep
from retrieval_agent.error_table import classify
from shared_contract import ContractError

router = APIRouter(tags=["health"])


@router.get("/health")
async def health() -> dict[str, str]:
    """200 whenever the process serves requests."""
    return {"status": "ok"}


@router.get("/health/ready", response_model=None)
async def ready(store: StoreDep) -> dict[str, Any] | JSONResponse:
    """200 once the store answers and the collection's manifest matches this service; else 503 naming why.

    Evaluated on every probe (a few cheap calls), so a re-created collection is noticed.
    """
    try:
        manifest = await store.verify()
        capabilities = await store.capabilities()
    except ContractError as exc:
        _, code, _ = classify(exc)
        detail = str(exc) if code != "QDRANT_UNAVAILABLE" else f"qdrant unreachable: {exc}"
        if code == "COLLECTION_MISSING":
            detail = f"{exc} (collection not created yet: start ingestion-service once)"
        return JSONResponse(status_code=503, content={"status": "error", "code": code, "detail": detail})
    return {
        "status": "ok",
        "collection": store.collection,
        "dense_model": manifest.dense_model,
        "sparse": capabilities.has_sparse,
        "lexical": bool(capabilities.lexical_fields),
    }

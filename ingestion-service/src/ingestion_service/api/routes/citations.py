"""GET /api/v1/citations/{token}/page.png and /original: what a signed citation link opens, without a
Bearer key (the token is the authorization; ``shared_contract.citations``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import FileResponse, Response
from starlette.background import BackgroundTask

from ingestion_service.api.deps import RuntimeDep
from ingestion_service.api.errors import store_failures
from ingestion_service.citations import CitationPages
from ingestion_service.errors import IngestionError, PipelineFailedError
from ingestion_service.intake.handoff import require_qdrant
from shared_contract.citations import CITATIONS_PATH, MAX_TOKEN_CHARS, ORIGINAL_SUFFIX, PAGE_IMAGE_SUFFIX, PageLink
from shared_contract.error_body import ErrorBody

router = APIRouter(prefix=CITATIONS_PATH, tags=["citations"])

TokenPath = Annotated[str, Path(max_length=MAX_TOKEN_CHARS, description="The signed link's token.")]
_REFUSALS: dict[int | str, dict[str, Any]] = {
    403: {
        "model": ErrorBody,
        "description": "CITATION_LINK_INVALID: expired, tampered with or signed under another key.",
    },
    404: {
        "model": ErrorBody,
        "description": "CITATION_GONE: the passage or its original is no longer stored; CITATIONS_DISABLED: "
        "no CITATION_SIGNING_KEY.",
    },
}
# A browser may keep a page image at most this long, and never past the link's expiry.
_MAX_AGE_SECONDS = 3600


def get_pages(request: Request) -> CitationPages:
    """The app's citation pages (built in the lifespan)."""
    pages: CitationPages = request.app.state.citation_pages
    return pages


PagesDep = Annotated[CitationPages, Depends(get_pages)]


def _private_cache(link: PageLink) -> dict[str, str]:
    seconds = max(0, min(_MAX_AGE_SECONDS, link.expires_at - int(time.time())))
    return {"Cache-Control": f"private, max-age={seconds}"}


@contextmanager
def _counted(runtime: RuntimeDep, kind: str) -> Iterator[None]:
    """``citation_pages_total``: ``ok``, or the code of the typed error the block raised."""
    try:
        yield
    except IngestionError as exc:
        runtime.metrics.citation_pages.labels(kind=kind, outcome=exc.code).inc()
        raise
    runtime.metrics.citation_pages.labels(kind=kind, outcome="ok").inc()


@router.get(
    f"/{{token}}/{PAGE_IMAGE_SUFFIX}",
    response_class=Response,
    responses={200: {"content": {"image/png": {}}, "description": "The page, the passage highlighted."}, **_REFUSALS},
)
async def page_image(
    token: TokenPath,
    runtime: RuntimeDep,
    pages: PagesDep,
    width: Annotated[int, Query(ge=200, le=4000, description="The image's width in pixels.")] = 1200,
) -> Response:
    """The cited page as a PNG with the passage's regions highlighted (a page without regions: none)."""
    with _counted(runtime, "page"):
        link = pages.verify(token)
        await require_qdrant(runtime)
        with store_failures(PipelineFailedError):
            image = await pages.page_image(link, width)
    return Response(image, media_type="image/png", headers=_private_cache(link))


@router.get(
    f"/{{token}}/{ORIGINAL_SUFFIX}",
    response_class=FileResponse,
    responses={
        200: {"description": "The original file (a PDF opens at the page the link's #page names)."},
        **_REFUSALS,
    },
)
async def original(token: TokenPath, runtime: RuntimeDep, pages: PagesDep) -> FileResponse:
    """The original the cited passage was cut from, shown inline."""
    with _counted(runtime, "original"):
        link = pages.verify(token)
        await require_qdrant(runtime)
        with store_failures(PipelineFailedError):
            staged = await pages.original(link)
    return FileResponse(
        staged.path,
        media_type=staged.media_type,
        filename=staged.filename,
        content_disposition_type="inline",
        headers=_private_cache(link),
        background=BackgroundTask(runtime.scratch.remove_workdir, staged.workdir),
    )

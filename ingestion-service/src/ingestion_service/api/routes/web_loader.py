"""POST /process: stock Open WebUI's external web loader (WEB_LOADER_ENGINE=external).

Open WebUI 0.12.4 (``retrieval/loaders/external_web.py``) POSTs ``{"urls": [...]}`` (20 at most) to
EXTERNAL_WEB_LOADER_URL with ``Authorization: Bearer <EXTERNAL_WEB_LOADER_API_KEY>`` and reads a
list of ``{page_content, metadata}``; web search keeps only the results whose link is a returned
``metadata.source``. Each URL is fetched through the URL fetcher (``adapters/url_fetcher.py``: public
hosts only, size, time and redirect limits, the Content-Type checked) and extracted as the document
loader extracts an upload (``intake/extract_file.py``); nothing is stored.

A URL that fails is left out of the answer and logged (WARNING, with its code): Open WebUI drops a
whole batch on a non-2xx answer, so one dead link must not cost the others. When every URL fails
the answer is the first one's error, so a single-URL request says why.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from fastapi import APIRouter, Request
from pydantic import ValidationError

from ingestion_service.api.deps import RuntimeDep
from ingestion_service.api.models import WebLoaderRequest
from ingestion_service.api.openapi import WEB_LOADER_BODY
from ingestion_service.api.routes.loader import LOADER_PATHS, LoadedPage
from ingestion_service.api.uploads import read_json_object
from ingestion_service.api.validation import invalid_request
from ingestion_service.errors import IngestionError
from ingestion_service.intake.extract_file import extract_file, page_metadata
from ingestion_service.intake.staging import fetch_url, make_workdir, remove_workdir
from ingestion_service.runtime import ServiceRuntime
from shared_contract.error_body import ErrorBody
from shared_contract.redact import redact_url

logger = logging.getLogger(__name__)

router = APIRouter(tags=["open-webui loader"])

# The edge caps this path at MAX_UPLOAD_BYTES (its PUT is an upload); 20 URLs need far less.
MAX_BODY_BYTES = 64 * 1024
# URLs fetched and extracted at once per request (extraction also waits for an INGEST_CONCURRENCY slot).
CONCURRENT_URLS = 4
FINAL_URL_KEY = "final_url"
# When every URL fails, the answer is the first failure's: these two beside the shared statuses.
_RESPONSES: dict[int | str, dict[str, Any]] = {
    502: {"model": ErrorBody, "description": "URL_FETCH_FAILED: no URL could be fetched."},
    504: {"model": ErrorBody, "description": "URL_FETCH_TIMEOUT: no URL was fetched within URL_FETCH_TIMEOUT_SECONDS."},
}


async def _load_url(runtime: ServiceRuntime, url: str) -> list[LoadedPage]:
    workdir = await make_workdir(runtime)
    try:
        fetched = await fetch_url(runtime, url, workdir)
        extracted = await extract_file(runtime, fetched.path, fetched.filename)
    finally:
        await remove_workdir(runtime, workdir)
    where = {"source": url} if fetched.final_url == url else {"source": url, FINAL_URL_KEY: fetched.final_url}
    return [
        LoadedPage(page_content=document.content or "", metadata={**page_metadata(document, extracted.engine), **where})
        for document in extracted.documents
    ]


async def _load_all(runtime: ServiceRuntime, urls: list[str]) -> list[LoadedPage]:
    results: list[list[LoadedPage] | IngestionError | None] = [None] * len(urls)
    gate = anyio.Semaphore(CONCURRENT_URLS)

    async def one(index: int, url: str) -> None:
        async with gate:
            try:
                results[index] = await _load_url(runtime, url)
            except IngestionError as exc:
                results[index] = exc

    async with anyio.create_task_group() as group:
        for index, url in enumerate(urls):
            group.start_soon(one, index, url)
    pages: list[LoadedPage] = []
    failures: list[IngestionError] = []
    for url, result in zip(urls, results, strict=True):
        if isinstance(result, IngestionError):
            failures.append(result)
            runtime.metrics.web_loader_urls.labels(outcome="error", code=result.code).inc()
            logger.warning(
                "web loader: %s left out (%s: %s)", redact_url(url), result.code, result, extra={"code": result.code}
            )
        elif result is not None:
            runtime.metrics.web_loader_urls.labels(outcome="success", code="").inc()
            pages.extend(result)
    if failures and len(failures) == len(urls):
        raise failures[0]
    return pages


@router.post(LOADER_PATHS[0], response_model=list[LoadedPage], openapi_extra=WEB_LOADER_BODY, responses=_RESPONSES)
@router.post(
    LOADER_PATHS[1],
    response_model=list[LoadedPage],
    openapi_extra=WEB_LOADER_BODY,
    responses=_RESPONSES,
    include_in_schema=False,
)
async def load_urls(request: Request, runtime: RuntimeDep) -> list[LoadedPage]:
    """``{"urls": [...]}`` in, each page's text out: ``{page_content, metadata}`` per page (or document),
    ``metadata.source`` the URL as sent; a URL that fails is left out (all failing: the first's error)."""
    data = await read_json_object(request, max_bytes=MAX_BODY_BYTES, advice="send at most 20 URLs per request")
    try:
        body = WebLoaderRequest.model_validate(data)
    except ValidationError as exc:
        raise invalid_request(exc) from exc
    return await _load_all(runtime, body.urls)

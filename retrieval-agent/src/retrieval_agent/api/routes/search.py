"""POST /search (and //search: Open WebUI appends /search to a base URL ending in a slash)."""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import APIRouter, Response

from retrieval_agent.api.auth import BEARER
from retrieval_agent.api.deps import MetricsDep, SearchDep
from retrieval_agent.api.leniency import ADJUSTED_HEADER, adjust
from retrieval_agent.api.models import SearchRequest, SearchResponse
from shared_contract.http import ERROR_RESPONSES

logger = logging.getLogger(__name__)

router = APIRouter(tags=["search"], dependencies=[BEARER], responses=ERROR_RESPONSES)


def public_meta(meta: dict[str, Any], fields: frozenset[str] | None) -> dict[str, Any]:
    """What the browser gets: the citation keys (SEARCH_METADATA_FIELDS), not the uploader or versions."""
    if fields is None:
        return meta
    return {key: value for key, value in meta.items() if key in fields}


async def search(body: SearchRequest, response: Response, search: SearchDep, metrics: MetricsDep) -> SearchResponse:
    """Hybrid search over the tenants in ``collection_names``; one merged result list by default."""
    started = time.perf_counter()
    adjusted = adjust(
        body.queries,
        None if body.messages is None else [(message.role, message.content) for message in body.messages],
        body.k,
    )
    if adjusted.changes:
        response.headers[ADJUSTED_HEADER] = ",".join(adjusted.changes)
        for change in adjusted.changes:
            metrics.request_adjustments.labels(adjustment=change).inc()
        logger.info("search request adjusted to the limits: %s", ",".join(adjusted.changes))
    outcome = await search.search(
        queries=adjusted.queries,
        messages=adjusted.messages,
        collection_names=body.collection_names,
        k=adjusted.k,
        template=body.retrieval_query_generation_prompt_template,
    )
    elapsed = time.perf_counter() - started
    metrics.duration.observe(elapsed)
    metrics.requests.labels(outcome="ok", code="").inc()
    metrics.results_returned.observe(len(outcome.result_sets[0]) if outcome.result_sets else 0)
    logger.info(
        "search: %d queries (%s), paths=%s, hits=%s, %.1f ms",
        len(outcome.resolved.queries),
        outcome.resolved.source,
        ",".join(outcome.paths) or "-",
        [len(hits) for hits in outcome.result_sets],
        elapsed * 1000,
    )
    fields = search.settings.public_metadata_fields
    return SearchResponse(
        documents=[[hit.content for hit in hits] for hits in outcome.result_sets],
        metadatas=[[public_meta(hit.meta, fields) for hit in hits] for hits in outcome.result_sets],
        distances=[[hit.relevance for hit in hits] for hits in outcome.result_sets],
    )


router.add_api_route("/search", search, methods=["POST"], response_model=SearchResponse)
router.add_api_route("//search", search, methods=["POST"], response_model=SearchResponse, include_in_schema=False)

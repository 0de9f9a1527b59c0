"""POST /search (and //search: Open WebUI appends /search to a base URL ending in a slash)."""

from __future__ import annotations

import logging
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Response

from rag_runtime.http import ERROR_RESPONSES, require_json_body
from retrieval_agent.api.auth import BEARER
from retrieval_agent.api.deps import AgentDep, CitationsDep, MetricsDep, SearchDep
from retrieval_agent.api.models import SearchRequest, SearchResponse
from retrieval_agent.errors import AgenticDisabledError
from retrieval_agent.search.citations import CitationLinks, with_links
from retrieval_agent.search.leniency import ADJUSTED_HEADER, adjust
from retrieval_agent.search.postprocess import Hit
from retrieval_agent.search.scope import request_conditions

logger = logging.getLogger(__name__)

router = APIRouter(tags=["search"], dependencies=[BEARER, Depends(require_json_body)], responses=ERROR_RESPONSES)

# Agentic mode: how the run ended, and (when the linear pipeline answered instead) why.
AGENT_OUTCOME_HEADER = "X-RAG-Agent-Outcome"
AGENT_FALLBACK_HEADER = "X-RAG-Agent-Fallback"
# Opt-in (``X-RAG-Debug: steps``, sent by ``rag search --agentic``, never by Open WebUI): the agent's
# steps as JSON in a response header, so the body keeps Open WebUI's shape.
DEBUG_HEADER = "X-RAG-Debug"
AGENT_STEPS_HEADER = "X-RAG-Agent-Steps"
# ASCII JSON, so characters are bytes: well within the 32 KiB header limits of common proxies.
_MAX_STEPS_HEADER = 16_000


def public_meta(meta: dict[str, Any], fields: frozenset[str] | None) -> dict[str, Any]:
    """What the browser gets: the citation keys (SEARCH_METADATA_FIELDS), not the uploader or versions."""
    if fields is None:
        return meta
    return {key: value for key, value in meta.items() if key in fields}


def hit_meta(hit: Hit, fields: frozenset[str] | None, citations: CitationLinks | None) -> dict[str, Any]:
    """A hit's returned metadata: its public keys, then its citation links (after the filtering: they are
    no stored keys, and SEARCH_METADATA_FIELDS never drops them)."""
    return with_links(public_meta(hit.meta, fields), None if citations is None else citations.for_hit(hit))


async def search(
    body: SearchRequest,
    response: Response,
    search: SearchDep,
    agent: AgentDep,
    metrics: MetricsDep,
    citations: CitationsDep,
    x_rag_debug: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> SearchResponse:
    """Hybrid search over the tenants in ``collection_names``; one merged result list by default.

    ``filter`` narrows every retrieval (linear or agentic) to matching documents of those tenants.

    With ENABLE_AGENTIC_RAG=true the agentic loop answers (same response shape; headers say how it ended),
    unless ``mode`` is ``linear``.

    With CITATION_SIGNING_KEY and CITATION_BASE_URL set, the metadata of each passage of a PDF or an image
    carries ``citation_url`` (its page as a PNG, the passage highlighted) and ``original_url`` (the original
    at that page): signed links to the ingestion service that open without a key until they expire.
    """
    started = time.perf_counter()
    # Before any work: an undeclared attribute or a mistyped condition is a 422 naming the key.
    conditions = request_conditions(body.filter, search.settings.attribute_types)
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
    if body.mode == "agentic" and agent is None:
        raise AgenticDisabledError(
            "Invalid request: mode 'agentic' needs the agent (ENABLE_AGENTIC_RAG=true on the retrieval agent); "
            "send mode 'linear' or leave it out."
        )
    result_sets: list[list[Hit]]
    if agent is not None and body.mode != "linear":
        run = await agent.run(
            queries=adjusted.queries,
            messages=adjusted.messages,
            collection_names=body.collection_names,
            k=adjusted.k,
            conditions=conditions,
        )
        result_sets = run.result_sets
        response.headers[AGENT_OUTCOME_HEADER] = run.outcome
        if run.fallback_reason is not None:
            response.headers[AGENT_FALLBACK_HEADER] = run.fallback_reason
        if x_rag_debug is not None and "steps" in x_rag_debug.casefold():
            response.headers[AGENT_STEPS_HEADER] = run.steps_json(max_chars=_MAX_STEPS_HEADER)
        description = f"agent {run.outcome}, {run.iterations} rounds, paths={','.join(run.paths) or '-'}"
    else:
        outcome = await search.search(
            queries=adjusted.queries,
            messages=adjusted.messages,
            collection_names=body.collection_names,
            k=adjusted.k,
            template=body.retrieval_query_generation_prompt_template,
            conditions=conditions,
        )
        result_sets = outcome.result_sets
        description = f"{len(outcome.resolved.queries)} queries ({outcome.resolved.source}), paths={','.join(outcome.paths) or '-'}"
    elapsed = time.perf_counter() - started
    metrics.duration.observe(elapsed)
    metrics.requests.labels(outcome="ok", code="").inc()
    metrics.results_returned.observe(len(result_sets[0]) if result_sets else 0)
    logger.info("search: %s, hits=%s, %.1f ms", description, [len(hits) for hits in result_sets], elapsed * 1000)
    fields = search.settings.public_metadata_fields
    return SearchResponse(
        documents=[[hit.content for hit in hits] for hits in result_sets],
        metadatas=[[hit_meta(hit, fields, citations) for hit in hits] for hits in result_sets],
        distances=[[hit.relevance for hit in hits] for hits in result_sets],
    )


router.add_api_route("/search", search, methods=["POST"], response_model=SearchResponse)
router.add_api_route("//search", search, methods=["POST"], response_model=SearchResponse, include_in_schema=False)

"""Every other /v1 path (``/v1/embeddings``, ``/v1/completions``, ``/v1/audio/speech``, ...) passed to the
chat upstream as it came, behind the same API key as /v1/chat (``chat/passthrough.py``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from fastapi.routing import APIRoute
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import Scope

from retrieval_agent.api.auth import BEARER
from retrieval_agent.api.deps import MetricsDep, PassThroughDep
from retrieval_agent.chat.errors import ChatError, chat_disabled
from retrieval_agent.chat.models import OpenAIErrorBody

# Served here (api/routes/chat.py): another method on them is a 405, not the upstream's.
_OWN_PATHS = frozenset({"chat/completions", "models"})
_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
_STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class _OtherPathsRoute(APIRoute):
    """The catch-all, matching no path the chat routes serve."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is not Match.NONE and child.get("path_params", {}).get("path") in _OWN_PATHS:
            return Match.NONE, {}
        return match, child


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": OpenAIErrorBody, "description": "invalid_request: a path this proxy does not pass on."},
    401: {"model": OpenAIErrorBody, "description": "UNAUTHORIZED: missing or wrong API key."},
    413: {"model": OpenAIErrorBody, "description": "The body is larger than MAX_REQUEST_BYTES."},
    502: {
        "model": OpenAIErrorBody,
        "description": "upstream_unavailable; upstream_response_too_large (past CHAT_MAX_UPSTREAM_BYTES).",
    },
    503: {"model": OpenAIErrorBody, "description": "chat_disabled (CHAT_UPSTREAM_BASE_URL unset)."},
    504: {"model": OpenAIErrorBody, "description": "upstream_timeout (CHAT_TIMEOUT)."},
    "default": {"description": "The upstream's own answer, status and body as it sent them."},
}

router = APIRouter(prefix="/v1", tags=["chat"], dependencies=[BEARER], route_class=_OtherPathsRoute)


@router.api_route("/{path:path}", methods=_METHODS, responses=_ERRORS, response_model=None)
async def pass_through(path: str, request: Request, passthrough: PassThroughDep, metrics: MetricsDep) -> Response:
    """Passed to CHAT_UPSTREAM_BASE_URL with its method, query and body, CHAT_UPSTREAM_API_KEY as the key;
    the upstream's status, body and content type come back (an SSE answer streamed as it arrives)."""
    if passthrough is None:
        metrics.proxy_requests.labels(outcome="disabled").inc()
        raise chat_disabled()
    try:
        answer = await passthrough.send(
            request.method, path, query=request.url.query, headers=request.headers, body=await request.body()
        )
    except ChatError as exc:
        metrics.proxy_requests.labels(outcome=exc.outcome).inc()
        raise
    metrics.proxy_requests.labels(outcome="ok" if answer.status < 400 else "upstream_status").inc()
    if answer.chunks is not None:
        return StreamingResponse(
            answer.chunks, status_code=answer.status, headers={**answer.headers, **_STREAM_HEADERS}
        )
    return Response(answer.body, status_code=answer.status, headers=answer.headers)

"""POST /v1/chat/completions and GET /v1/models: the OpenAI-compatible chat (``retrieval_agent.chat``).

Errors on these paths are OpenAI-shaped (``api/openai_errors.py``).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.responses import Response

from rag_runtime.http import require_json_body
from retrieval_agent.api.auth import BEARER
from retrieval_agent.api.deps import ChatDep, MetricsDep, SettingsDep
from retrieval_agent.chat.chunks import event_stream_schema
from retrieval_agent.chat.errors import chat_disabled
from retrieval_agent.chat.memory import speaker_of
from retrieval_agent.chat.models import ChatCompletion, ChatCompletionRequest, ModelList, OpenAIErrorBody

_ERRORS: dict[int | str, dict[str, object]] = {
    status: {"model": OpenAIErrorBody, "description": description}
    for status, description in {
        400: "invalid_request_error: the body or a knowledge-base name is invalid.",
        401: "UNAUTHORIZED: missing or wrong API key.",
        404: "knowledge_base_not_found: outside CHAT_KNOWLEDGE_BASES.",
        413: "The body is larger than MAX_REQUEST_BYTES.",
        502: "upstream_unavailable: the chat model could not be reached; upstream_response_too_large: its answer "
        "went past CHAT_MAX_UPSTREAM_BYTES.",
        503: "chat_disabled (CHAT_UPSTREAM_BASE_URL unset), or the store is unavailable.",
        504: "upstream_timeout.",
    }.items()
}
# An upstream error comes back with the upstream's own status (429, 401, ...).
_ERRORS["default"] = {
    "model": OpenAIErrorBody,
    "description": "upstream_error, with the upstream's status (and its Retry-After, x-ratelimit-reset-* headers).",
}

router = APIRouter(prefix="/v1", tags=["chat"], dependencies=[BEARER, Depends(require_json_body)], responses=_ERRORS)

# Proxies must pass each event on at once (nginx buffers otherwise).
_STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@router.post(
    "/chat/completions",
    response_model=None,
    responses={
        200: {
            "model": ChatCompletion,
            "description": "JSON, or SSE chunks when stream=true.",
            "content": {"text/event-stream": {"schema": event_stream_schema()}},
        }
    },
)
async def chat_completions(
    body: ChatCompletionRequest, request: Request, chat: ChatDep, metrics: MetricsDep, settings: SettingsDep
) -> Response:
    """OpenAI chat completions, answered after a search of the knowledge bases named by ``collection_names``
    or the model's ``@kb1+kb2`` suffix; the passages used come back in ``rag_sources``. With ENABLE_MEMORY,
    the user named by ``user`` (or MEMORY_USER_HEADER) gets their remembered facts (``memory_sources``)."""
    if chat is None:
        metrics.chat_requests.labels(outcome="disabled", stream="true" if body.stream else "false").inc()
        raise chat_disabled()
    speaker = speaker_of(body, request.headers, user_header=settings.memory_user_header) if chat.memory else None
    if body.stream:
        return StreamingResponse(
            await chat.stream(body, speaker), media_type="text/event-stream", headers=_STREAM_HEADERS
        )
    completion = await chat.complete(body, speaker)
    return JSONResponse(completion.model_dump())


@router.get("/models")
async def list_models(chat: ChatDep) -> ModelList:
    """The chat models a person can choose from, and knowledge bases as ``<model>@<kb>`` (``chat/catalog.py``)."""
    if chat is None:
        raise chat_disabled()
    return await chat.models()

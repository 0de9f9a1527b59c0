"""The other /v1 routes (``/v1/embeddings``, ``/v1/audio/speech``, ...) passed to CHAT_UPSTREAM_BASE_URL as a
proxy does: the only code that sends them.

The request goes with its method, query, body and content headers, and CHAT_UPSTREAM_API_KEY as its
Bearer key (never the client's, which is this service's API_KEY). The upstream's status, body and
content headers come back as they came, errors included. Its answer is read within CHAT_MAX_UPSTREAM_BYTES
and CHAT_TIMEOUT (the whole call): an SSE answer is passed on as it arrives, any other is read whole first,
so that a failure there is an OpenAI-shaped 502/504 instead of a cut body.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import anyio
import httpx

from rag_runtime.llm import LLMEndpoint
from retrieval_agent.chat.bounded_http import bounded_client
from retrieval_agent.chat.errors import UPSTREAM_UNAVAILABLE, ChatError, invalid_request
from retrieval_agent.chat.upstream import upstream_timeout
from retrieval_agent.settings import Settings

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

# Request headers that describe the body or the answer wanted; auth, cookies and hop-by-hop ones stay here.
_SENT_HEADERS = ("content-type", "accept", "openai-beta")
# Answer headers passed back: what the body is, and when to retry (OpenAI's rate-limit headers).
_RETURNED_HEADERS = ("content-type", "content-disposition", "retry-after", "retry-after-ms")
_RETURNED_HEADER_PREFIXES = ("x-ratelimit-",)
_EVENT_STREAM = "text/event-stream"
# OpenAI's paths are words, ids and model names (qwen3:4b): nothing an upstream could read as another
# path (dot segments, percent escapes), which the upstream's key would then open.
_SEGMENT = re.compile(r"[A-Za-z0-9_:@+~-][A-Za-z0-9._:@+~-]*")
_PATH_RULE = (
    "The path is not one this proxy passes on: each segment must be letters, digits and . _ - : @ + ~, "
    "not starting with a dot."
)


@dataclass(frozen=True, slots=True)
class PassedAnswer:
    """The upstream's answer to pass on: its status and headers, and its body, whole (``body``) or as it
    arrives (``chunks``, an SSE answer)."""

    status: int
    headers: dict[str, str]
    body: bytes = b""
    chunks: AsyncIterator[bytes] | None = None


class UpstreamPassThrough:
    """Sends one /v1 request to CHAT_UPSTREAM_BASE_URL; built in the app's lifespan, closed with it."""

    def __init__(self, settings: Settings) -> None:
        endpoint = LLMEndpoint.of(
            settings.chat_default_model, settings.chat_upstream_base_url, settings.chat_upstream_api_key
        )
        if endpoint.base_url is None:
            raise ValueError("UpstreamPassThrough needs CHAT_UPSTREAM_BASE_URL")
        self._base_url = endpoint.base_url
        self._auth = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        self._timeout = settings.chat_timeout
        self._limit = settings.chat_max_upstream_bytes
        self._client = bounded_client(self._limit, timeout=httpx.Timeout(self._timeout))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def send(
        self, method: str, path: str, *, query: str, headers: Mapping[str, str], body: bytes
    ) -> PassedAnswer:
        """``method`` on ``{CHAT_UPSTREAM_BASE_URL}/{path}``; raises ChatError when no answer can be passed
        on (a path refused, the upstream unreachable, too slow or too large)."""
        segments = path.split("/")
        if not all(_SEGMENT.fullmatch(segment) for segment in segments):
            # The path is not echoed: it may hold line breaks, and the message is logged.
            raise invalid_request(_PATH_RULE)
        sent = {name: value for name, value in headers.items() if name.lower() in _SENT_HEADERS}
        url = f"{self._base_url}/{path}" + (f"?{query}" if query else "")
        request = self._client.build_request(method, url, headers={**sent, **self._auth}, content=body or None)
        deadline = anyio.current_time() + self._timeout
        response: httpx.Response | None = None
        with anyio.CancelScope(deadline=deadline):
            response = await self._call(self._client.send(request, stream=True))
        if response is None:
            raise upstream_timeout(f"no answer within CHAT_TIMEOUT ({self._timeout:g} s)")
        returned = _returned_headers(response.headers)
        if _media_type(response) == _EVENT_STREAM:
            return PassedAnswer(response.status_code, returned, chunks=self._events(response, deadline))
        try:
            whole: bytes | None = None
            with anyio.CancelScope(deadline=deadline):
                whole = await self._call(response.aread())
        finally:
            await response.aclose()
        if whole is None:
            raise upstream_timeout(f"the answer went on past CHAT_TIMEOUT ({self._timeout:g} s)")
        return PassedAnswer(response.status_code, returned, body=whole)

    async def _call(self, pending: Awaitable[_T]) -> _T:
        """``pending``, its transport failures as ChatError (the size cap raises one itself)."""
        try:
            return await pending
        except httpx.TimeoutException as exc:
            raise upstream_timeout(type(exc).__name__) from exc
        except httpx.HTTPError as exc:
            raise ChatError(
                502,
                f"The upstream is unreachable: {type(exc).__name__}",
                code=UPSTREAM_UNAVAILABLE,
                outcome="upstream_error",
            ) from exc

    async def _events(self, response: httpx.Response, deadline: float) -> AsyncIterator[bytes]:
        """An SSE answer as it arrives; a failure once it started ends it with an OpenAI error event."""
        parts = response.aiter_bytes()
        try:
            while True:
                part: bytes | None = None
                # The scope covers the read only, never a yield.
                with anyio.CancelScope(deadline=deadline) as scope:
                    part = await self._call(anext(parts, b""))
                if scope.cancelled_caught:
                    raise upstream_timeout(f"the stream went on past CHAT_TIMEOUT ({self._timeout:g} s)")
                if not part:
                    return
                yield part
        except ChatError as exc:
            logger.warning("a passed-on stream failed: %s", exc.message)
            yield f"\n\ndata: {json.dumps(exc.body())}\n\n".encode()
        finally:
            await response.aclose()


def _media_type(response: httpx.Response) -> str:
    content_type: str = response.headers.get("content-type", "")
    return content_type.split(";", 1)[0].strip().lower()


def _returned_headers(headers: httpx.Headers) -> dict[str, str]:
    return {
        name.lower(): value
        for name, value in headers.items()
        if name.lower() in _RETURNED_HEADERS or name.lower().startswith(_RETURNED_HEADER_PREFIXES)
    }

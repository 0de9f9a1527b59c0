"""The HTTP client of every upstream call, each answer read within CHAT_MAX_UPSTREAM_BYTES.

The body is counted as it arrives (a whole completion, a stream, the model list), so an upstream
sending more fails the call at the limit instead of having its answer held whole: the OpenAI SDK and
LiteLLM keep a whole completion, and every chunk of a stream, in memory. Compressed answers are not
asked for, so the bytes counted are the answer's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx

from retrieval_agent.chat.errors import UPSTREAM_RESPONSE_TOO_LARGE, ChatError


def bounded_client(limit: int, **options: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` (``options`` as its own) whose responses fail past ``limit`` bytes with
    :func:`upstream_too_large`, raised while reading."""

    async def bound(response: httpx.Response) -> None:
        # Run before the body is read; httpx closes the response when this raises.
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise upstream_too_large(limit)
        stream = response.stream
        if isinstance(stream, httpx.AsyncByteStream):
            response.stream = _BoundedStream(stream, limit)

    headers = {"Accept-Encoding": "identity", **options.pop("headers", {})}
    return httpx.AsyncClient(event_hooks={"response": [bound]}, headers=headers, **options)


class _BoundedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for part in self._inner:
            read += len(part)
            if read > self._limit:
                raise upstream_too_large(self._limit)
            yield part

    async def aclose(self) -> None:
        await self._inner.aclose()


def upstream_too_large(limit: int) -> ChatError:
    """The upstream's answer went past CHAT_MAX_UPSTREAM_BYTES: a bad gateway, read no further."""
    return ChatError(
        502,
        f"The upstream model's answer is larger than CHAT_MAX_UPSTREAM_BYTES ({limit} bytes): it was not read further.",
        code=UPSTREAM_RESPONSE_TOO_LARGE,
        outcome="upstream_error",
    )

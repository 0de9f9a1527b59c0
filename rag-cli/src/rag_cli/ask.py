"""``rag ask``: a question answered by the retrieval agent's chat (``POST /v1/chat/completions``,
streamed), then the documents it drew on.

The answer is printed as its deltas arrive; the chunk after the finish carries ``rag_sources`` (one
citation number per document), printed as a ``Sources:`` block, one ``[n] file (page p, path)`` line
per number. Chunks with empty ``choices`` (Open WebUI's source events, the usage) print nothing.
Each event is read as the service's own wire model (``retrieval_agent.chat.chunks``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import httpx
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from rag_cli.client import UnexpectedReplyError, json_object, validated
from rag_cli.config import Endpoint
from retrieval_agent.chat.chunks import DONE, ChatCompletionChunk
from retrieval_agent.chat.models import ModelList, OpenAIErrorBody, RagSource

# The first delta can wait for retrieval and the model's first token; the connection should not.
ASK_TIMEOUT = httpx.Timeout(300.0, connect=10.0)


class AskFailedError(Exception):
    """The chat answered with an error, or not as the API documents; the message says which."""


@dataclass
class Answer:
    """What the stream brought: the answer's text and its sources."""

    text: str = ""
    sources: list[RagSource] = field(default_factory=lambda: list[RagSource]())


def _openai_error(status: int, body: bytes) -> str:
    """``HTTP 503 chat_disabled: message`` from OpenAI's error shape, else the body's start."""
    try:
        error = OpenAIErrorBody.model_validate_json(body).error
    except ValidationError:
        return f"HTTP {status}: {body[:200].decode(errors='replace')}"
    return f"HTTP {status} {error.code or error.type}: {error.message}"


async def default_model(client: httpx.AsyncClient, endpoint: Endpoint) -> str:
    """The first plain model ``GET /v1/models`` lists (one without an ``@knowledge-base`` suffix)."""
    response = await client.get(f"{endpoint.url}/v1/models", headers=endpoint.headers)
    if response.status_code >= 400:
        raise AskFailedError(_openai_error(response.status_code, response.content))
    try:
        models = validated(json_object(response), ModelList)
    except UnexpectedReplyError as exc:
        raise AskFailedError(f"GET /v1/models: {exc}") from exc
    plain = [card.id for card in models.data if "@" not in card.id]
    if not plain:
        raise AskFailedError("the chat lists no model (GET /v1/models); name one with --model")
    return plain[0]


async def ask(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    question: str,
    *,
    collections: Sequence[str],
    model: str,
    on_text: Callable[[str], None],
) -> Answer:
    """Stream the answer to ``question`` over ``collections``, calling ``on_text`` with each delta."""
    request = {
        "model": model,
        "messages": [{"role": "user", "content": question}],
        "stream": True,
        "collection_names": list(collections),
    }
    answer = Answer()
    url = f"{endpoint.url}/v1/chat/completions"
    async with client.stream("POST", url, json=request, headers=endpoint.headers) as response:
        if response.status_code >= 400:
            raise AskFailedError(_openai_error(response.status_code, await response.aread()))
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue  # blank separators and SSE comments
            data = line.removeprefix("data:").strip()
            if data == DONE:
                break
            _read_event(data, answer, on_text)
    return answer


def _read_event(data: str, answer: Answer, on_text: Callable[[str], None]) -> None:
    try:
        chunk = ChatCompletionChunk.model_validate_json(data)
    except ValidationError:
        try:
            failure = OpenAIErrorBody.model_validate_json(data).error
        except ValidationError:
            raise AskFailedError(f"unexpected event in the answer stream: {data[:200]}") from None
        # A stream that failed after it started ends with OpenAI's error object.
        raise AskFailedError(f"{failure.code or failure.type}: {failure.message}") from None
    for choice in chunk.choices:
        if choice.delta.content:
            answer.text += choice.delta.content
            on_text(choice.delta.content)
    if chunk.rag_sources is not None:
        answer.sources = list(chunk.rag_sources)


def source_lines(sources: Sequence[RagSource]) -> list[str]:
    """``[n] file (page p, path)`` per citation number, in number order; every page of that document
    the sources cite, as people count them."""
    by_number: dict[int, list[RagSource]] = {}
    for source in sources:
        by_number.setdefault(source.index, []).append(source)
    lines = []
    for number in sorted(by_number):
        passages = by_number[number]
        first = passages[0]
        pages = sorted({source.page_number for source in passages if source.page_number is not None})
        details = []
        if pages:
            details.append(f"{'page' if len(pages) == 1 else 'pages'} {', '.join(str(page) for page in pages)}")
        path = next((source.path for source in passages if source.path), None)
        if path is not None:
            details.append(path)
        name = first.file_name or first.document
        lines.append(f"[{number}] {name}" + (f" ({', '.join(details)})" if details else ""))
    return lines


def run_ask(
    endpoint: Endpoint,
    question: str,
    *,
    collections: Sequence[str],
    model: str | None = None,
    console: Console | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> int:
    """Entry point of ``rag ask``: 0 once the answer and its sources are printed, 1 when the chat failed."""
    console = console or Console()

    def show(delta: str) -> None:
        console.print(escape(delta), end="", soft_wrap=True, highlight=False)

    async def call() -> Answer:
        async with httpx.AsyncClient(timeout=ASK_TIMEOUT, transport=transport) as client:
            chosen = model if model is not None else await default_model(client, endpoint)
            return await ask(client, endpoint, question, collections=collections, model=chosen, on_text=show)

    try:
        answer = asyncio.run(call())
    except AskFailedError as exc:
        console.print(f"[red]rag ask: {escape(str(exc))}[/red]")
        return 1
    except httpx.HTTPError as exc:
        reason = f"{type(exc).__name__}: {exc}"
        console.print(f"[red]rag ask: the retrieval service at {escape(endpoint.url)} failed: {escape(reason)}[/red]")
        return 1
    except KeyboardInterrupt:
        console.print("\n[yellow]rag ask: interrupted[/yellow]")
        return 130
    console.print()
    if answer.sources:
        console.print("\nSources:", highlight=False)
        for line in source_lines(answer.sources):
            console.print(escape(line), soft_wrap=True, highlight=False)
    return 0

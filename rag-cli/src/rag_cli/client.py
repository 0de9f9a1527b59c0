"""HTTP calls to the two services, as Open WebUI makes them."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from rag_cli.config import Endpoint


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    """One file's result."""

    path: Path
    ok: bool
    chunks: int | None = None
    error: str | None = None


def file_id_for(path: Path) -> str:
    """A stable id per absolute path, so ingesting the same file again overwrites it."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, path.resolve().as_uri()))


def _error_text(response: httpx.Response) -> str:
    try:
        body: Any = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:200]}"
    if isinstance(body, dict):
        nested = body.get("detail")
        source = nested if isinstance(nested, dict) else body
        code, error = source.get("code"), source.get("error") or source.get("detail")
        if code or error:
            return f"HTTP {response.status_code} {code or ''}: {error or ''}".strip()
    return f"HTTP {response.status_code}: {str(body)[:200]}"


async def ingest_file(
    client: httpx.AsyncClient, endpoint: Endpoint, path: Path, *, collection: str, user_id: str
) -> IngestOutcome:
    """Multipart ``PUT /api/v1/ingest`` of one file."""
    fields = {
        "file_id": file_id_for(path),
        "filename": path.name,
        "collection_name": collection,
        "collection_type": "file",
        "user_id": user_id,
        "overwrite": "true",
    }
    try:
        with path.open("rb") as handle:
            response = await client.put(
                f"{endpoint.url}/api/v1/ingest",
                data=fields,
                files={"file": (path.name, handle, "application/octet-stream")},
                headers=endpoint.headers,
            )
    except httpx.HTTPError as exc:
        return IngestOutcome(path, ok=False, error=f"{type(exc).__name__}: {exc}")
    except OSError as exc:
        return IngestOutcome(path, ok=False, error=f"cannot read file: {exc}")
    if response.status_code >= 400:
        return IngestOutcome(path, ok=False, error=_error_text(response))
    body = response.json()
    if not isinstance(body, dict) or not body.get("status"):
        return IngestOutcome(path, ok=False, error=f"unexpected reply: {str(body)[:200]}")
    chunks = body.get("chunks_count")
    return IngestOutcome(path, ok=True, chunks=chunks if isinstance(chunks, int) else None)


class SearchFailedError(Exception):
    """The retrieval service answered with an error."""


async def search(
    client: httpx.AsyncClient, endpoint: Endpoint, query: str, *, collections: list[str], k: int
) -> dict[str, Any]:
    """``POST /search`` with one query; the raw response body."""
    return (await search_reply(client, endpoint, query, collections=collections, k=k)).body


@dataclass(frozen=True, slots=True)
class SearchReply:
    """The body and, in agentic mode, how the agent's run went (response headers)."""

    body: dict[str, Any]
    # X-RAG-Agent-Outcome; None when the service ran the linear pipeline.
    agent_outcome: str | None = None
    agent_fallback: str | None = None
    agent_steps: list[dict[str, Any]] | None = None


def _steps(header: str | None) -> list[dict[str, Any]] | None:
    if header is None:
        return None
    try:
        decoded: Any = json.loads(header)
    except ValueError:
        return None
    return [step for step in decoded if isinstance(step, dict)] if isinstance(decoded, list) else None


async def search_reply(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    query: str,
    *,
    collections: list[str],
    k: int,
    agent_steps: bool = False,
) -> SearchReply:
    """``POST /search`` with one query; ``agent_steps`` asks an agentic service for its steps
    (``X-RAG-Debug: steps``, a header Open WebUI never sends; the body keeps its shape)."""
    headers = dict(endpoint.headers)
    if agent_steps:
        headers["X-RAG-Debug"] = "steps"
    response = await client.post(
        f"{endpoint.url}/search",
        json={"queries": [query], "collection_names": collections, "k": k},
        headers=headers,
    )
    if response.status_code >= 400:
        raise SearchFailedError(_error_text(response))
    body: dict[str, Any] = response.json()
    return SearchReply(
        body=body,
        agent_outcome=response.headers.get("X-RAG-Agent-Outcome"),
        agent_fallback=response.headers.get("X-RAG-Agent-Fallback"),
        agent_steps=_steps(response.headers.get("X-RAG-Agent-Steps")),
    )

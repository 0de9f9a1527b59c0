"""Async HTTP client for the two services: ingest one file (multipart, httpx), search (the lean
HTTP/1.1 client of :mod:`benchmarks.http1`, so a search's latency is the service's, not httpx's)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

from benchmarks.http1 import Http1Client


class BenchmarkHTTPError(RuntimeError):
    """A service answered with an error status; the body is kept for the report."""

    def __init__(self, what: str, status: int, body: str) -> None:
        super().__init__(f"{what}: HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


@dataclass(frozen=True)
class IngestResult:
    file_id: str
    chunks: int
    seconds: float


@dataclass(frozen=True)
class Hit:
    file_id: str
    score: float
    text: str
    meta: dict[str, Any]


@dataclass(frozen=True)
class SearchResult:
    hits: list[Hit]
    seconds: float


class ServiceClient:
    """One pooled connection set per service; use as an async context manager."""

    def __init__(
        self,
        ingestion_url: str,
        retrieval_url: str,
        ingestion_key: str,
        retrieval_key: str,
        *,
        timeout: float = 600.0,
        max_connections: int = 64,
    ) -> None:
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._ingest = httpx.AsyncClient(
            base_url=ingestion_url,
            headers={"Authorization": f"Bearer {ingestion_key}"},
            timeout=timeout,
            limits=limits,
        )
        self._search = Http1Client(retrieval_url, headers={"Authorization": f"Bearer {retrieval_key}"}, timeout=timeout)

    async def __aenter__(self) -> ServiceClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._ingest.aclose()
        await self._search.aclose()

    async def ingest(
        self,
        *,
        file_id: str,
        filename: str,
        content: bytes,
        collection_name: str,
        user_id: str = "bench",
        collection_type: str = "knowledge",
        overwrite: bool = True,
    ) -> IngestResult:
        started = time.perf_counter()
        response = await self._ingest.put(
            "/api/v1/ingest",
            files={"file": (filename, content, "text/plain")},
            data={
                "file_id": file_id,
                "filename": filename,
                "collection_name": collection_name,
                "collection_type": collection_type,
                "user_id": user_id,
                "overwrite": "true" if overwrite else "false",
            },
        )
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            raise BenchmarkHTTPError(f"ingest {file_id}", response.status_code, response.text)
        body = response.json()
        if body.get("status") is not True:
            raise BenchmarkHTTPError(f"ingest {file_id}", response.status_code, response.text)
        return IngestResult(file_id=file_id, chunks=int(body.get("chunks_count", 0)), seconds=elapsed)

    async def search(self, query: str, collection_names: list[str], k: int) -> SearchResult:
        return await self.search_body({"queries": [query], "collection_names": collection_names, "k": k})

    async def search_body(self, body: dict[str, Any]) -> SearchResult:
        started = time.perf_counter()
        response = await self._search.post_json("/search", body)
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise BenchmarkHTTPError("search", response.status, response.text)
        return SearchResult(hits=parse_search(response.json()), seconds=elapsed)


async def search_chat(
    client: ServiceClient, messages: list[dict[str, str]], collection_names: list[str], k: int
) -> SearchResult:
    """A search as Open WebUI's bypass mode sends it: the last user message as the query, plus the chat."""
    last_user = next(message["content"] for message in reversed(messages) if message["role"] == "user")
    return await client.search_body(
        {"queries": [last_user], "messages": messages, "collection_names": collection_names, "k": k}
    )


def parse_search(body: dict[str, Any]) -> list[Hit]:
    """The first (merged) result set as hits; an empty response is no hits."""
    documents = body.get("documents") or []
    if not documents:
        return []
    metadatas = body.get("metadatas") or [[{} for _ in documents[0]]]
    distances = body.get("distances") or [[0.0 for _ in documents[0]]]
    hits: list[Hit] = []
    for text, meta, score in zip(documents[0], metadatas[0], distances[0], strict=True):
        meta = meta or {}
        hits.append(Hit(file_id=str(meta.get("file_id", "")), score=float(score), text=str(text), meta=dict(meta)))
    return hits

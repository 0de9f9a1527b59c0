"""Kreuzberg as an HTTP sidecar (KREUZBERG_URL): ``POST /extract`` with multipart ``files``.

Kreuzberg 4's server answers with a JSON array holding one extraction result per file
(``content``, ``mime_type``, ``metadata``, ``detected_languages``, ...). 4xx answers mean the
document was rejected (unsupported or unreadable); transport errors and 5xx are engine faults.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from haystack import Document

from ingestion_service.documents import _errors, plain_text
from ingestion_service.documents.base import SourceFile
from ingestion_service.documents.kreuzberg_local import document_metadata
from ingestion_service.settings import Settings

ENGINE = "kreuzberg-http"
_CONFIG = {"output_format": "markdown", "language_detection": {"enabled": True, "detect_multiple": False}}


class KreuzbergHttpConverter:
    """Sends the file to the sidecar; one Document per returned result."""

    name = ENGINE
    profiles: frozenset[str] = frozenset()

    def __init__(self, settings: Settings, *, transport: httpx.BaseTransport | None = None) -> None:
        self._client = httpx.Client(
            base_url=settings.kreuzberg_url,
            timeout=httpx.Timeout(settings.kreuzberg_read_timeout, connect=settings.kreuzberg_connect_timeout),
            transport=transport,
        )

    def close(self) -> None:
        """Close the connection pool (the registry calls it at shutdown)."""
        self._client.close()

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:  # noqa: ARG002 - protocol signature; text engines take no profile
        reading = plain_text.reading_for(source.filename, source.path)
        name, mime = source.filename, source.mime_type or "application/octet-stream"
        if reading is not None:
            # Code and configuration go as plain text (kreuzberg refuses text/x-python): the sidecar
            # detects the language, the lines are read here (plain_text).
            name, mime = source.path.name, "text/plain"
        try:
            with source.path.open("rb") as handle:
                response = self._client.post(
                    "/extract",
                    files={"files": (name, handle, mime)},
                    data={"config": json.dumps(_CONFIG)},
                )
        except httpx.HTTPError as exc:
            raise _errors.engine_fault(ENGINE, f"request failed: {type(exc).__name__}") from exc
        if response.status_code in (400, 415, 422):
            raise _errors.unparseable(ENGINE, f"HTTP {response.status_code}: {response.text[:300]}")
        if response.status_code >= 300:
            raise _errors.engine_fault(ENGINE, f"HTTP {response.status_code}")
        try:
            payload: Any = response.json()
        except ValueError as exc:
            raise _errors.engine_fault(ENGINE, "response is not JSON") from exc
        results = payload if isinstance(payload, list) else [payload]
        documents: list[Document] = []
        for result in results:
            if not isinstance(result, dict) or not isinstance(result.get("content"), str):
                # A changed response shape must fail loudly, never index nothing silently.
                raise _errors.engine_fault(ENGINE, "unexpected response shape")
            meta = document_metadata(result.get("metadata"), result.get("detected_languages"))
            if isinstance(result.get("mime_type"), str):
                meta["mime_type"] = result["mime_type"]
            documents.append(Document(content=result["content"], meta=meta))
        if reading is not None:
            meta = {**(documents[0].meta if documents else {}), "reader": plain_text.READER}
            return [Document(content=plain_text.read(source.path, reading), meta=meta)]
        return documents

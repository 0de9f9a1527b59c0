"""Apache Tika as an HTTP sidecar (TIKA_URL): ``PUT /rmeta/text`` returns text plus metadata.

Tika answers 415 for types it cannot parse and 422 for documents it cannot read (encrypted or
damaged); both are document problems. Content comes back as plain text.
"""

from __future__ import annotations

from typing import Any

import httpx
from haystack import Document

from ingestion_service.documents import _errors
from ingestion_service.documents.base import SourceFile
from ingestion_service.documents.languages import to_iso639_1
from ingestion_service.settings import Settings

ENGINE = "tika"


def _first(value: Any) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    return value.strip() if isinstance(value, str) and value.strip() else None


class TikaConverter:
    """One Document from the container document (embedded attachments are left out)."""

    name = ENGINE
    profiles: frozenset[str] = frozenset()

    def __init__(self, settings: Settings, *, transport: httpx.BaseTransport | None = None) -> None:
        self._client = httpx.Client(
            base_url=settings.tika_url,
            timeout=httpx.Timeout(settings.tika_read_timeout, connect=settings.tika_connect_timeout),
            transport=transport,
        )

    def close(self) -> None:
        """Close the connection pool (the registry calls it at shutdown)."""
        self._client.close()

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:  # noqa: ARG002 - protocol signature; text engines take no profile
        headers = {"Accept": "application/json"}
        if source.mime_type:
            headers["Content-Type"] = source.mime_type
        try:
            with source.path.open("rb") as handle:
                response = self._client.put("/rmeta/text", content=handle, headers=headers)
        except httpx.HTTPError as exc:
            raise _errors.engine_fault(ENGINE, f"request failed: {type(exc).__name__}") from exc
        if response.status_code == 415:
            raise _errors.unsupported(ENGINE, "Tika cannot parse this type")
        if response.status_code == 422:
            raise _errors.unparseable(ENGINE, f"HTTP 422: {response.text[:300]}")
        if response.status_code >= 300:
            raise _errors.engine_fault(ENGINE, f"HTTP {response.status_code}")
        try:
            payload: Any = response.json()
        except ValueError as exc:
            raise _errors.engine_fault(ENGINE, "response is not JSON") from exc
        if not isinstance(payload, list) or not payload or not isinstance(payload[0], dict):
            raise _errors.engine_fault(ENGINE, "unexpected response shape")
        record: dict[str, Any] = payload[0]
        content = record.get("X-TIKA:content")
        if content is not None and not isinstance(content, str):
            raise _errors.engine_fault(ENGINE, "unexpected content type")
        meta: dict[str, Any] = {}
        title = _first(record.get("dc:title"))
        if title:
            meta["title"] = title
        creators = record.get("dc:creator")
        authors = [creators] if isinstance(creators, str) else creators
        if isinstance(authors, list) and authors:
            meta["authors"] = [str(author).strip() for author in authors if str(author).strip()]
        languages = to_iso639_1(
            [lang for lang in [_first(record.get("language") or record.get("dc:language"))] if lang]
        )
        if languages:
            meta["languages"] = languages
        mime = _first(record.get("Content-Type"))
        if mime:
            meta["mime_type"] = mime.split(";", 1)[0]
        return [Document(content=content or "", meta=meta)]

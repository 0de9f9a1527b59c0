"""Gotenberg (GOTENBERG_URL): office documents to PDF through its LibreOffice route.

``POST {GOTENBERG_URL}/forms/libreoffice/convert`` with the file in the multipart field ``files``;
the answer's body is the PDF. Gotenberg picks the import filter by the file name's extension, so
the name sent must carry the document's real suffix.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path

import httpx

from ingestion_service.errors import ExtractionDependencyError
from ingestion_service.settings import Settings
from shared_contract.redact import redact_secrets, redact_url

CONVERT_PATH = "/forms/libreoffice/convert"
_ERROR_SNIPPET = 300


class GotenbergError(ExtractionDependencyError):
    """Gotenberg is not configured, unreachable, or failed the conversion (500 EXTRACTION_FAILED).

    The log message starts with ``Gotenberg at <url>``; the body says what happened without the
    URL; ``status`` is its HTTP status when it answered.
    """

    def __init__(self, message: str, *, problem: str, status: int | None = None) -> None:
        super().__init__("Gotenberg", problem, setting="GOTENBERG_URL", internal=message)
        self.status = status


class GotenbergClient:
    """A synchronous client (engines convert in worker threads); thread-safe, one pool per instance."""

    def __init__(self, settings: Settings, *, transport: httpx.BaseTransport | None = None) -> None:
        if not settings.gotenberg_url:
            raise GotenbergError("GOTENBERG_URL is not set", problem="is not configured")
        self.url = settings.gotenberg_url.rstrip("/")
        # How messages name it: GOTENBERG_URL may carry user:pass@.
        self._shown_url = redact_url(self.url)
        self._client = httpx.Client(
            base_url=self.url,
            timeout=httpx.Timeout(settings.gotenberg_read_timeout, connect=settings.gotenberg_connect_timeout),
            verify=settings.gotenberg_tls_verify,
            transport=transport,
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def to_pdf(self, path: Path, filename: str) -> bytes:
        """The PDF Gotenberg makes of the file at ``path``, uploaded as ``filename``."""
        mime = mimetypes.guess_type(filename)[0] or "application/octet-stream"
        try:
            with path.open("rb") as handle:
                response = self._client.post(CONVERT_PATH, files={"files": (filename, handle, mime)})
        except httpx.TimeoutException as exc:
            raise GotenbergError(
                f"Gotenberg at {self._shown_url} timed out ({type(exc).__name__})", problem="timed out"
            ) from exc
        except httpx.HTTPError as exc:
            raise GotenbergError(
                f"Gotenberg at {self._shown_url} is unreachable ({type(exc).__name__}: {redact_secrets(str(exc))})",
                problem="is unreachable",
            ) from exc
        if not response.is_success:
            snippet = redact_secrets(response.text[:_ERROR_SNIPPET].strip())
            raise GotenbergError(
                f"Gotenberg at {self._shown_url} answered HTTP {response.status_code} converting {filename!r}: {snippet}",
                problem=f"answered HTTP {response.status_code}",
                status=response.status_code,
            )
        if not response.content.startswith(b"%PDF-"):
            raise GotenbergError(
                f"Gotenberg at {self._shown_url} answered without a PDF (Content-Type {response.headers.get('content-type')!r})",
                problem="answered without a PDF",
            )
        return response.content

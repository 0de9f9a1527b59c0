"""pypdf in-process: PDF only, one Document per page with ``meta.page`` (0-based, as Open WebUI expects)."""

from __future__ import annotations

from typing import Any

from haystack import Document

from ingestion_service.documents import _errors
from ingestion_service.documents.base import SourceFile

ENGINE = "pypdf"
# Some real PDFs carry junk before the header (see the eval docs); PDF readers accept that.
_HEADER_WINDOW = 1024


class PypdfConverter:
    """Plain text per page; no Markdown, no language detection."""

    name = ENGINE
    profiles: frozenset[str] = frozenset()

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:  # noqa: ARG002 - protocol signature; text engines take no profile
        from pypdf import PdfReader
        from pypdf.errors import FileNotDecryptedError, PdfReadError, PyPdfError

        with source.path.open("rb") as handle:
            if b"%PDF-" not in handle.read(_HEADER_WINDOW):
                raise _errors.unsupported(ENGINE, "not a PDF file")
        try:
            reader = PdfReader(source.path)
            if reader.is_encrypted and not reader.decrypt(""):
                raise _errors.encrypted(ENGINE, "PDF needs a password")
            meta = self._metadata(reader)
            documents = [
                Document(content=page.extract_text() or "", meta={**meta, "page": number})
                for number, page in enumerate(reader.pages)
            ]
        except FileNotDecryptedError as exc:
            raise _errors.encrypted(ENGINE, str(exc)) from exc
        except (PdfReadError, PyPdfError, ValueError, KeyError) as exc:
            raise _errors.unparseable(ENGINE, f"{type(exc).__name__}: {exc}") from exc
        return documents

    @staticmethod
    def _metadata(reader: Any) -> dict[str, Any]:
        info = reader.metadata
        meta: dict[str, Any] = {"mime_type": "application/pdf"}
        if info is None:
            return meta
        if info.title and str(info.title).strip():
            meta["title"] = str(info.title).strip()
        if info.author and str(info.author).strip():
            meta["authors"] = [str(info.author).strip()]
        return meta

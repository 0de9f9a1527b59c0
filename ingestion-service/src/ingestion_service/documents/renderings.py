"""PDF renderings of office documents (Gotenberg): the pages their chunks are placed and shown on.

A DOCX, an ODT or a slide deck has no page geometry of its own; LibreOffice's rendering of it does.
With GOTENBERG_URL set (and GOTENBERG_PAGE_RENDERINGS on), ChunkRegions places each chunk on the
rendering's text layer, the rendering is kept beside the original (``indexing.originals``), and a
citation link shows the rendering's page. A rendering that fails leaves the chunks without regions
(logged): the document is indexed as ever.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ingestion_service.adapters.gotenberg import GotenbergClient, GotenbergError
from ingestion_service.documents.base import SourceFile
from ingestion_service.documents.sniffing import source_format
from ingestion_service.settings import Settings

logger = logging.getLogger(__name__)

# Word processing and slides: their rendering's pages are the pages people print and cite.
RENDERED_FORMATS = frozenset({"docx", "doc", "odt", "rtf", "pptx", "ppt", "odp"})
RENDERING_SUFFIX = ".rendering.pdf"


def rendering_path(source_path: Path) -> Path:
    """Where a source's rendering is written, beside it in the request's directory."""
    return source_path.with_name(source_path.name + RENDERING_SUFFIX)


class PageRenderer:
    """Office documents to PDF through Gotenberg, one request per document."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def render(self, source: SourceFile) -> Path | None:
        """The rendering of ``source`` (written to ``rendering_path``), None for other formats or when it fails.

        One the extraction already made (an OpenDocument file kreuzberg rejects) is used as it is.
        """
        path = rendering_path(source.path)
        if path.is_file():
            return path
        if source_format(source) not in RENDERED_FORMATS:
            return None
        client = GotenbergClient(self._settings)
        try:
            # The staged name carries the real suffix, which Gotenberg picks its import filter by.
            pdf = client.to_pdf(source.path, source.path.name)
        except GotenbergError as exc:
            logger.warning("no page rendering, so no regions for this document's chunks: %s", exc)
            return None
        finally:
            client.close()
        path.write_bytes(pdf)
        return path

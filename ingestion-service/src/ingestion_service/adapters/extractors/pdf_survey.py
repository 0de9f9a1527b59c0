"""A quick look at a PDF's pages (pypdfium2): which lack a text layer, which are one big image.

It decides whether a PDF needs OCR before kreuzberg runs (so only scans take an OCR slot) and
which text layers belong to scans (the only ones the garbage-text-layer rule may replace).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ingestion_service.adapters.extractors import _errors
from ingestion_service.adapters.extractors.pdfium_lock import serialized
from ingestion_service.pipeline.run_control import checkpoint

if TYPE_CHECKING:
    from pypdfium2 import PdfDocument

# A page with fewer non-space characters than this has no usable text layer (page numbers,
# stray marks and scanner stamps stay below it on the real scans in the eval set).
MIN_TEXT_CHARS = 16
# An image covering at least this share of the page makes it a scanned page.
SCAN_IMAGE_SHARE = 0.5
# Named in a damaged page's error when the caller names no engine (the router's scan check).
DEFAULT_ENGINE = "pdfium"


@dataclass(frozen=True)
class PageSurvey:
    """One page: characters in its text layer and whether one image covers most of it."""

    text_chars: int
    full_page_image: bool

    @property
    def has_text(self) -> bool:
        return self.text_chars >= MIN_TEXT_CHARS


@dataclass(frozen=True)
class PdfSurvey:
    """Every page of one PDF."""

    pages: tuple[PageSurvey, ...]

    @property
    def needs_ocr(self) -> bool:
        """Some page has no text layer."""
        return any(not page.has_text for page in self.pages)

    @property
    def all_pages_need_ocr(self) -> bool:
        """No page has a text layer: a scan."""
        return bool(self.pages) and not any(page.has_text for page in self.pages)

    @property
    def scanned_with_text_layer(self) -> bool:
        """Every page is a scan that already carries a text layer (someone else's OCR)."""
        return bool(self.pages) and all(page.full_page_image and page.has_text for page in self.pages)


@serialized
def survey_pdf(path: Path, *, max_pages: int | None = None, engine: str = DEFAULT_ENGINE) -> PdfSurvey | None:
    """The survey (of the first ``max_pages`` pages when given), or None when pypdfium2 cannot
    open the file (the engine then reports why).

    A page PDFium cannot load or read (a cyclic page tree) is a damaged document (422);
    ``engine`` names the engine in the message.
    """
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError:
        return None
    try:
        pages: list[PageSurvey] = []
        count = len(document) if max_pages is None else min(len(document), max_pages)
        for index in range(count):
            checkpoint()
            try:
                pages.append(_survey_page(document, index))
            except pdfium.PdfiumError as exc:
                raise _errors.unparseable(engine, f"PDFium cannot read page {index + 1}: {exc}") from exc
        return PdfSurvey(tuple(pages))
    finally:
        document.close()


def _survey_page(document: PdfDocument, index: int) -> PageSurvey:
    import pypdfium2.raw as pdfium_c

    page = document[index]
    try:
        width, height = page.get_size()
        area = max(width * height, 1.0)
        textpage = page.get_textpage()
        try:
            chars = len("".join(textpage.get_text_range().split()))
        finally:
            textpage.close()
        full = False
        for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE]):
            left, bottom, right, top = obj.get_bounds()
            if (right - left) * (top - bottom) >= SCAN_IMAGE_SHARE * area:
                full = True
                break
        return PageSurvey(text_chars=chars, full_page_image=full)
    finally:
        page.close()

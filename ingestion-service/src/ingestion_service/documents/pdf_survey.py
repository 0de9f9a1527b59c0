"""A quick look at a PDF's pages (pypdfium2): which lack a text layer, which are one big image,
which have the rules a ruled table is drawn with.

It decides whether a PDF needs OCR before kreuzberg runs (so only scans take an OCR slot), which
text layers belong to scans (the only ones the garbage-text-layer rule may replace), and which
pages are worth pdfplumber's table search (``pdf_tables``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ingestion_service.documents import _errors
from ingestion_service.documents.pdfium_lock import serialized
from ingestion_service.run_control import checkpoint

if TYPE_CHECKING:
    from pypdfium2 import PdfDocument

# A page with fewer non-space characters than this has no usable text layer (page numbers,
# stray marks and scanner stamps stay below it on the real scans in the eval set).
MIN_TEXT_CHARS = 16
# An image covering at least this share of the page makes it a scanned page.
SCAN_IMAGE_SHARE = 0.5
# A path object no thicker than this (points, its stroke included) is a rule: a horizontal or
# vertical line of a table's grid, at least RULE_MIN_LENGTH long (pdfplumber snaps edges within 3).
RULE_THICKNESS = 3.0
RULE_MIN_LENGTH = 5.0
# A grid needs three rules each way (two rows and two columns); a rectangle gives two of each, and
# a path of more segments than a rectangle's (a whole grid drawn as one path) three of each.
MIN_RULES = 3
_RECTANGLE_SEGMENTS = 5
# A path this close to the page's size each way is its background or frame, no table's.
PAGE_SIZED = 0.9
# Named in a damaged page's error when the caller names no engine (the router's scan check).
DEFAULT_ENGINE = "pdfium"


@dataclass(frozen=True)
class PageSurvey:
    """One page: characters in its text layer, whether one image covers most of it, its path
    objects and the horizontal and vertical rules they can draw."""

    text_chars: int
    full_page_image: bool
    path_objects: int = 0
    horizontal_rules: int = 0
    vertical_rules: int = 0

    @property
    def has_text(self) -> bool:
        return self.text_chars >= MIN_TEXT_CHARS

    @property
    def ruled(self) -> bool:
        """Its paths can draw a grid of two rows and two columns: it may hold a ruled table."""
        return self.horizontal_rules >= MIN_RULES and self.vertical_rules >= MIN_RULES


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
        page_width, page_height = page.get_size()
        area = max(page_width * page_height, 1.0)
        textpage = page.get_textpage()
        try:
            chars = len("".join(textpage.get_text_range().split()))
        finally:
            textpage.close()
        full = False
        paths = horizontal = vertical = 0
        for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE, pdfium_c.FPDF_PAGEOBJ_PATH]):
            left, bottom, right, top = obj.get_bounds()
            width, height = right - left, top - bottom
            if obj.type == pdfium_c.FPDF_PAGEOBJ_IMAGE:
                full = full or width * height >= SCAN_IMAGE_SHARE * area
                continue
            paths += 1
            if width >= PAGE_SIZED * page_width and height >= PAGE_SIZED * page_height:
                continue  # a page's background or frame
            if height <= RULE_THICKNESS and width >= RULE_MIN_LENGTH:
                horizontal += 1
            elif width <= RULE_THICKNESS and height >= RULE_MIN_LENGTH:
                vertical += 1
            elif width >= RULE_MIN_LENGTH and height >= RULE_MIN_LENGTH:
                sides = 3 if pdfium_c.FPDFPath_CountSegments(obj.raw) > _RECTANGLE_SEGMENTS else 2
                horizontal += sides
                vertical += sides
        return PageSurvey(
            text_chars=chars,
            full_page_image=full,
            path_objects=paths,
            horizontal_rules=horizontal,
            vertical_rules=vertical,
        )
    finally:
        page.close()

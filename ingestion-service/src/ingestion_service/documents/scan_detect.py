"""Scan detection for the ``auto`` router: image-only PDFs and image files, decided by content.

A PDF is image-only when none of its first :data:`SAMPLE_PAGES` pages has a text layer: each has
fewer than ``pdf_survey.MIN_TEXT_CHARS`` (16) non-space characters in PDFium's text page, the bar
the OCR decision uses too. Sampling bounds the cost on long documents; a PDF whose first pages are
scans but whose later pages carry text is rare, and kreuzberg OCRs page by page anyway. A PDF
PDFium cannot open (damaged, or needing a password) is not called a scan: the default engine then
reports the document problem itself.
"""

from __future__ import annotations

from pathlib import Path

from ingestion_service.documents.base import SourceFile
from ingestion_service.documents.pdf_survey import MIN_TEXT_CHARS, survey_pdf
from ingestion_service.documents.sniffing import sniff

SAMPLE_PAGES = 5


def is_pdf(path: Path) -> bool:
    """Whether the file starts (within its first KiB) with a PDF header."""
    detected = sniff(path)
    return detected is not None and detected.media_type == "application/pdf"


def pdf_text_chars(path: Path, max_pages: int = SAMPLE_PAGES) -> list[int] | None:
    """Non-space characters in the text layer of each of the first ``max_pages`` pages; None when PDFium cannot open it."""
    survey = survey_pdf(path, max_pages=max_pages)
    return None if survey is None else [page.text_chars for page in survey.pages]


def no_text_layer(counts: list[int] | None) -> bool:
    """Whether :func:`pdf_text_chars` describes a scan: some pages, none with a text layer."""
    if not counts:
        return False
    return all(count < MIN_TEXT_CHARS for count in counts)


def is_image_only_pdf(path: Path) -> bool:
    """A PDF with pages, none of the first :data:`SAMPLE_PAGES` carrying a text layer (see the module doc)."""
    return is_pdf(path) and no_text_layer(pdf_text_chars(path))


def image_format(path: Path) -> str | None:
    """png / jpeg / tiff / gif / webp / bmp from the file's signature, else None."""
    detected = sniff(path)
    if detected is None or not detected.media_type.startswith("image/"):
        return None
    return detected.media_type.removeprefix("image/")


def is_image_file(source: SourceFile) -> bool:
    """Whether the file's content is a raster image (whatever its name says)."""
    return image_format(source.path) is not None

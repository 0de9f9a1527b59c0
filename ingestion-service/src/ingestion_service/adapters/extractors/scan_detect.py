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

from ingestion_service.adapters.extractors.base import SourceFile
from ingestion_service.adapters.extractors.pdf_survey import MIN_TEXT_CHARS, survey_pdf

SAMPLE_PAGES = 5
# Some real PDFs carry junk before the header (see the eval docs); PDF readers accept that.
_PDF_HEADER_WINDOW = 1024
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
    (b"II+\x00", "tiff"),  # BigTIFF
    (b"MM\x00+", "tiff"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
)
# BMP starts with just "BM", so the DIB header's size (offset 14) must be one of the known ones.
_BMP_DIB_SIZES = frozenset({12, 40, 52, 56, 64, 108, 124})


def is_pdf(path: Path) -> bool:
    """Whether the file starts (within its first KiB) with a PDF header."""
    with path.open("rb") as handle:
        return b"%PDF-" in handle.read(_PDF_HEADER_WINDOW)


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
    with path.open("rb") as handle:
        head = handle.read(32)
    for signature, name in _SIGNATURES:
        if head.startswith(signature):
            return name
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[:2] == b"BM" and len(head) >= 18 and int.from_bytes(head[14:18], "little") in _BMP_DIB_SIZES:
        return "bmp"
    return None


def is_image_file(source: SourceFile) -> bool:
    """Whether the file's content is a raster image (whatever its name says)."""
    return image_format(source.path) is not None

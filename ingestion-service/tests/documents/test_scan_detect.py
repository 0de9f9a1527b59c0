"""Scan detection by content: image-only PDFs (real scans vs a text PDF) and image files."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image
from pypdf import PdfReader, PdfWriter

from ingestion_service.documents import SourceFile
from ingestion_service.documents.scan_detect import (
    SAMPLE_PAGES,
    image_format,
    is_image_file,
    is_image_only_pdf,
    pdf_text_chars,
)

from ..scripted_servers import blank_pdf  # noqa: TID252

SCANS = ("pdf/kreuzberg__non_searchable.pdf", "pdf/tika__testOCR.pdf")
TEXT_PDF = "pdf/kreuzberg__searchable.pdf"
JPEG = "jpg/unstructured__double-column-A.jpg"


def _source(path: Path) -> SourceFile:
    return SourceFile(path=path, filename=path.name)


@pytest.mark.parametrize("name", SCANS)
def test_scanned_pdfs_are_image_only(docs: Path, name: str) -> None:
    assert is_image_only_pdf(docs / name)


def test_pdf_with_a_text_layer_is_not_image_only(docs: Path) -> None:
    counts = pdf_text_chars(docs / TEXT_PDF)
    assert counts is not None
    assert counts[0] > 1000
    assert not is_image_only_pdf(docs / TEXT_PDF)


def test_only_the_first_pages_are_sampled(tmp_path: Path) -> None:
    path = tmp_path / "blank.pdf"
    path.write_bytes(blank_pdf(*[(200.0, 100.0)] * (SAMPLE_PAGES + 2)))
    assert pdf_text_chars(path) == [0] * SAMPLE_PAGES
    assert is_image_only_pdf(path)


def test_pdf_pdfium_cannot_open_is_not_called_a_scan(docs: Path, tmp_path: Path) -> None:
    # The default engine then reports the password (422) itself.
    writer = PdfWriter(clone_from=PdfReader(docs / SCANS[0]))
    writer.encrypt(user_password="secret", owner_password="owner")
    path = tmp_path / "locked.pdf"
    with path.open("wb") as handle:
        writer.write(handle)
    assert pdf_text_chars(path) is None
    assert not is_image_only_pdf(path)


def test_non_pdfs_are_not_image_only_pdfs(docs: Path) -> None:
    assert not is_image_only_pdf(docs / JPEG)
    assert not is_image_only_pdf(docs / "docx/docling__word_tables.docx")


def test_jpeg_fixture_is_an_image_file(docs: Path) -> None:
    assert is_image_file(_source(docs / JPEG))
    assert image_format(docs / JPEG) == "jpeg"


@pytest.mark.parametrize(
    ("pil_format", "expected"), [("PNG", "png"), ("GIF", "gif"), ("BMP", "bmp"), ("WEBP", "webp"), ("TIFF", "tiff")]
)
def test_image_formats_are_recognised_by_signature_whatever_the_name(
    tmp_path: Path, pil_format: str, expected: str
) -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "white").save(buffer, format=pil_format)
    path = tmp_path / "upload.dat"
    path.write_bytes(buffer.getvalue())
    assert image_format(path) == expected
    assert is_image_file(_source(path))


def test_documents_and_text_named_like_images_are_not_image_files(docs: Path, tmp_path: Path) -> None:
    fake = tmp_path / "photo.png"
    fake.write_text("BM is not enough for a bitmap")
    assert not is_image_file(_source(fake))
    assert not is_image_file(_source(docs / TEXT_PDF))

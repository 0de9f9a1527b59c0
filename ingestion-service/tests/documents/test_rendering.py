"""Page rendering for the vision engines: real PDFs and images from tests/fixtures/docs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image
from pypdf import PdfReader, PdfWriter

from ingestion_service.documents.rendering import MAX_SIDE_PX, image_pages, render_pdf_pages
from ingestion_service.errors import CORRUPT_REASON, ENCRYPTED_REASON, ExtractionError

from ..scripted_servers import blank_pdf  # noqa: TID252

TWO_PAGES = "pdf/unstructured__list-item-example.pdf"  # two US Letter pages (612 x 792 pt)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _size(png: bytes) -> tuple[int, int]:
    assert png.startswith(PNG_SIGNATURE)
    with Image.open(io.BytesIO(png)) as image:
        return image.size


@pytest.mark.parametrize(("dpi", "size"), [(72, (612, 792)), (144, (1224, 1584))])
def test_pdf_pages_render_as_png_at_the_dpi(docs: Path, dpi: int, size: tuple[int, int]) -> None:
    pages = render_pdf_pages(docs / TWO_PAGES, dpi=dpi, max_pages=20)
    assert pages.total_pages == 2
    assert not pages.truncated
    assert [_size(image) for image in pages.images] == [size, size]


def test_pdf_bytes_render_like_the_file(docs: Path) -> None:
    from_bytes = render_pdf_pages((docs / TWO_PAGES).read_bytes(), dpi=50, max_pages=20)
    from_path = render_pdf_pages(docs / TWO_PAGES, dpi=50, max_pages=20)
    assert from_bytes == from_path


def test_rendered_page_shows_the_page(docs: Path) -> None:
    [png] = render_pdf_pages(docs / "pdf/kreuzberg__searchable.pdf", dpi=72, max_pages=20).images
    with Image.open(io.BytesIO(png)) as image:
        histogram = image.convert("L").histogram()
    # Dark text on white paper, not a blank bitmap.
    assert sum(histogram[:100]) > 0
    assert sum(histogram[200:]) > sum(histogram[:100])


def test_max_pages_renders_the_first_pages_and_reports_the_total(docs: Path) -> None:
    pages = render_pdf_pages(docs / TWO_PAGES, dpi=36, max_pages=1)
    assert len(pages.images) == 1
    assert pages.total_pages == 2
    assert pages.truncated
    assert pages.images[0] == render_pdf_pages(docs / TWO_PAGES, dpi=36, max_pages=2).images[0]


def test_huge_page_is_capped_in_pixels() -> None:
    # A 200-inch-wide banner would be 30000 px wide at 150 dpi.
    pages = render_pdf_pages(blank_pdf((14400.0, 720.0)), dpi=150, max_pages=1)
    assert _size(pages.images[0]) == (MAX_SIDE_PX, round(720 * MAX_SIDE_PX / 14400))


def test_damaged_pdf_is_a_document_problem() -> None:
    with pytest.raises(ExtractionError) as caught:
        render_pdf_pages(b"%PDF-1.7\nthis is not a PDF body", dpi=72, max_pages=1, engine="hybrid-diagram")
    assert caught.value.document_problem
    assert caught.value.detail() == CORRUPT_REASON
    assert str(caught.value).startswith("hybrid-diagram: ")


def test_password_protected_pdf_is_encrypted(docs: Path, tmp_path: Path) -> None:
    writer = PdfWriter(clone_from=PdfReader(docs / "pdf/kreuzberg__searchable.pdf"))
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="AES-256")
    locked = tmp_path / "locked.pdf"
    writer.write(locked)
    with pytest.raises(ExtractionError) as caught:
        render_pdf_pages(locked, dpi=72, max_pages=1)
    assert caught.value.document_problem
    assert caught.value.detail() == ENCRYPTED_REASON


def test_copy_protected_pdf_with_empty_user_password_renders(docs: Path) -> None:
    pages = render_pdf_pages(docs / "pdf/kreuzberg__copy_protected.pdf", dpi=36, max_pages=1)
    assert len(pages.images) == 1


def test_jpeg_is_one_png_page_of_the_same_size(docs: Path) -> None:
    path = docs / "jpg/unstructured__double-column-A.jpg"
    pages = image_pages(path, 20)
    assert pages.total_pages == 1
    with Image.open(path) as original:
        assert [_size(image) for image in pages.images] == [original.size]


def test_multi_page_tiff_gives_every_page(docs: Path) -> None:
    pages = image_pages(docs / "tif/docling__2206.01062.tif", 20)
    assert pages.total_pages == 2
    assert len(pages.images) == 2
    assert pages.images[0] != pages.images[1]


def test_multi_page_tiff_is_capped(docs: Path) -> None:
    pages = image_pages(docs / "tif/docling__2206.01062.tif", 1)
    assert (len(pages.images), pages.total_pages, pages.truncated) == (1, 2, True)


def test_unreadable_image_is_a_document_problem(docs: Path) -> None:
    with pytest.raises(ExtractionError) as caught:
        image_pages(docs / "md/unstructured__simple-table.md", 1)
    assert caught.value.document_problem
    assert caught.value.detail() == CORRUPT_REASON

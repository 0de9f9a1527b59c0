"""Where kreuzberg's OCR read each word (``documents.ocr_words``), checked against the rendered page:
a word's box holds its ink, on scans of every orientation and on image files."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pypdfium2 as pdfium
import pytest
from haystack import Document
from PIL import Image
from pypdf import PdfReader, PdfWriter

from ingestion_service.documents.base import SourceFile
from ingestion_service.documents.geometry import Box, PageLayout, PageWords
from ingestion_service.documents.kreuzberg_local import KreuzbergConverter
from ingestion_service.documents.ocr_words import OCR_WORDS_KEY, Frame, ocr_scale, page_words

if TYPE_CHECKING:
    from ..conftest import MakeSettings  # noqa: TID252

SCALE = 2.0


def page_image(path: Path, number: int) -> Image.Image:
    """The page as it is shown (a PDF page rendered with its /Rotate), or the image file's frame."""
    if path.suffix.lower() == ".pdf":
        document = pdfium.PdfDocument(str(path))
        try:
            rendered: Image.Image = document[number].render(scale=SCALE).to_pil().convert("L")
        finally:
            document.close()
        return rendered
    with Image.open(path) as image:
        image.seek(number)
        return image.convert("L")


def dark_share(image: Image.Image, box: Box) -> float:
    width, height = image.size
    crop = image.crop((int(box[0] * width), int(box[1] * height), int(box[2] * width) + 1, int(box[3] * height) + 1))
    histogram = crop.histogram()
    return sum(histogram[:128]) / max(1, sum(histogram))


def ocr_pages(converter: KreuzbergConverter, path: Path, mime: str) -> list[Document]:
    return converter.convert(SourceFile(path=path, filename=path.name, media_type=mime))


def assert_words_hold_their_ink(path: Path, page: int, words: PageWords) -> None:
    image = page_image(path, page)
    long_words = [(text, box) for text, box in words.words if len(text) >= 4]
    assert len(long_words) >= 3
    inked = [dark_share(image, box) for _, box in long_words]
    # Nearly every word box holds ink; none of them is the white page around the text.
    assert sum(1 for share in inked if share > 0.05) >= 0.9 * len(inked)
    # Far more ink than on the page at large: the boxes are where the text is, not beside it.
    assert sum(inked) / len(inked) > 2.5 * dark_share(image, (0.0, 0.0, 1.0, 1.0))


@pytest.fixture(scope="module")
def converter(make_test_settings_module: MakeSettings) -> KreuzbergConverter:
    return KreuzbergConverter(make_test_settings_module())


@pytest.mark.parametrize(
    ("name", "mime"),
    [
        ("pdf/tika__testOCR.pdf", "application/pdf"),  # a landscape page
        ("pdf/kreuzberg__ocr_test_rotated_90.pdf", "application/pdf"),  # /Rotate 270
        ("pdf/kreuzberg__non_searchable.pdf", "application/pdf"),
        ("jpg/unstructured__double-column-A.jpg", "image/jpeg"),
        ("tif/docling__2206.01062.tif", "image/tiff"),
    ],
)
def test_an_ocrd_page_carries_its_words_where_their_ink_is(
    converter: KreuzbergConverter, docs: Path, name: str, mime: str
) -> None:
    documents = ocr_pages(converter, docs / name, mime)
    [first] = [document for document in documents if document.meta.get("page") == 0]
    words = first.meta[OCR_WORDS_KEY]
    assert isinstance(words, PageWords)
    assert_words_hold_their_ink(docs / name, 0, words)


def test_a_scans_sentence_is_boxed_on_its_lines(converter: KreuzbergConverter, docs: Path) -> None:
    path = docs / "pdf/kreuzberg__non_searchable.pdf"
    [page] = ocr_pages(converter, path, "application/pdf")
    layout = PageLayout.from_words(page.meta[OCR_WORDS_KEY])
    boxes = layout.regions("This is an example of a non-text-searchable PDF.")
    assert boxes
    image = page_image(path, 0)
    assert all(dark_share(image, box) > 0.05 for box in boxes)
    assert layout.regions("Nothing of this sentence is on that scanned page at all.") == []


def test_the_ocrd_page_of_a_mixed_pdf_carries_words_and_the_text_layer_page_none(
    converter: KreuzbergConverter, docs: Path, tmp_path: Path
) -> None:
    writer = PdfWriter()
    writer.append(PdfReader(docs / "pdf/kreuzberg__searchable.pdf"))
    writer.append(PdfReader(docs / "pdf/kreuzberg__non_searchable.pdf"))
    mixed = tmp_path / "mixed.pdf"
    writer.write(mixed)
    documents = ocr_pages(converter, mixed, "application/pdf")
    by_page = {int(document.meta["page"]): document for document in documents}
    assert OCR_WORDS_KEY not in by_page[0].meta
    assert_words_hold_their_ink(mixed, 1, by_page[1].meta[OCR_WORDS_KEY])


def test_a_replaced_garbage_text_layer_carries_the_ocr_words(converter: KreuzbergConverter, docs: Path) -> None:
    path = docs / "pdf/kreuzberg__scanned.pdf"
    [page] = ocr_pages(converter, path, "application/pdf")
    assert page.meta["text_layer"] == "replaced-by-ocr"
    assert_words_hold_their_ink(path, 0, page.meta[OCR_WORDS_KEY])


def test_a_text_layer_pdf_carries_no_ocr_words(converter: KreuzbergConverter, docs: Path) -> None:
    documents = ocr_pages(converter, docs / "pdf/unstructured__multi-column-2p.pdf", "application/pdf")
    assert all(OCR_WORDS_KEY not in document.meta for document in documents)


@pytest.mark.parametrize(
    ("size", "scale"),
    [
        # Measured on kreuzberg 4.10 (word boxes against the ink of synthetic pages).
        ((612, 792), 300 / 72),  # small: read as 72 DPI, scaled to 300
        ((1248, 1664), 177 / 72),  # the longer side held to 4096 by a whole DPI
        ((2550, 3300), 89 / 72),  # a page rendered at 300 DPI
        ((5000, 3000), 4096 / 5000),  # larger than 4096: shrunk to it
        ((4096, 3000), 1.0),  # already 4096: read as it is
    ],
)
def test_the_ocr_frame_is_kreuzbergs_normalised_image(size: tuple[int, int], scale: float) -> None:
    assert ocr_scale(*size) == pytest.approx(scale, rel=2e-3)


def test_words_outside_their_frame_give_the_page_no_words() -> None:
    element = {"text": "word", "level": "word", "page_number": 1}
    inside = {**element, "geometry": {"type": "rectangle", "left": 10, "top": 20, "width": 30, "height": 10}}
    outside = {**element, "geometry": {"type": "rectangle", "left": 90, "top": 20, "width": 30, "height": 10}}
    frames = {0: Frame(100, 100)}
    assert page_words([inside], frames) == {0: PageWords((("word", (0.1, 0.2, 0.4, 0.3)),))}
    assert page_words([inside, outside], frames) == {}
    # A turned page: the box is where it lies once the page is shown turned clockwise.
    assert page_words([inside], {0: Frame(100, 100, rotation=90)}) == {0: PageWords((("word", (0.7, 0.1, 0.8, 0.4)),))}

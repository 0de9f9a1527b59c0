"""Where a text sits on a PDF page (``documents.geometry``), checked against the rendered page:
the ink of the text lies inside its boxes, and a box holds little besides."""

from __future__ import annotations

import itertools
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from ingestion_service.documents.geometry import Box, pdf_text_layer, turned

PDF = "pdf/unstructured__multi-column-2p.pdf"
# A sentence of the right-hand column of page 1 (0-based page 0), as the engine writes it.
RIGHT_COLUMN = "still be mapped to vectors close to each other."
TITLE = "# Dense Passage Retrieval for Open-Domain Question Answering"
SCALE = 2.0


def page_text(path: Path, number: int) -> str:
    document = pdfium.PdfDocument(str(path))
    try:
        textpage = document[number].get_textpage()
        return str(textpage.get_text_range())
    finally:
        document.close()


def dark_share(path: Path, number: int, box: Box) -> float:
    """The share of dark pixels inside ``box`` on the page rendered as it is shown."""
    document = pdfium.PdfDocument(str(path))
    try:
        image = document[number].render(scale=SCALE).to_pil().convert("L")
    finally:
        document.close()
    width, height = image.size
    crop = image.crop((int(box[0] * width), int(box[1] * height), int(box[2] * width) + 1, int(box[3] * height) + 1))
    pixels = list(crop.get_flattened_data())
    return sum(1 for value in pixels if value < 128) / max(1, len(pixels))


def rotated_copy(source: Path, target: Path, degrees: int) -> Path:
    document = pdfium.PdfDocument(str(source))
    try:
        document[0].set_rotation(degrees)
        document.save(str(target))
    finally:
        document.close()
    return target


def test_a_sentence_is_boxed_where_its_ink_is_on_the_page(docs: Path) -> None:
    path = docs / PDF
    with pdf_text_layer(path) as layer:
        assert layer is not None
        boxes = layer.regions(0, RIGHT_COLUMN)
    assert boxes
    # The right-hand column: every box starts right of the page's middle.
    assert all(box[0] > 0.5 for box in boxes)
    assert all(dark_share(path, 0, box) > 0.05 for box in boxes)


def test_markdown_markup_does_not_move_the_boxes(docs: Path) -> None:
    with pdf_text_layer(docs / PDF) as layer:
        assert layer is not None
        assert layer.regions(0, TITLE) == layer.regions(0, TITLE.lstrip("# "))
        assert layer.regions(0, TITLE)


def test_a_paragraph_gets_one_box_per_line_in_reading_order(docs: Path) -> None:
    path = docs / PDF
    lines = [line for line in page_text(path, 0).split("\r\n") if len(line) > 40][3:6]
    with pdf_text_layer(path) as layer:
        assert layer is not None
        boxes = layer.regions(0, " ".join(lines))
    assert len(boxes) >= len(lines)
    tops = [box[1] for box in boxes]
    assert tops == sorted(tops)
    # Lines one below the other, none overlapping the next.
    assert all(upper[3] <= lower[1] + 0.002 for upper, lower in itertools.pairwise(boxes))
    assert all(dark_share(path, 0, box) > 0.05 for box in boxes)


def test_text_that_is_not_on_the_page_gets_no_boxes(docs: Path) -> None:
    with pdf_text_layer(docs / PDF) as layer:
        assert layer is not None
        assert layer.regions(0, "Nothing of this sentence appears anywhere in that paper at all.") == []
        assert layer.regions(7, TITLE) == []


def test_a_page_without_a_text_layer_gets_no_boxes(docs: Path) -> None:
    with pdf_text_layer(docs / "pdf/tika__testOCR.pdf") as layer:
        assert layer is not None
        assert layer.regions(0, "This is a test of OCR") == []


def test_a_file_pdfium_cannot_open_has_no_text_layer(tmp_path: Path) -> None:
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\nnot a pdf")
    with pdf_text_layer(broken) as layer:
        assert layer is None


@pytest.mark.parametrize("degrees", [90, 180, 270])
def test_boxes_follow_a_turned_page(docs: Path, tmp_path: Path, degrees: int) -> None:
    path = rotated_copy(docs / PDF, tmp_path / f"turned-{degrees}.pdf", degrees)
    with pdf_text_layer(path) as layer:
        assert layer is not None
        boxes = layer.regions(0, RIGHT_COLUMN)
    assert boxes
    assert all(dark_share(path, 0, box) > 0.05 for box in boxes)
    # Blank paper where the unturned page has the text: the boxes moved with the page.
    with pdf_text_layer(docs / PDF) as layer:
        assert layer is not None
        upright = layer.regions(0, RIGHT_COLUMN)
    assert boxes != upright


def test_a_page_whose_text_range_drops_control_characters_is_still_read(docs: Path) -> None:
    path = docs / "pdf/kreuzberg__embedded_images_tables.pdf"
    document = pdfium.PdfDocument(str(path))
    try:
        textpage = document[0].get_textpage()
        # The page's text range leaves out control characters its char count holds.
        assert len(textpage.get_text_range()) < textpage.count_chars()
    finally:
        document.close()
    with pdf_text_layer(path) as layer:
        assert layer is not None
        # A caption after those characters: found, and boxed where its ink is.
        boxes = layer.regions(0, "Fig. 5. Langmuir adsorption isotherm of ES.")
    assert boxes
    assert all(dark_share(path, 0, box) > 0.05 for box in boxes)


def test_text_the_engine_wrote_in_another_order_than_the_page_is_found_whole(docs: Path) -> None:
    path = docs / "pdf/tika__testPDFTwoTextBoxes.pdf"
    # kreuzberg reads the right-hand box first; the text layer holds the left one first.
    chunk = "Right column line 1 Right column line 2 Left column line 1 Left column line 2"
    with pdf_text_layer(path) as layer:
        assert layer is not None
        boxes = layer.regions(0, chunk)
    lefts = sorted(box[0] for box in boxes)
    # Both boxes' lines: two on the left, two far right of them.
    assert len(boxes) == 4
    assert lefts[1] < 0.1 < 0.4 < lefts[2]
    assert all(dark_share(path, 0, box) > 0.05 for box in boxes)


def test_a_paragraph_the_page_holds_twice_goes_to_the_copy_after_the_previous_chunk(docs: Path) -> None:
    path = docs / "pdf/docling__code_and_formula.pdf"
    # The end of a paragraph the page prints twice, above and below a code listing.
    paragraph = (
        "Duis autem vel eum iriure dolor in hendrerit in vulputate velit esse molestie consequat, vel illum "
        "dolore eu feugiat nulla facilisis at vero eros et accumsan et iusto odio dignissim qui blandit "
        "praesent luptatum zzril delenit augue duis dolore te feugait nulla facilisi."
    )
    with pdf_text_layer(path) as layer:
        assert layer is not None
        first = layer.regions(0, paragraph)
        second = layer.regions(0, paragraph)  # the next chunk: the same words
    assert first
    assert second
    # Asked first, the upper copy (reading order); asked again, the copy below it.
    assert min(box[1] for box in second) > max(box[3] for box in first)
    assert all(dark_share(path, 0, box) > 0.05 for box in first + second)


def test_a_box_turns_with_its_page() -> None:
    # Shown turned clockwise by 90 degrees: the top edge of the unturned page is the right edge.
    assert turned((0.1, 0.0, 0.3, 0.1), 90) == (0.9, 0.1, 1.0, 0.3)
    assert turned((0.1, 0.2, 0.3, 0.4), 180) == pytest.approx((0.7, 0.6, 0.9, 0.8))
    assert turned((0.1, 0.2, 0.3, 0.4), 270) == pytest.approx((0.2, 0.7, 0.4, 0.9))
    assert turned((0.1, 0.2, 0.3, 0.4), 0) == (0.1, 0.2, 0.3, 0.4)

"""Right-to-left pages of a PDF read in reading order (``documents.rtl_order``), through the
in-process engine and on the page's own text layer."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from haystack import Document

from ingestion_service.documents.base import SourceFile
from ingestion_service.documents.geometry import PdfTextLayer, pdf_text_layer, words_of
from ingestion_service.documents.kreuzberg_local import KreuzbergConverter
from ingestion_service.documents.rtl_order import in_reading_order

if TYPE_CHECKING:
    from ..conftest import MakeSettings  # noqa: TID252

ARABIC = "pdf/kreuzberg__right_to_left_01.pdf"
# The page's first line as a reader reads it (right to left), as PDFium's text holds it.
FIRST_LINE = "تحسين اإلنتاجية وحل المشكالت من خالل البرمجة بلغة R وPython"


@pytest.fixture(scope="module")
def converter(make_test_settings_module: MakeSettings) -> KreuzbergConverter:
    return KreuzbergConverter(make_test_settings_module())


def page_text(path: Path) -> str:
    with pdf_text_layer(path) as layer:
        assert isinstance(layer, PdfTextLayer)
        layout = layer.page(0)
        assert layout is not None
        return layout.text


def test_an_arabic_page_the_engine_wrote_backwards_is_read_in_reading_order(
    converter: KreuzbergConverter, docs: Path
) -> None:
    path = docs / ARABIC
    (page,) = converter.convert(SourceFile(path=path, filename=path.name, media_type="application/pdf"))
    content = page.content or ""
    assert content.splitlines()[0] == FIRST_LINE
    assert "|" not in content  # not cut into a pipe table of word columns
    assert page.meta["page"] == 0
    assert words_of(content) == words_of(page_text(path))


def test_a_right_to_left_page_already_in_reading_order_is_kept(docs: Path) -> None:
    path = docs / ARABIC
    written = f"# {FIRST_LINE}\n\n{page_text(path).split(chr(10), 1)[1]}"
    (page,) = in_reading_order(path, [Document(content=written, meta={"page": 0})])
    assert page.content == written


def test_pages_without_right_to_left_letters_are_kept_as_written(docs: Path) -> None:
    path = docs / ARABIC
    written = "An English summary the engine wrote, which the page does not hold."
    (page,) = in_reading_order(path, [Document(content=written, meta={"page": 0})])
    assert page.content == written

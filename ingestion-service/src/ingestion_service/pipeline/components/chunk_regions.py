"""Each paged chunk's place on its page (``meta.regions``), and whether it has one (``meta.geometry``)."""

from __future__ import annotations

from contextlib import ExitStack

from haystack import Document, component

from ingestion_service.documents import SourceFile
from ingestion_service.documents.geometry import (
    NO_GEOMETRY,
    OCR,
    TEXT_LAYER,
    PageLayout,
    PageWords,
    PdfTextLayer,
    pdf_text_layer,
)
from ingestion_service.documents.ocr_words import OCR_WORDS_KEY
from ingestion_service.pipeline.observe import StageObserver, timed
from ingestion_service.run_control import checkpoint
from shared_contract import MetaKey

_PDF_MAGIC = b"%PDF-"


def _is_pdf(source: SourceFile) -> bool:
    try:
        with source.path.open("rb") as handle:
            return handle.read(1024).lstrip().startswith(_PDF_MAGIC)
    except OSError:
        return False


@component
class ChunkRegions:
    """Rectangles for every chunk found on its page: from the OCR engine's word boxes for an OCR'd
    page (a scan, an image), else from the PDF's text layer.

    The converter hands each OCR'd page's words over in ``meta.ocr_words``; they are taken out of
    every chunk here, so only the regions are stored. Chunks of other formats, and those whose
    words are not on their page, say ``geometry: none`` and carry no regions: nothing is guessed.
    Chunks come in reading order, which places a repeated paragraph on the right copy.
    """

    def __init__(self, observer: StageObserver | None = None) -> None:
        self.observer = observer

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document], source: SourceFile) -> dict[str, list[Document]]:
        """The chunks, each with ``geometry`` and, where placed, ``regions``."""
        with timed(self.observer, "regions"), ExitStack() as stack:
            layer: PdfTextLayer | None = None
            if _is_pdf(source):
                layer = stack.enter_context(pdf_text_layer(source.path))
            ocr_pages: dict[int, PageLayout] = {}
            for chunk in documents:
                checkpoint()
                words = chunk.meta.pop(OCR_WORDS_KEY, None)
                chunk.meta[MetaKey.GEOMETRY] = NO_GEOMETRY
                page = chunk.meta.get(MetaKey.PAGE)
                if not isinstance(page, int) or isinstance(page, bool):
                    continue
                if isinstance(words, PageWords):
                    # One layout per page, so the page's chunks are placed one after the other.
                    boxes = ocr_pages.setdefault(page, PageLayout.from_words(words)).regions(chunk.content or "")
                    geometry = OCR
                elif layer is not None and not chunk.meta.get("ocr"):
                    boxes = layer.regions(page, chunk.content or "")
                    geometry = TEXT_LAYER
                else:
                    continue
                if boxes:
                    chunk.meta[MetaKey.REGIONS] = [{"page": page, "boxes": [list(box) for box in boxes]}]
                    chunk.meta[MetaKey.GEOMETRY] = geometry
        return {"documents": documents}

"""Each paged chunk's place on its page (``meta.regions``), and whether it has one (``meta.geometry``)."""

from __future__ import annotations

from contextlib import ExitStack

from haystack import Document, component

from ingestion_service.documents import SourceFile
from ingestion_service.documents.geometry import (
    NO_GEOMETRY,
    OCR,
    RENDERING,
    TEXT_LAYER,
    PageLayout,
    PageWords,
    PdfTextLayer,
    pdf_text_layer,
)
from ingestion_service.documents.ocr_words import OCR_WORDS_KEY
from ingestion_service.documents.renderings import PageRenderer
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

    An office document with a ``renderer`` (Gotenberg) is placed on its PDF rendering instead: each
    chunk on the rendering's page where its words are, looked for from the page the chunk before
    it was found on (``geometry: rendering``; the regions' page is the rendering's).
    """

    def __init__(self, observer: StageObserver | None = None, renderer: PageRenderer | None = None) -> None:
        self.observer = observer
        self.renderer = renderer

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document], source: SourceFile) -> dict[str, list[Document]]:
        """The chunks, each with ``geometry`` and, where placed, ``regions``."""
        with timed(self.observer, "regions"), ExitStack() as stack:
            layer: PdfTextLayer | None = None
            if _is_pdf(source):
                layer = stack.enter_context(pdf_text_layer(source.path))
            elif self.renderer is not None and (rendering := self.renderer.render(source)) is not None:
                rendered = stack.enter_context(pdf_text_layer(rendering))
                if rendered is not None:
                    return {"documents": _placed_on_rendering(documents, rendered)}
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


def _placed_on_rendering(documents: list[Document], rendering: PdfTextLayer) -> list[Document]:
    near = 0
    for chunk in documents:
        checkpoint()
        chunk.meta.pop(OCR_WORDS_KEY, None)
        chunk.meta[MetaKey.GEOMETRY] = NO_GEOMETRY
        # A slide's chunks know their slide, which is the rendering's page.
        page = chunk.meta.get(MetaKey.PAGE)
        slide = page if isinstance(page, int) and not isinstance(page, bool) and page >= 0 else None
        found = rendering.locate(chunk.content or "", near=near if slide is None else slide)
        if found is None:
            continue
        near, boxes = found
        chunk.meta[MetaKey.REGIONS] = [{"page": near, "boxes": [list(box) for box in boxes]}]
        chunk.meta[MetaKey.GEOMETRY] = RENDERING
    return documents

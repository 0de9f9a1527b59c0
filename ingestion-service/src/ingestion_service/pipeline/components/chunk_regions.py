"""Each paged chunk's place on its page (``meta.regions``), and whether it has one (``meta.geometry``)."""

from __future__ import annotations

from haystack import Document, component

from ingestion_service.documents import SourceFile
from ingestion_service.documents.geometry import NO_GEOMETRY, TEXT_LAYER, pdf_text_layer
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
    """Rectangles from the PDF's text layer for every chunk of a PDF page it is found on.

    Chunks of other formats, of OCR'd pages and those whose words are not on their page say
    ``geometry: none`` and carry no regions: nothing is guessed.
    """

    def __init__(self, observer: StageObserver | None = None) -> None:
        self.observer = observer

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document], source: SourceFile) -> dict[str, list[Document]]:
        """The chunks, each with ``geometry`` and, where placed, ``regions``."""
        with timed(self.observer, "regions"):
            for chunk in documents:
                chunk.meta[MetaKey.GEOMETRY] = NO_GEOMETRY
            if not _is_pdf(source):
                return {"documents": documents}
            with pdf_text_layer(source.path) as layer:
                if layer is None:
                    return {"documents": documents}
                for chunk in documents:
                    checkpoint()
                    page = chunk.meta.get(MetaKey.PAGE)
                    if not isinstance(page, int) or isinstance(page, bool) or chunk.meta.get("ocr"):
                        continue
                    boxes = layer.regions(page, chunk.content or "")
                    if boxes:
                        chunk.meta[MetaKey.REGIONS] = [{"page": page, "boxes": [list(box) for box in boxes]}]
                        chunk.meta[MetaKey.GEOMETRY] = TEXT_LAYER
        return {"documents": documents}

"""Pages as PNG images for the vision engines: PDFs rasterized with PDFium, image files re-encoded.

Only the first ``max_pages`` pages are rendered; ``total_pages`` says how many the document has,
so the caller can record the truncation instead of hiding it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ingestion_service.documents import _errors
from ingestion_service.documents.pdfium_lock import serialized
from ingestion_service.run_control import checkpoint

if TYPE_CHECKING:
    from PIL.Image import Image
    from pypdfium2 import PdfPage

DEFAULT_ENGINE = "vision-llm"
# Longest side of a page image in pixels. A poster-sized page at the configured DPI (or a huge
# photo) would otherwise cost hundreds of megabytes here (gigabytes for a 100-inch page) and be
# downscaled by the model anyway. The OCR of a mixed PDF's pages renders with it too (``render_page``).
MAX_SIDE_PX = 8192
_PNG_MODES = frozenset({"1", "L", "LA", "RGB", "RGBA", "P"})
# Formats whose extra frames are pages; GIF/WebP frames are animation, so only the first is kept.
_PAGED_FORMATS = frozenset({"TIFF", "MPO"})


@dataclass(frozen=True)
class RenderedPages:
    """PNG images of the first pages, and the document's page count."""

    images: list[bytes]
    total_pages: int

    @property
    def truncated(self) -> bool:
        """Whether pages were left out (the document has more than were rendered)."""
        return self.total_pages > len(self.images)


@serialized
def render_pdf_pages(pdf: bytes | Path, *, dpi: int, max_pages: int, engine: str = DEFAULT_ENGINE) -> RenderedPages:
    """Rasterize the first ``max_pages`` pages of ``pdf`` at ``dpi`` to PNG.

    A PDF PDFium cannot open is a document problem (422): encrypted when it needs a password,
    corrupt otherwise; ``engine`` names the engine in the message.
    """
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    try:
        document = pdfium.PdfDocument(pdf)
    except pdfium.PdfiumError as exc:
        if exc.err_code == pdfium_c.FPDF_ERR_PASSWORD:
            raise _errors.encrypted(engine, "PDF needs a password") from exc
        raise _errors.unparseable(engine, f"PDFium cannot open the PDF: {exc}") from exc
    try:
        total = len(document)
        if total == 0:
            raise _errors.unparseable(engine, "the PDF has no pages")
        images: list[bytes] = []
        for index in range(min(total, max_pages)):
            checkpoint()
            page = document[index]
            try:
                images.append(_png(render_page(page, dpi=dpi)))
            except pdfium.PdfiumError as exc:
                raise _errors.unparseable(engine, f"PDFium cannot render page {index + 1}: {exc}") from exc
            finally:
                page.close()
    finally:
        document.close()
    return RenderedPages(images=images, total_pages=total)


def render_page(page: PdfPage, *, dpi: int, max_side: int = MAX_SIDE_PX) -> Image:
    """``page`` at ``dpi``, scaled down so that its longer side is at most ``max_side`` pixels.

    The caller holds :data:`PDFIUM_LOCK`; PDFium's errors (``PdfiumError``) are the caller's to map.
    """
    width, height = page.get_size()
    scale = min(dpi / 72, max_side / max(width, height, 1.0))
    image: Image = page.render(scale=scale).to_pil()
    return image


def image_pages(path: Path, max_pages: int, *, engine: str = DEFAULT_ENGINE) -> RenderedPages:
    """The frames of an image file as PNG pages (every page of a multi-page TIFF, else one).

    EXIF orientation is applied (phone photos); images larger than :data:`MAX_SIDE_PX` are scaled
    down. An image Pillow cannot read is a document problem (422).
    """
    from PIL import Image, ImageOps

    try:
        with Image.open(path) as image:
            paged = image.format in _PAGED_FORMATS
            total = int(getattr(image, "n_frames", 1)) if paged else 1
            images: list[bytes] = []
            for index in range(min(total, max_pages)):
                checkpoint()
                image.seek(index)
                frame = ImageOps.exif_transpose(image)
                if max(frame.size) > MAX_SIDE_PX:
                    frame = frame.copy()
                    frame.thumbnail((MAX_SIDE_PX, MAX_SIDE_PX))
                images.append(_png(frame))
    except (OSError, ValueError, EOFError, Image.DecompressionBombError) as exc:
        raise _errors.unparseable(engine, f"cannot read the image: {type(exc).__name__}: {exc}") from exc
    return RenderedPages(images=images, total_pages=total)


def _png(image: Image) -> bytes:
    # PNG stores only these modes; CMYK JPEGs, 16-bit TIFFs and YCbCr become RGB.
    if image.mode not in _PNG_MODES:
        image = image.convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()

"""A page of an original as a PNG, with a passage's regions highlighted (the citation links' page image).

PDFs are rendered with PDFium as they are shown (their /Rotate applied), images are their own
single page (a multi-frame TIFF: one page per frame). Regions are fractions of the page as shown,
top-left origin (``meta.regions``), so they scale to any rendering width. Blocking: call from a
worker thread.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import pypdfium2 as pdfium
from PIL import Image, ImageDraw, ImageSequence, UnidentifiedImageError

from ingestion_service.documents.pdfium_lock import PDFIUM_LOCK
from shared_contract.citations import IMAGE_FORMATS, PAGED_FORMATS

Box = Sequence[float]

# Marker yellow, translucent over the text, with a solid edge that shows on dark pages too.
HIGHLIGHT_FILL = (255, 214, 0, 96)
HIGHLIGHT_EDGE = (230, 140, 0, 255)
# Room around a line's box, in pixels: the ink of descenders and accents sits on its edge.
_PADDING = 2
# Larger originals are scaled down before drawing: a page image is for reading, not printing.
MAX_SIDE = 4000


class PageNotShownError(Exception):
    """The original has no such page, or no page can be rendered from it (damaged, not a paged format)."""


def _pdf_page(path: Path, page: int, width: int) -> Image.Image:
    with PDFIUM_LOCK:
        try:
            document = pdfium.PdfDocument(path)
        except pdfium.PdfiumError as exc:
            raise PageNotShownError(f"the original does not open as a PDF: {exc}") from exc
        try:
            if not 0 <= page < len(document):
                raise PageNotShownError(f"the original has {len(document)} pages, not a page {page + 1}")
            pdf_page = document[page]
            page_width, _height = pdf_page.get_size()
            bitmap = pdf_page.render(scale=width / page_width if page_width > 0 else 1.0)
            rendered: Image.Image = bitmap.to_pil().convert("RGB")
            return rendered
        finally:
            document.close()


def _image_page(path: Path, page: int, width: int) -> Image.Image:
    try:
        with Image.open(path) as image:
            frames = [frame.copy() for _, frame in zip(range(page + 1), ImageSequence.Iterator(image), strict=False)]
    except (UnidentifiedImageError, OSError) as exc:
        raise PageNotShownError(f"the original does not open as an image: {exc}") from exc
    if len(frames) <= page:
        raise PageNotShownError(f"the image has {len(frames)} pages, not a page {page + 1}")
    frame = frames[page].convert("RGB")
    height = max(1, round(frame.height * width / frame.width))
    return frame.resize((width, height), Image.Resampling.LANCZOS)


def render_page(path: Path, fmt: str, page: int, boxes: Sequence[Box], *, width: int) -> bytes:
    """Page ``page`` (0-based) of the original at ``path`` as a PNG ``width`` pixels wide, ``boxes`` highlighted."""
    width = max(1, min(width, MAX_SIDE))
    if fmt in PAGED_FORMATS:
        image = _pdf_page(path, page, width)
    elif fmt in IMAGE_FORMATS:
        image = _image_page(path, page, width)
    else:
        raise PageNotShownError(f"pages of {fmt or 'unknown'} originals are not rendered")
    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    for x0, y0, x1, y1 in (tuple(box) for box in boxes):
        rectangle = (
            max(0, round(x0 * image.width) - _PADDING),
            max(0, round(y0 * image.height) - _PADDING),
            min(image.width - 1, round(x1 * image.width) + _PADDING),
            min(image.height - 1, round(y1 * image.height) + _PADDING),
        )
        draw.rectangle(rectangle, fill=HIGHLIGHT_FILL, outline=HIGHLIGHT_EDGE, width=2)
    composed = Image.alpha_composite(image.convert("RGBA"), overlay).convert("RGB")
    buffer = io.BytesIO()
    composed.save(buffer, format="PNG", optimize=False)
    return buffer.getvalue()

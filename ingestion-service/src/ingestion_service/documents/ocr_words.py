"""Where kreuzberg's OCR read each word of a page, as fractions of the page as it is shown.

kreuzberg (with ``OcrConfig.element_config``) returns Tesseract's word boxes in pixels of the image
Tesseract read, which is not the file's own: kreuzberg renders a PDF page without its /Rotate at
300 DPI, then scales every image (a rendered page, a PNG, a photo) as if it were 72 DPI towards
300 DPI, its longer side held to 4096 pixels (measured on kreuzberg 4.10 against rendered pages:
a word's box is where its ink is, ``tests/documents/test_ocr_words.py``). A page whose words do
not fit that frame gets no words rather than misplaced ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ingestion_service.documents.geometry import Box, PageWords, turned
from ingestion_service.documents.pdfium_lock import PDFIUM_LOCK

# The meta key that carries an OCR'd page's words from the converter to ChunkRegions, which
# takes it out: only the regions it draws from them are stored.
OCR_WORDS_KEY: Final = "ocr_words"

# kreuzberg's image normalisation before Tesseract (``normalize_image_dpi``).
_ASSUMED_DPI: Final = 72
_TARGET_DPI: Final = 300
_MAX_SIDE_PX: Final = 4096
_NO_RESIZE_WITHIN: Final = 0.05
# A word box past the frame by more than this share of it: the frame is not the engine's.
_FRAME_SLACK: Final = 0.01
# The EXIF orientation of an image shown as stored.
_UPRIGHT: Final = 1


@dataclass(frozen=True)
class Frame:
    """The image kreuzberg OCR'd for one page: its size in pixels, and the page's /Rotate."""

    width: float
    height: float
    rotation: int = 0


def ocr_scale(width: int, height: int) -> float:
    """The factor kreuzberg scales an image of ``width`` x ``height`` pixels by before OCR."""
    longest = max(width, height, 1)
    inches = longest / _ASSUMED_DPI
    dpi = _TARGET_DPI
    if round(inches * _TARGET_DPI) > _MAX_SIDE_PX:
        dpi = max(_ASSUMED_DPI, round(_MAX_SIDE_PX / inches))
    scale = dpi / _ASSUMED_DPI
    if abs(scale - 1) < _NO_RESIZE_WITHIN and longest <= _MAX_SIDE_PX:
        return 1.0
    if round(longest * scale) > _MAX_SIDE_PX:
        scale *= _MAX_SIDE_PX / round(longest * scale)
    return scale


def image_frame(width: int, height: int) -> Frame:
    """The frame of an image of ``width`` x ``height`` pixels handed to kreuzberg."""
    scale = ocr_scale(width, height)
    return Frame(width * scale, height * scale)


def pdf_frames(path: Path) -> dict[int, Frame]:
    """The frame of each page (0-based) of the PDF at ``path`` as kreuzberg OCRs it."""
    import pypdfium2 as pdfium

    frames: dict[int, Frame] = {}
    with PDFIUM_LOCK:
        try:
            document = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError:
            return frames
        try:
            for number in range(len(document)):
                page = document[number]
                try:
                    left, bottom, right, top = page.get_cropbox()
                    rotation = page.get_rotation()
                finally:
                    page.close()
                # Rendered at 300 DPI, unturned; PDFium rounds each side down to whole pixels.
                width = int((right - left) * _TARGET_DPI / _ASSUMED_DPI)
                height = int((top - bottom) * _TARGET_DPI / _ASSUMED_DPI)
                if width > 0 and height > 0:
                    scale = ocr_scale(width, height)
                    frames[number] = Frame(width * scale, height * scale, rotation)
        finally:
            document.close()
    return frames


def image_frames(path: Path) -> dict[int, Frame]:
    """The frame of each frame (page) of the image at ``path``; none for one turned by EXIF,
    whose boxes kreuzberg may give in either orientation."""
    from PIL import Image, UnidentifiedImageError

    frames: dict[int, Frame] = {}
    try:
        with Image.open(path) as image:
            if image.getexif().get(0x0112, _UPRIGHT) != _UPRIGHT:
                return frames
            for number in range(int(getattr(image, "n_frames", 1))):
                image.seek(number)
                frames[number] = image_frame(*image.size)
    except (OSError, ValueError, EOFError, UnidentifiedImageError, Image.DecompressionBombError):
        return {}
    return frames


def page_words(elements: Iterable[Mapping[str, Any]] | None, frames: Mapping[int, Frame]) -> dict[int, PageWords]:
    """kreuzberg's word elements (``ExtractionResult.ocr_elements``) by page (0-based), each word's
    box in fractions of the page as shown; a page without its frame, or whose words leave it, has none."""
    by_page: dict[int, list[tuple[str, Box]]] = {}
    outside: set[int] = set()
    for element in elements or ():
        text = element.get("text")
        geometry = element.get("geometry")
        number = element.get("page_number")
        if element.get("level") != "word" or not isinstance(text, str) or not text.strip():
            continue
        if not isinstance(geometry, Mapping) or geometry.get("type") != "rectangle" or not isinstance(number, int):
            continue
        page = number - 1
        frame = frames.get(page)
        if frame is None:
            continue
        left, top = float(geometry["left"]), float(geometry["top"])
        right, bottom = left + float(geometry["width"]), top + float(geometry["height"])
        box = (left / frame.width, top / frame.height, right / frame.width, bottom / frame.height)
        if min(box) < -_FRAME_SLACK or max(box) > 1 + _FRAME_SLACK:
            outside.add(page)
        clipped = (max(box[0], 0.0), max(box[1], 0.0), min(box[2], 1.0), min(box[3], 1.0))
        by_page.setdefault(page, []).append((text, turned(clipped, frame.rotation)))
    return {page: PageWords(tuple(words)) for page, words in by_page.items() if page not in outside}

"""The diagram detectors' measurements of a DOCX body: shapes, the words in them, body words and pictures."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from xml.etree import ElementTree as ET

from ingestion_service.documents.docx_xml import NOT_TEXT, collect_inline, container_lines, first_child, int_attribute

# Legacy VML drawing primitives; one holding v:imagedata is a picture, the others are shapes.
_VML_SHAPES = frozenset(
    {"v:shape", "v:rect", "v:roundrect", "v:oval", "v:line", "v:polyline", "v:arc", "v:curve", "v:image"}
)
# VML lengths (style="width:108pt;height:27pt") in EMU per unit; a bare number is pixels.
_EMU_PER_UNIT = {"pt": 12_700, "in": 914_400, "cm": 360_000, "mm": 36_000, "pc": 152_400, "px": 9_525, "": 9_525}
_VML_LENGTH = re.compile(r"^\s*(-?[\d.]+)\s*([a-z]*)\s*$")


@dataclass(frozen=True)
class DiagramSignals:
    """What the diagram detectors measure in ``word/document.xml`` (body only; no headers or footers).

    ``textboxes``: drawing shapes and text boxes (DrawingML ``wps:wsp``, grouped ones included,
    and legacy VML shapes outside a Fallback); connectors and lines count, pictures do not.
    ``drawing_words``: words inside those shapes (text boxes, DrawingML ``a:t``, WordArt).
    ``body_words``: words in ordinary paragraphs and tables. ``body_images``: embedded pictures
    (linked-only ones are not in the package). ``largest_image_emu``: the largest picture's display
    area in EMU² (``<wp:extent cx*cy>``; for a picture inside a group, its own size scaled to the
    group's extent).
    """

    textboxes: int
    drawing_words: int
    body_words: int
    body_images: int
    largest_image_emu: int

    @property
    def drawing_ratio(self) -> float:
        """Words inside shapes per word of body text."""
        return self.drawing_words / max(self.body_words, 1)

    @property
    def image_word_ratio(self) -> float:
        """Largest picture area (EMU²) per word of body text: high for a figure, low for a photo in a long text."""
        return self.largest_image_emu / max(self.body_words, 1)

    def vector_flowchart(self, *, min_textboxes: int, min_ratio: float) -> bool:
        """Enough shapes carrying more words than the body: a diagram drawn with Word shapes.

        Never fires on a document without shapes, whatever the thresholds.
        """
        return self.textboxes >= max(min_textboxes, 1) and self.drawing_ratio >= min_ratio

    def raster_figure(self, *, min_images: int, min_image_emu: int, min_image_word_ratio: float = 0.0) -> bool:
        """Enough body pictures, the largest displayed big enough to be a figure rather than an icon.

        ``min_image_word_ratio`` > 0 also requires ``largest_image_emu / max(body_words, 1)`` to reach
        it, so a large decorative photo above a long text does not count. Never fires without a picture.
        """
        if self.body_images < max(min_images, 1) or self.largest_image_emu < min_image_emu:
            return False
        return min_image_word_ratio <= 0 or self.image_word_ratio >= min_image_word_ratio

    def as_dict(self) -> dict[str, int | float]:
        """The measurements, for logs and the route decision."""
        return {
            "textboxes": self.textboxes,
            "drawing_words": self.drawing_words,
            "body_words": self.body_words,
            "drawing_ratio": round(self.drawing_ratio, 3),
            "body_images": self.body_images,
            "largest_image_emu": self.largest_image_emu,
        }


def count_signals(body: ET.Element | None) -> DiagramSignals:
    """The measurements of one ``w:body`` (None: an empty document)."""
    counts = _Counts()
    if body is not None:
        counts.walk(body, in_shape=False)
    return DiagramSignals(
        textboxes=counts.shapes,
        drawing_words=counts.drawing_words,
        body_words=counts.body_words,
        body_images=len(counts.image_areas),
        largest_image_emu=max(counts.image_areas, default=0),
    )


@dataclass
class _Counts:
    """Accumulates :class:`DiagramSignals` over one walk of the body."""

    shapes: int = 0
    drawing_words: int = 0
    body_words: int = 0
    image_areas: list[int] = field(default_factory=list)

    def walk(self, element: ET.Element, *, in_shape: bool) -> None:
        for child in element:
            tag = child.tag
            if tag == "w:p":
                parts: list[str] = []
                collect_inline(child, parts, [])
                words = len("".join(parts).split())
                if in_shape:
                    self.drawing_words += words
                else:
                    self.body_words += words
                self.walk(child, in_shape=in_shape)
            elif tag == "w:txbxContent":
                self.walk(child, in_shape=True)
            elif tag in ("a:txBody", "v:textpath"):
                self.drawing_words += sum(len(line.split()) for line in container_lines(child))
            elif tag in ("wp:inline", "wp:anchor"):
                self.image_areas.extend(_drawing_picture_areas(child))
                self.walk(child, in_shape=in_shape)
            elif tag == "wps:wsp":
                self.shapes += 1
                self.walk(child, in_shape=in_shape)
            elif tag in _VML_SHAPES:
                area = _vml_picture_area(child)
                if area is None:
                    self.shapes += 1
                else:
                    self.image_areas.append(area)
                self.walk(child, in_shape=in_shape)
            elif tag not in NOT_TEXT:
                self.walk(child, in_shape=in_shape)


def _drawing_picture_areas(drawing: ET.Element) -> list[int]:
    """Display areas (EMU²) of the embedded pictures in one ``wp:inline`` / ``wp:anchor``."""
    extent = first_child(drawing, "wp:extent")
    frame = int_attribute(extent.get("cx")) * int_attribute(extent.get("cy")) if extent is not None else 0
    data = first_child(drawing, "a:graphic", "a:graphicData")
    if data is None:
        return []
    areas: list[int] = []
    for child in data:
        if child.tag == "pic:pic":
            if _embedded(child):
                areas.append(frame)
        elif child.tag in ("wpg:wgp", "wpc:wpc"):
            areas.extend(min(area, frame) if frame else area for area in _group_picture_areas(child, 1.0, 1.0))
    return areas


def _group_picture_areas(group: ET.Element, scale_x: float, scale_y: float) -> Iterator[int]:
    """Pictures in a group or canvas, their own ``a:ext`` scaled from child to page coordinates."""
    transform = first_child(group, "wpg:grpSpPr", "a:xfrm")
    if transform is not None:
        outer, inner = first_child(transform, "a:ext"), first_child(transform, "a:chExt")
        if (
            outer is not None
            and inner is not None
            and int_attribute(inner.get("cx"))
            and int_attribute(inner.get("cy"))
        ):
            scale_x *= int_attribute(outer.get("cx")) / int_attribute(inner.get("cx"))
            scale_y *= int_attribute(outer.get("cy")) / int_attribute(inner.get("cy"))
    for child in group:
        if child.tag == "pic:pic" and _embedded(child):
            size = first_child(child, "pic:spPr", "a:xfrm", "a:ext")
            if size is not None:
                yield round(int_attribute(size.get("cx")) * scale_x * int_attribute(size.get("cy")) * scale_y)
        elif child.tag in ("wpg:grpSp", "wpg:wgp"):
            yield from _group_picture_areas(child, scale_x, scale_y)


def _embedded(picture: ET.Element) -> bool:
    blip = next(picture.iter("a:blip"), None)
    return blip is not None and bool(blip.get("r:embed"))


def _vml_picture_area(shape: ET.Element) -> int | None:
    """The display area of a VML picture (``v:imagedata`` of an embedded image), else None (a shape)."""
    image = first_child(shape, "v:imagedata")
    if shape.tag == "v:image":
        image = shape
    if image is None or not (image.get("r:id") or image.get("o:relid")):
        return None
    style: dict[str, str] = {}
    for item in shape.get("style", "").split(";"):
        key, _, value = item.partition(":")
        style[key.strip().lower()] = value
    return _vml_length(style.get("width", "")) * _vml_length(style.get("height", ""))


def _vml_length(value: str) -> int:
    match = _VML_LENGTH.match(value)
    if match is None or match.group(2) not in _EMU_PER_UNIT:
        return 0
    try:
        return max(round(float(match.group(1)) * _EMU_PER_UNIT[match.group(2)]), 0)
    except ValueError:
        return 0

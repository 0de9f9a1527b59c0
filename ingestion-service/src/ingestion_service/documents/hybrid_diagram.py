"""``hybrid-diagram``: a DOCX's native text, verbatim from the package XML, plus a vision-inferred Mermaid graph.

The text (body, tables, text boxes, shape labels) is authoritative: nothing in it is OCR-guessed.
The vision model only adds the structure, as a ``## Diagram`` section with a Mermaid block. A
vector flowchart (Word shapes) uses the ``diagram-topology`` profile with the shapes' verbatim
labels passed along, so its nodes carry the document's own words; a raster figure (a picture,
whose labels are pixels) uses ``figure``. Anything that is not a DOCX goes to ``vision-llm``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from haystack import Document

from ingestion_service.documents import _errors
from ingestion_service.documents.base import Converter, SourceFile
from ingestion_service.documents.docx_package import DOCX_MIME_TYPE, DiagramSignals, DocxPackage, is_docx
from ingestion_service.documents.rendering import RenderedPages
from ingestion_service.documents.vision_profiles import PROFILES
from ingestion_service.settings import Settings

ENGINE = "hybrid-diagram"
VECTOR_PROFILE = "diagram-topology"
RASTER_PROFILE = "figure"
DOCX_PROFILES = frozenset({VECTOR_PROFILE, RASTER_PROFILE})
DIAGRAM_HEADING = "## Diagram"
_LABELS_INTRO = "The verbatim text labels of the diagram's shapes, in document order:"


@runtime_checkable
class PageDescriber(Converter, Protocol):
    """What this engine needs from the vision engine (``VisionLlmConverter``)."""

    def render(self, source: SourceFile) -> RenderedPages:
        """The document's pages as PNG images."""
        ...

    def describe_pages(self, pages: list[bytes], *, profile: str, extra_context: str | None = None) -> str:
        """The model's answer for ``pages`` under ``profile``."""
        ...


def choose_profile(signals: DiagramSignals, has_labels: bool, settings: Settings) -> str:
    """``diagram-topology`` for a vector flowchart, ``figure`` for a raster one.

    The router's thresholds decide; when neither signal fires (the engine was chosen by hand), a
    document with shape labels is treated as vector and one without as a figure.
    """
    if signals.vector_flowchart(
        min_textboxes=settings.extraction_router_min_textboxes, min_ratio=settings.extraction_router_drawing_ratio
    ):
        return VECTOR_PROFILE
    if signals.raster_figure(
        min_images=settings.extraction_router_min_body_images,
        min_image_emu=settings.extraction_router_min_image_emu,
        min_image_word_ratio=settings.extraction_router_min_image_word_ratio,
    ):
        return RASTER_PROFILE
    return VECTOR_PROFILE if has_labels else RASTER_PROFILE


def mermaid_section(answer: str) -> str:
    """The ``## Diagram`` section: the model's answer, its graph fenced as ```mermaid.

    An answer that already holds a ```mermaid block is kept as it is (the ``figure`` profile adds a
    description below the block); an answer in an untagged fence is re-tagged; a bare graph is fenced.
    """
    text = answer.strip()
    if "```mermaid" not in text:
        if text.startswith("```"):
            text = "```mermaid" + text[len(text.partition("\n")[0]) :]
        else:
            text = f"```mermaid\n{text}\n```"
    return f"{DIAGRAM_HEADING}\n\n{text}"


def labels_context(labels: list[str]) -> str | None:
    """The labels as the extra context of a ``diagram-topology`` call (one per line); None without labels."""
    if not labels:
        return None
    return "\n".join([_LABELS_INTRO, *(f"- {label}" for label in labels)])


class HybridDiagramConverter:
    """DOCX native text + a Mermaid graph from the vision engine; other inputs go to the vision engine."""

    name = ENGINE
    # Any vision profile is accepted: a non-DOCX input takes it to vision-llm; a DOCX honours the
    # two of DOCX_PROFILES and picks one by content for the others.
    profiles: frozenset[str] = frozenset(PROFILES)

    def __init__(self, settings: Settings, vision: Callable[[], Converter]) -> None:
        self._settings = settings
        # Resolved per call: the registry builds the vision engine only when it is first needed.
        self._vision = vision

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:
        """A DOCX as native Markdown plus ``## Diagram``; anything else through ``vision-llm``."""
        vision = self._describer()
        if not is_docx(source.path):
            return [_with_extractor(document, vision.name) for document in vision.convert(source, profile=profile)]
        package = DocxPackage.open(source.path)
        native = package.native_text()
        labels = package.labels()
        if profile is not None and profile in DOCX_PROFILES:
            chosen = profile
        else:
            chosen = choose_profile(package.signals(), bool(labels), self._settings)
        # Without a name the renderer cannot tell this is an office file; the content decided it is one.
        pages = vision.render(dataclasses.replace(source, media_type=source.media_type or DOCX_MIME_TYPE))
        if not pages.images:
            raise _errors.engine_fault(ENGINE, "the document rendered to no pages")
        answer = vision.describe_pages(
            pages.images, profile=chosen, extra_context=labels_context(labels) if chosen == VECTOR_PROFILE else None
        )
        if not answer.strip():
            raise _errors.engine_fault(ENGINE, f"the vision model returned no diagram ({chosen} profile)")
        content = "\n\n".join(part for part in (native, mermaid_section(answer)) if part)
        meta: dict[str, Any] = {
            "extractor": ENGINE,
            "vision_profile": chosen,
            "vision_model": self._settings.vision_llm_model,
            "pages": len(pages.images),
            "mime_type": DOCX_MIME_TYPE,
        }
        if pages.truncated:
            meta["pages_truncated"] = True
            meta["total_pages"] = pages.total_pages
        return [Document(content=content, meta=meta)]

    def _describer(self) -> PageDescriber:
        vision = self._vision()
        if not isinstance(vision, PageDescriber):
            raise _errors.engine_fault(ENGINE, f"the vision engine {vision.name!r} cannot render and describe pages")
        return vision


def _with_extractor(document: Document, engine: str) -> Document:
    """Record the engine that really ran (the fall-through engine, not this one)."""
    return Document(
        content=document.content, meta={**document.meta, "extractor": document.meta.get("extractor", engine)}
    )

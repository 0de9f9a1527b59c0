"""hybrid-diagram: native DOCX text plus the vision model's Mermaid, with a fake describer and end to end."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from haystack import Document

from ingestion_service.documents import SourceFile
from ingestion_service.documents._errors import engine_fault
from ingestion_service.documents.docx_package import DOCX_MIME_TYPE, labels, read_native_text
from ingestion_service.documents.hybrid_diagram import HybridDiagramConverter, mermaid_section
from ingestion_service.documents.registry import ConverterRegistry
from ingestion_service.documents.rendering import RenderedPages
from ingestion_service.documents.vision_profiles import PROFILES, prompt_for
from ingestion_service.errors import ExtractionError

from ..scripted_servers import GotenbergStandIn, ScriptedVisionServer, VisionReply, images, prompt_text  # noqa: TID252

if TYPE_CHECKING:
    from ..conftest import MakeSettings  # noqa: TID252

VECTOR = "docx/docling__textbox.docx"
RASTER = "docx/unstructured__contains-pictures.docx"
PLAIN_DOCX = "docx/docling__word_tables.docx"
PDF = "pdf/kreuzberg__searchable.pdf"
GRAPH = "flowchart TD\n  A[Student falls ill] --> B{Yes}"


class FakeVision:
    """Records render / describe / convert calls; answers with a fixed graph."""

    name = "vision-llm"
    profiles = PROFILES

    def __init__(self, answer: str = f"```mermaid\n{GRAPH}\n```", error: Exception | None = None) -> None:
        self.answer = answer
        self.error = error
        self.rendered: list[SourceFile] = []
        self.described: list[dict[str, Any]] = []
        self.converted: list[tuple[SourceFile, str | None]] = []

    def render(self, source: SourceFile) -> RenderedPages:
        self.rendered.append(source)
        return RenderedPages(images=[b"page-1", b"page-2"], total_pages=3)

    def describe_pages(self, pages: list[bytes], *, profile: str, extra_context: str | None = None) -> str:
        self.described.append({"pages": pages, "profile": profile, "extra_context": extra_context})
        if self.error is not None:
            raise self.error
        return self.answer

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:
        self.converted.append((source, profile))
        return [Document(content="vision transcript", meta={"vision_profile": profile or "general"})]


class TextOnlyEngine:
    """A converter without render / describe_pages (not usable as the vision side)."""

    name = "vision-llm"
    profiles: frozenset[str] = frozenset()

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:
        raise AssertionError("not called")


@pytest.fixture
def hybrid(make_test_settings: MakeSettings) -> Any:
    """``hybrid(fake, **settings_overrides)`` -> a HybridDiagramConverter over ``fake``."""

    def factory(vision: Any, **overrides: Any) -> HybridDiagramConverter:
        return HybridDiagramConverter(make_test_settings(**overrides), vision=lambda: vision)

    return factory


def _source(docs: Path, name: str, filename: str | None = None) -> SourceFile:
    return SourceFile(path=docs / name, filename=filename or Path(name).name)


def test_vector_flowchart_sends_the_verbatim_labels_with_the_topology_profile(hybrid: Any, docs: Path) -> None:
    fake = FakeVision()
    [document] = hybrid(fake).convert(_source(docs, VECTOR))
    [call] = fake.described
    assert call["profile"] == "diagram-topology"
    assert call["pages"] == [b"page-1", b"page-2"]
    context = call["extra_context"]
    assert context is not None
    for label in labels(docs / VECTOR):
        assert f"- {label}\n" in context + "\n"
    assert "Student falls ill" in context
    assert document.meta["vision_profile"] == "diagram-topology"
    assert document.meta["extractor"] == "hybrid-diagram"


def test_raster_figure_uses_the_figure_profile_without_labels(hybrid: Any, docs: Path) -> None:
    fake = FakeVision()
    [document] = hybrid(fake).convert(_source(docs, RASTER))
    [call] = fake.described
    assert call["profile"] == "figure"
    assert call["extra_context"] is None
    assert document.meta["vision_profile"] == "figure"


def test_content_is_the_native_text_then_the_mermaid_section(hybrid: Any, docs: Path) -> None:
    [document] = hybrid(FakeVision()).convert(_source(docs, VECTOR))
    native = read_native_text(docs / VECTOR)
    assert document.content == f"{native}\n\n## Diagram\n\n```mermaid\n{GRAPH}\n```"


def test_truncated_rendering_is_recorded(hybrid: Any, docs: Path) -> None:
    [document] = hybrid(FakeVision()).convert(_source(docs, VECTOR))
    assert document.meta["pages"] == 2
    assert document.meta["pages_truncated"] is True
    assert document.meta["total_pages"] == 3


def test_explicit_docx_profile_is_honoured_and_others_pick_by_content(hybrid: Any, docs: Path) -> None:
    fake = FakeVision()
    converter = hybrid(fake)
    converter.convert(_source(docs, VECTOR), profile="figure")
    converter.convert(_source(docs, VECTOR), profile="general")
    assert [call["profile"] for call in fake.described] == ["figure", "diagram-topology"]
    assert fake.described[0]["extra_context"] is None


def test_docx_without_a_signal_still_gets_a_profile_by_content(hybrid: Any, docs: Path) -> None:
    fake = FakeVision()
    hybrid(fake).convert(_source(docs, PLAIN_DOCX))
    assert fake.described[0]["profile"] == "figure"  # no shape labels to pass


def test_docx_without_a_suffix_is_rendered_as_a_docx(hybrid: Any, docs: Path) -> None:
    fake = FakeVision()
    hybrid(fake).convert(_source(docs, VECTOR, filename="upload"))
    assert fake.rendered[0].media_type == DOCX_MIME_TYPE


def test_non_docx_falls_through_to_vision_llm(hybrid: Any, docs: Path) -> None:
    fake = FakeVision()
    [document] = hybrid(fake).convert(_source(docs, PDF), profile="diagram")
    assert [profile for _, profile in fake.converted] == ["diagram"]
    assert not fake.rendered
    assert not fake.described
    assert document.content == "vision transcript"
    assert document.meta["extractor"] == "vision-llm"


@pytest.mark.parametrize(
    ("answer", "section"),
    [
        (f"```mermaid\n{GRAPH}\n```", f"```mermaid\n{GRAPH}\n```"),
        (f"```\n{GRAPH}\n```", f"```mermaid\n{GRAPH}\n```"),
        (GRAPH, f"```mermaid\n{GRAPH}\n```"),
        (
            f"```mermaid\n{GRAPH}\n```\n\nA figure of the process.",
            f"```mermaid\n{GRAPH}\n```\n\nA figure of the process.",
        ),
    ],
)
def test_mermaid_section_is_always_fenced_as_mermaid(answer: str, section: str) -> None:
    assert mermaid_section(answer) == f"## Diagram\n\n{section}"


def test_empty_vision_answer_fails_the_extraction(hybrid: Any, docs: Path) -> None:
    with pytest.raises(ExtractionError) as caught:
        hybrid(FakeVision(answer="  \n")).convert(_source(docs, VECTOR))
    assert not caught.value.document_problem


def test_vision_failure_propagates(hybrid: Any, docs: Path) -> None:
    error = engine_fault("vision-llm", "vision endpoint http://x is unreachable")
    with pytest.raises(ExtractionError) as caught:
        hybrid(FakeVision(error=error)).convert(_source(docs, VECTOR))
    assert caught.value is error


def test_vision_engine_that_cannot_describe_pages_is_an_engine_fault(hybrid: Any, docs: Path) -> None:
    with pytest.raises(ExtractionError) as caught:
        hybrid(TextOnlyEngine()).convert(_source(docs, VECTOR))
    assert not caught.value.document_problem
    assert "cannot render" in str(caught.value)


def test_end_to_end_through_gotenberg_and_the_vision_endpoint(
    make_test_settings: MakeSettings,
    docs: Path,
    vision_server: ScriptedVisionServer,
    gotenberg_server: GotenbergStandIn,
) -> None:
    vision_server.script(VisionReply(content=f"```mermaid\n{GRAPH}\n```"))
    settings = make_test_settings(
        vision_llm_api_base_url=vision_server.base_url,
        gotenberg_url=gotenberg_server.url,
        vision_llm_dpi=36,
        vision_llm_language_hint="English",
    )
    registry = ConverterRegistry(settings)
    try:
        [document] = registry.get("hybrid-diagram").convert(SourceFile(path=docs / VECTOR, filename="flow.docx"))
    finally:
        registry.close()
    [upload] = gotenberg_server.uploads
    assert upload.filename.endswith(".docx")
    assert upload.content == (docs / VECTOR).read_bytes()
    [request] = vision_server.requests
    assert len(images(request)) == 2  # the stand-in's two-page PDF
    prompt = prompt_text(request)
    assert prompt.startswith(prompt_for("diagram-topology", "English"))
    for label in labels(docs / VECTOR):
        assert label in prompt
    assert document.content == f"{read_native_text(docs / VECTOR)}\n\n## Diagram\n\n```mermaid\n{GRAPH}\n```"
    assert document.meta["extractor"] == "hybrid-diagram"
    assert document.meta["vision_profile"] == "diagram-topology"

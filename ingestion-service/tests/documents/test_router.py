"""The ``auto`` router: each route on real documents, with recording converters behind it."""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from haystack import Document

from ingestion_service.documents import SourceFile, docx_package
from ingestion_service.documents._errors import engine_fault
from ingestion_service.documents.registry import ConverterRegistry
from ingestion_service.documents.router import AutoRouter
from ingestion_service.errors import ExtractionError

from ..scripted_servers import GotenbergStandIn, ScriptedVisionServer, VisionReply  # noqa: TID252

if TYPE_CHECKING:
    from ..conftest import MakeSettings  # noqa: TID252

VECTOR = "docx/docling__textbox.docx"
RASTER = "docx/unstructured__contains-pictures.docx"
SMALL_PICTURES = "docx/kreuzberg__word_image_anchors.docx"
PLAIN_DOCX = "docx/docling__word_tables.docx"
SCAN_PDF = "pdf/kreuzberg__non_searchable.pdf"
TEXT_PDF = "pdf/kreuzberg__searchable.pdf"
JPEG = "jpg/unstructured__double-column-A.jpg"
VISION_URL = "http://127.0.0.1:9/v1"  # configured, never called: the converters here are fakes
GOTENBERG_URL = "http://127.0.0.1:9"  # likewise
ENGINES = ("kreuzberg", "tika", "vision-llm", "hybrid-diagram")


class RecordingConverter:
    """A converter that records its calls and returns one Document (optionally raising instead)."""

    profiles: frozenset[str] = frozenset()

    def __init__(self, name: str, *, meta: dict[str, Any] | None = None, error: Exception | None = None) -> None:
        self.name = name
        self.meta = meta or {}
        self.error = error
        self.calls: list[tuple[SourceFile, str | None]] = []

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:
        self.calls.append((source, profile))
        if self.error is not None:
            raise self.error
        return [Document(content=f"text from {self.name}", meta=dict(self.meta))]


class Harness:
    """An AutoRouter over recording converters, built from settings overrides."""

    def __init__(self, make_settings: MakeSettings, docs: Path, **overrides: Any) -> None:
        self.docs = docs
        self.engines = {name: RecordingConverter(name) for name in ENGINES}
        self.router = AutoRouter(make_settings(**overrides), engines=self.engines.__getitem__)

    def source(self, name: str) -> SourceFile:
        path = self.docs / name
        return SourceFile(path=path, filename=path.name)

    def run(self, name: str) -> tuple[str, str | None, Document]:
        """(engine called, profile passed, the single Document returned)."""
        [document] = self.router.convert(self.source(name))
        [(engine, calls)] = [(name, conv.calls) for name, conv in self.engines.items() if conv.calls]
        [(_, profile)] = calls
        return engine, profile, document


@pytest.fixture
def harness(make_test_settings: MakeSettings, docs: Path) -> Any:
    """``harness(**settings_overrides)`` -> a Harness; the vision endpoint and Gotenberg are configured
    unless overridden."""

    def factory(**overrides: Any) -> Harness:
        configured = {"vision_llm_api_base_url": VISION_URL, "gotenberg_url": GOTENBERG_URL}
        return Harness(make_test_settings, docs, **{**configured, **overrides})

    return factory


def test_vector_flowchart_goes_to_hybrid_with_the_topology_profile(harness: Any) -> None:
    engine, profile, document = harness().run(VECTOR)
    assert (engine, profile) == ("hybrid-diagram", "diagram-topology")
    assert document.meta["extractor"] == "hybrid-diagram"
    assert document.meta["extraction_route"] == "diagram:vector"
    assert document.meta["vision_profile"] == "diagram-topology"


def test_raster_figure_goes_to_hybrid_with_the_figure_profile(harness: Any) -> None:
    engine, profile, document = harness().run(RASTER)
    assert (engine, profile) == ("hybrid-diagram", "figure")
    assert document.meta["extraction_route"] == "diagram:raster"
    assert document.meta["vision_profile"] == "figure"


@pytest.mark.parametrize("name", [PLAIN_DOCX, SMALL_PICTURES, TEXT_PDF])
def test_documents_without_a_signal_go_to_the_default_engine(harness: Any, name: str) -> None:
    engine, profile, document = harness().run(name)
    assert (engine, profile) == ("kreuzberg", None)
    assert document.meta["extractor"] == "kreuzberg"
    assert document.meta["extraction_route"] == "default"
    assert "vision_profile" not in document.meta


def test_default_engine_is_configurable(harness: Any) -> None:
    engine, _, document = harness(extraction_router_default="tika").run(PLAIN_DOCX)
    assert engine == "tika"
    assert document.meta["extractor"] == "tika"


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        (VECTOR, {"extraction_router_min_textboxes": 28}),
        (VECTOR, {"extraction_router_drawing_ratio": 20.0}),
        (RASTER, {"extraction_router_min_body_images": 6}),
        (RASTER, {"extraction_router_min_image_emu": 3_000_000_000_000}),
        (RASTER, {"extraction_router_min_image_word_ratio": 1e11}),
    ],
)
def test_raised_thresholds_turn_a_signal_off(harness: Any, name: str, overrides: dict[str, Any]) -> None:
    engine, _, document = harness(**overrides).run(name)
    assert engine == "kreuzberg"
    assert document.meta["extraction_route"] == "default"


def test_lowered_area_floor_turns_small_pictures_into_a_figure(harness: Any) -> None:
    engine, profile, _ = harness(extraction_router_min_image_emu=200_000_000_000).run(SMALL_PICTURES)
    assert (engine, profile) == ("hybrid-diagram", "figure")


def test_vision_llm_as_diagram_engine_gets_the_configured_profile(harness: Any) -> None:
    engine, profile, document = harness(extraction_router_diagram_engine="vision-llm").run(VECTOR)
    assert (engine, profile) == ("vision-llm", "diagram")
    assert document.meta["vision_profile"] == "diagram"


def test_hybrid_profile_from_settings_is_honoured(harness: Any) -> None:
    _, profile, _ = harness(extraction_router_diagram_profile="figure").run(VECTOR)
    assert profile == "figure"


def test_non_vision_diagram_engine_gets_no_profile(harness: Any) -> None:
    engine, profile, document = harness(extraction_router_diagram_engine="tika").run(VECTOR)
    assert (engine, profile) == ("tika", None)
    assert document.meta["extraction_route"] == "diagram:vector"
    assert "vision_profile" not in document.meta


@pytest.mark.parametrize("name", [SCAN_PDF, JPEG])
def test_scans_go_to_kreuzberg_ocr_by_default(harness: Any, name: str) -> None:
    engine, profile, document = harness(extraction_router_default="tika").run(name)
    assert (engine, profile) == ("kreuzberg", None)
    assert document.meta["extraction_route"] == "scan"


@pytest.mark.parametrize("name", [SCAN_PDF, JPEG])
def test_scans_go_to_vision_ocr_when_configured(harness: Any, name: str) -> None:
    engine, profile, document = harness(extraction_router_scan_engine="vision-llm").run(name)
    assert (engine, profile) == ("vision-llm", "ocr")
    assert document.meta["extraction_route"] == "scan"
    assert document.meta["vision_profile"] == "ocr"


@pytest.mark.parametrize(
    ("name", "overrides", "route"),
    [
        (VECTOR, {}, "diagram:vision-unconfigured"),
        (RASTER, {}, "diagram:vision-unconfigured"),
        (SCAN_PDF, {"extraction_router_scan_engine": "vision-llm"}, "scan:vision-unconfigured"),
    ],
)
def test_vision_routes_fall_back_to_the_default_without_a_vision_endpoint(
    harness: Any, name: str, overrides: dict[str, Any], route: str
) -> None:
    run = harness(vision_llm_api_base_url="", **overrides)
    engine, profile, document = run.run(name)
    assert (engine, profile) == ("kreuzberg", None)
    assert document.meta["extraction_route"] == route
    assert "vision_profile" not in document.meta
    assert run.router.decide(run.source(name)).signals["wanted_engine"] in ("hybrid-diagram", "vision-llm")


@pytest.mark.parametrize("diagram_engine", ["hybrid-diagram", "vision-llm"])
@pytest.mark.parametrize("name", [VECTOR, RASTER])
def test_diagram_docx_falls_back_to_the_default_without_gotenberg(
    harness: Any, name: str, diagram_engine: str, caplog: pytest.LogCaptureFixture
) -> None:
    run = harness(gotenberg_url="", extraction_router_diagram_engine=diagram_engine)
    with caplog.at_level(logging.WARNING, logger="ingestion_service.documents.router"):
        engine, profile, document = run.run(name)
        run.router.convert(run.source(name))
    assert (engine, profile) == ("kreuzberg", None)
    assert document.meta["extraction_route"] == "diagram:gotenberg-unconfigured"
    assert "vision_profile" not in document.meta
    signals = run.router.decide(run.source(name)).signals
    assert signals["wanted_engine"] == diagram_engine
    assert "GOTENBERG_URL" in signals["missing"]
    [warning] = [record.getMessage() for record in caplog.records]  # once, not per document
    assert "diagram:gotenberg-unconfigured" in warning
    assert "GOTENBERG_URL" in warning


def test_vision_scans_do_not_need_gotenberg(harness: Any) -> None:
    engine, profile, document = harness(gotenberg_url="", extraction_router_scan_engine="vision-llm").run(SCAN_PDF)
    assert (engine, profile) == ("vision-llm", "ocr")
    assert document.meta["extraction_route"] == "scan"


def test_ocr_scan_route_does_not_need_a_vision_endpoint(harness: Any) -> None:
    engine, _, document = harness(vision_llm_api_base_url="").run(SCAN_PDF)
    assert engine == "kreuzberg"
    assert document.meta["extraction_route"] == "scan"


def test_engine_failure_propagates_without_fallback(harness: Any) -> None:
    run = harness()
    run.engines["hybrid-diagram"].error = engine_fault("vision-llm", "vision endpoint http://x is unreachable")
    with pytest.raises(ExtractionError) as caught:
        run.router.convert(run.source(VECTOR))
    assert not caught.value.document_problem
    assert not run.engines["kreuzberg"].calls


def test_engine_meta_wins_over_the_stamp(harness: Any) -> None:
    run = harness()
    run.engines["hybrid-diagram"].meta = {"extractor": "vision-llm", "vision_profile": "general"}
    _, _, document = run.run(VECTOR)
    assert document.meta["extractor"] == "vision-llm"
    assert document.meta["vision_profile"] == "general"
    assert document.meta["extraction_route"] == "diagram:vector"


def test_decide_reports_signals_without_converting(harness: Any) -> None:
    run = harness()
    decision = run.router.decide(run.source(VECTOR))
    assert (decision.engine, decision.profile, decision.route) == (
        "hybrid-diagram",
        "diagram-topology",
        "diagram:vector",
    )
    assert decision.signals["kind"] == "docx"
    assert decision.signals["textboxes"] == 27
    assert decision.signals["vector"] is True
    assert decision.as_dict()["signals"]["textboxes"] == 27
    scan = run.router.decide(run.source(SCAN_PDF))
    assert scan.signals == {"kind": "pdf", "pdf_text_chars": [0]}
    assert not any(converter.calls for converter in run.engines.values())


def test_docx_is_recognised_by_content_not_name(harness: Any, tmp_path: Path) -> None:
    run = harness()
    renamed = tmp_path / "upload"
    renamed.write_bytes((run.docs / VECTOR).read_bytes())
    decision = run.router.decide(SourceFile(path=renamed, filename="upload"))
    assert decision.route == "diagram:vector"


def test_docx_the_detectors_cannot_read_goes_to_the_default(harness: Any, tmp_path: Path) -> None:
    path = tmp_path / "doctype.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("word/document.xml", '<!DOCTYPE d [<!ENTITY e "x">]><d>&e;</d>')
    run = harness()
    [document] = run.router.convert(SourceFile(path=path, filename=path.name))
    assert document.meta["extraction_route"] == "default"
    assert run.engines["kreuzberg"].calls
    assert "DTD" in run.router.decide(SourceFile(path=path, filename=path.name)).signals["docx_error"]


def test_docx_too_large_to_inspect_goes_to_the_default(
    harness: Any, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(docx_package, "MAX_PART_BYTES", 1024)
    decision = harness().router.decide(SourceFile(path=docs / VECTOR, filename="flow.docx"))
    assert (decision.engine, decision.route) == ("kreuzberg", "default")
    assert "word/document.xml" in decision.signals["docx_error"]


def test_each_decision_is_logged_at_debug_with_its_signals(harness: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="ingestion_service.documents.router")
    harness().run(VECTOR)
    [record] = [record for record in caplog.records if record.getMessage() == "extraction route"]
    assert record.levelno == logging.DEBUG
    fields = vars(record)
    assert fields["extraction_engine"] == "hybrid-diagram"
    assert fields["extraction_profile"] == "diagram-topology"
    assert fields["extraction_route"] == "diagram:vector"
    assert fields["source_filename"] == "docling__textbox.docx"
    assert fields["route_signals"]["textboxes"] == 27
    assert fields["route_signals"]["drawing_ratio"] >= 2.0


def test_configured_vision_endpoint_that_fails_is_an_extraction_failure(
    make_test_settings: MakeSettings,
    docs: Path,
    vision_server: ScriptedVisionServer,
    gotenberg_server: GotenbergStandIn,
) -> None:
    # The real registry: auto -> hybrid-diagram -> vision-llm, through loopback servers.
    vision_server.script(VisionReply(status=503))
    settings = make_test_settings(
        extraction_engine="auto",
        vision_llm_api_base_url=vision_server.base_url,
        gotenberg_url=gotenberg_server.url,
        vision_llm_dpi=36,
    )
    registry = ConverterRegistry(settings)
    try:
        with pytest.raises(ExtractionError) as caught:
            registry.get("auto").convert(SourceFile(path=docs / VECTOR, filename="flow.docx"))
    finally:
        registry.close()
    assert not caught.value.document_problem
    assert caught.value.code == "EXTRACTION_FAILED"
    assert vision_server.base_url.removesuffix("/v1") in str(caught.value)
    assert len(vision_server.requests) == 1

"""``auto``: picks a concrete engine per document by inspecting its content.

* DOCX (a ZIP holding ``word/document.xml``) with a vector-flowchart or raster-figure signal
  (``docx_package.DiagramSignals``) -> EXTRACTION_ROUTER_DIAGRAM_ENGINE.
* Image-only PDFs and image files (``scan_detect``) -> the scan engine: EXTRACTION_ROUTER_SCAN_ENGINE
  ``ocr`` is kreuzberg with Tesseract, ``vision-llm`` the vision engine's ``ocr`` profile.
* Everything else -> EXTRACTION_ROUTER_DEFAULT.

A vision engine is chosen only while a vision endpoint is configured, and for a DOCX only while
Gotenberg (GOTENBERG_URL) is too, since the vision engines render office files through it; otherwise
the document goes to the default engine and the route says why (``<kind>:vision-unconfigured``,
``diagram:gotenberg-unconfigured``; a WARNING the first time, and ``extraction_routes_total``), so
``auto`` still ingests everything. A configured endpoint that fails is the vision engine's error,
never a silent fallback. Each decision is logged at DEBUG with its signals and stamped on the
returned Documents' meta.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from haystack import Document

from ingestion_service.documents import docx_package, scan_detect
from ingestion_service.documents.base import Converter, SourceFile
from ingestion_service.documents.hybrid_diagram import DOCX_PROFILES, RASTER_PROFILE, VECTOR_PROFILE
from ingestion_service.errors import DocumentTooLargeError, ExtractionError
from ingestion_service.settings import Settings

logger = logging.getLogger(__name__)

ENGINE = "auto"
VISION_ENGINES = frozenset({"vision-llm", "hybrid-diagram"})
OCR_ENGINE = "kreuzberg"
SCAN_VISION_PROFILE = "ocr"
# Meta keys stamped on every Document the router returns.
EXTRACTOR_KEY = "extractor"
ROUTE_KEY = "extraction_route"
PROFILE_KEY = "vision_profile"
_UNCONFIGURED = "-unconfigured"
_NO_VISION = "no vision endpoint (VISION_LLM_API_BASE_URL, or a provider prefix on VISION_LLM_MODEL)"
_NO_GOTENBERG = "GOTENBERG_URL is unset, and the vision engines render office files to pages through Gotenberg"


@dataclass(frozen=True)
class RouteDecision:
    """Where one document goes: the engine, its profile, a short route name and the detector signals."""

    engine: str
    profile: str | None
    # "default", "diagram:vector", "diagram:raster", "scan", "<kind>:vision-unconfigured" or
    # "diagram:gotenberg-unconfigured".
    route: str
    signals: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (the extract probe shows it)."""
        return {"engine": self.engine, "profile": self.profile, "route": self.route, "signals": dict(self.signals)}


class AutoRouter:
    """The ``auto`` routing mode: decides per document, then runs the chosen engine."""

    name = ENGINE
    # The route picks the profile; a caller's profile is not taken (the probe never accepts ``auto``).
    profiles: frozenset[str] = frozenset()

    def __init__(
        self,
        settings: Settings,
        engines: Callable[[str], Converter],
        *,
        observe_route: Callable[[str], None] | None = None,
    ) -> None:
        self._settings = settings
        self._engines = engines
        # Called with each converted document's route (the ingestion metrics count them).
        self._observe_route = observe_route
        self._fallbacks_said: set[str] = set()

    def decide(self, source: SourceFile) -> RouteDecision:
        """The engine, profile and route for ``source``, from its content (reads the file, runs nothing)."""
        path = source.path
        if docx_package.is_docx(path):
            return self._docx(source)
        image = scan_detect.image_format(path)
        if image is not None:
            return self._scan({"kind": "image", "image_format": image})
        if scan_detect.is_pdf(path):
            counts = scan_detect.pdf_text_chars(path)
            signals: dict[str, Any] = {"kind": "pdf", "pdf_text_chars": counts}
            if scan_detect.no_text_layer(counts):
                return self._scan(signals)
            return self._default(signals)
        return self._default({"kind": "other"})

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:  # noqa: ARG002 - the route picks the profile
        """Run the engine :meth:`decide` picks; its Documents carry ``extractor`` and ``extraction_route``."""
        decision = self.decide(source)
        logger.debug(
            "extraction route",
            extra={
                "source_filename": source.filename,
                "extraction_engine": decision.engine,
                "extraction_profile": decision.profile,
                "extraction_route": decision.route,
                "route_signals": decision.signals,
            },
        )
        if decision.route.endswith(_UNCONFIGURED) and decision.route not in self._fallbacks_said:
            self._fallbacks_said.add(decision.route)
            logger.warning(
                "auto: %s goes to %s, not %s: %s (said once; extraction_routes_total counts each document)",
                decision.route,
                decision.engine,
                decision.signals["wanted_engine"],
                decision.signals["missing"],
            )
        if self._observe_route is not None:
            self._observe_route(decision.route)
        documents = self._engines(decision.engine).convert(source, profile=decision.profile)
        return [self._stamped(document, decision) for document in documents]

    def _docx(self, source: SourceFile) -> RouteDecision:
        settings = self._settings
        try:
            measured = docx_package.diagram_signals(source.path)
        except ExtractionError as exc:
            if not exc.document_problem:
                raise
            # The detectors' strict reader refused the package; the default engine reads it or says why.
            return self._default({"kind": "docx", "docx_error": str(exc)})
        except DocumentTooLargeError as exc:
            return self._default({"kind": "docx", "docx_error": str(exc)})
        vector = measured.vector_flowchart(
            min_textboxes=settings.extraction_router_min_textboxes, min_ratio=settings.extraction_router_drawing_ratio
        )
        raster = measured.raster_figure(
            min_images=settings.extraction_router_min_body_images,
            min_image_emu=settings.extraction_router_min_image_emu,
            min_image_word_ratio=settings.extraction_router_min_image_word_ratio,
        )
        signals: dict[str, Any] = {"kind": "docx", **measured.as_dict(), "vector": vector, "raster": raster}
        if not (vector or raster):
            return self._default(signals)
        engine = settings.extraction_router_diagram_engine
        profile: str | None = None
        if engine == "hybrid-diagram":
            configured = settings.extraction_router_diagram_profile
            # hybrid-diagram's own profiles are honoured; any other means "pick by the signal".
            profile = configured if configured in DOCX_PROFILES else (VECTOR_PROFILE if vector else RASTER_PROFILE)
        elif engine == "vision-llm":
            profile = settings.extraction_router_diagram_profile
        return self._vision_checked(
            RouteDecision(engine, profile, "diagram:vector" if vector else "diagram:raster", signals),
            "diagram",
            office=True,
        )

    def _scan(self, signals: dict[str, Any]) -> RouteDecision:
        if self._settings.extraction_router_scan_engine == "vision-llm":
            return self._vision_checked(RouteDecision("vision-llm", SCAN_VISION_PROFILE, "scan", signals), "scan")
        return RouteDecision(OCR_ENGINE, None, "scan", signals)

    def _default(self, signals: dict[str, Any]) -> RouteDecision:
        return RouteDecision(self._settings.extraction_router_default, None, "default", signals)

    def _vision_checked(self, decision: RouteDecision, kind: str, *, office: bool = False) -> RouteDecision:
        """``decision``, or the default engine when it needs a vision endpoint that is not configured,
        or (``office``: a DOCX, which the vision engines render through Gotenberg) GOTENBERG_URL."""
        settings = self._settings
        if decision.engine not in VISION_ENGINES:
            return decision
        if not settings.vision_configured:
            missing, route = _NO_VISION, f"{kind}:vision-unconfigured"
        elif office and not settings.gotenberg_url:
            missing, route = _NO_GOTENBERG, f"{kind}:gotenberg-unconfigured"
        else:
            return decision
        return RouteDecision(
            settings.extraction_router_default,
            None,
            route,
            {**decision.signals, "wanted_engine": decision.engine, "wanted_route": decision.route, "missing": missing},
        )

    @staticmethod
    def _stamped(document: Document, decision: RouteDecision) -> Document:
        meta = dict(document.meta)
        # The engine's own record wins: hybrid-diagram names vision-llm when it fell through to it.
        meta.setdefault(EXTRACTOR_KEY, decision.engine)
        meta[ROUTE_KEY] = decision.route
        if decision.engine in VISION_ENGINES and decision.profile is not None:
            meta.setdefault(PROFILE_KEY, decision.profile)
        return Document(content=document.content, meta=meta)

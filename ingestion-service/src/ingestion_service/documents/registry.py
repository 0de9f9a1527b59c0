"""Engine name -> converter. New engines (vision, the ``auto`` router) register a factory here."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from ingestion_service.documents.base import ClosableConverter, Converter
from ingestion_service.errors import InvalidRequestError
from ingestion_service.settings import Settings

ConverterFactory = Callable[[Settings], Converter]

CONCRETE_ENGINES: tuple[str, ...] = (
    "kreuzberg",
    "kreuzberg-http",
    "tika",
    "pypdf",
    "docling",
    "unstructured",
    "vision-llm",
    "hybrid-diagram",
)
# Routing modes pick a concrete engine per document; the extract probe never accepts them.
ROUTING_MODES: frozenset[str] = frozenset({"auto"})


def default_factories() -> dict[str, ConverterFactory]:
    """The built-in engines; imports are deferred so optional ones cost nothing until used."""

    def kreuzberg(settings: Settings) -> Converter:
        from ingestion_service.documents.kreuzberg_local import KreuzbergConverter

        return KreuzbergConverter(settings)

    def kreuzberg_http(settings: Settings) -> Converter:
        from ingestion_service.documents.kreuzberg_http import KreuzbergHttpConverter

        return KreuzbergHttpConverter(settings)

    def tika(settings: Settings) -> Converter:
        from ingestion_service.documents.tika import TikaConverter

        return TikaConverter(settings)

    def pypdf(_: Settings) -> Converter:
        from ingestion_service.documents.pypdf_engine import PypdfConverter

        return PypdfConverter()

    def docling(_: Settings) -> Converter:
        from ingestion_service.documents.optional import DoclingConverter

        return DoclingConverter()

    def unstructured(_: Settings) -> Converter:
        from ingestion_service.documents.optional import UnstructuredConverter

        return UnstructuredConverter()

    def vision_llm(settings: Settings) -> Converter:
        from ingestion_service.documents.vision_llm import VisionLlmConverter

        return VisionLlmConverter(settings)

    return {
        "vision-llm": vision_llm,
        "kreuzberg": kreuzberg,
        "kreuzberg-http": kreuzberg_http,
        "tika": tika,
        "pypdf": pypdf,
        "docling": docling,
        "unstructured": unstructured,
    }


class ConverterRegistry:
    """Builds each engine once, on first use, and hands out the same instance afterwards."""

    def __init__(
        self,
        settings: Settings,
        factories: Mapping[str, ConverterFactory] | None = None,
        *,
        observe_route: Callable[[str], None] | None = None,
    ) -> None:
        self._settings = settings
        # The ``auto`` router calls it with each document's route (``extraction_routes_total``).
        self._observe_route = observe_route
        self._factories: dict[str, ConverterFactory] = dict(default_factories() if factories is None else factories)
        if factories is None:
            # Engines built from other engines look them up here, so an injected replacement
            # (a scripted vision engine in tests) is what they wrap.
            self._factories["hybrid-diagram"] = self._hybrid_diagram
            self._factories["auto"] = self._auto
        self._instances: dict[str, Converter] = {}
        self._lock = threading.RLock()

    def _hybrid_diagram(self, settings: Settings) -> Converter:
        from ingestion_service.documents.hybrid_diagram import HybridDiagramConverter

        return HybridDiagramConverter(settings, vision=lambda: self.get("vision-llm"))

    def _auto(self, settings: Settings) -> Converter:
        from ingestion_service.documents.router import AutoRouter

        return AutoRouter(settings, engines=self.get, observe_route=self._observe_route)

    @property
    def names(self) -> list[str]:
        """Every registered engine name."""
        return sorted(self._factories)

    def register(self, name: str, factory: ConverterFactory) -> None:
        """Add or replace an engine (tests inject failing or scripted converters this way)."""
        with self._lock:
            self._factories[name] = factory
            self._instances.pop(name, None)

    def get(self, name: str) -> Converter:
        """The converter for ``name``; unknown names and missing optional extras are INVALID_REQUEST."""
        with self._lock:
            instance = self._instances.get(name)
            if instance is not None:
                return instance
            factory = self._factories.get(name)
            if factory is None:
                known = ", ".join(self.names)
                raise InvalidRequestError(f"Invalid request: engine (and each of engines) must be one of {known}.")
            instance = factory(self._settings)
            self._instances[name] = instance
            return instance

    def close(self) -> None:
        """Close every built engine that holds a resource (shutdown); later ``get`` builds afresh."""
        with self._lock:
            instances = list(self._instances.values())
            self._instances.clear()
        for instance in instances:
            if isinstance(instance, ClosableConverter):
                instance.close()

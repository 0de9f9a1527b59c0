"""Reading documents: content sniffing and structural limits before any engine runs, then the
extraction engines behind one ``Converter`` seam, looked up by engine name."""

from ingestion_service.documents.base import Converter, SourceFile
from ingestion_service.documents.registry import (
    CONCRETE_ENGINES,
    ROUTING_MODES,
    ConverterFactory,
    ConverterRegistry,
    default_factories,
)

__all__ = [
    "CONCRETE_ENGINES",
    "ROUTING_MODES",
    "Converter",
    "ConverterFactory",
    "ConverterRegistry",
    "SourceFile",
    "default_factories",
]

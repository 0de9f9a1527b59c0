"""Extraction alone, as Open WebUI's loaders get it: a staged file through the ingest path's content
checks, engine (EXTRACTION_ENGINE, ``auto`` included), OCR and limits, without chunking or storing.

The document loader (``PUT /process``) and the web loader (``POST /process``) answer with this.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from haystack import Document

from ingestion_service.documents import SourceFile
from ingestion_service.intake.staging import prepare_source
from ingestion_service.pipeline.components.file_converter import EXTRACTOR_KEY, convert_checked
from ingestion_service.run_control import run_bounded
from ingestion_service.runtime import ServiceRuntime

# What a citation needs; the rest of the extractor's metadata stays internal.
PAGE_METADATA_KEYS = (
    "page",
    "title",
    "authors",
    "languages",
    "mime_type",
    EXTRACTOR_KEY,
    "extraction_route",
    "vision_profile",
    "ocr",
)


@dataclass(frozen=True)
class ExtractedFile:
    """A staged file as engines saw it, what they returned, and the engine asked (``auto`` names its choice per document)."""

    source: SourceFile
    documents: list[Document]
    engine: str


async def extract_file(runtime: ServiceRuntime, path: Path, filename: str) -> ExtractedFile:
    """Check the staged file and extract it: INGEST_TIMEOUT_SECONDS and the INGEST_CONCURRENCY slots apply."""
    settings = runtime.settings
    source = await prepare_source(runtime, path, filename)
    converter = runtime.registry.get(settings.extraction_engine)
    documents = await run_bounded(
        functools.partial(convert_checked, converter, source, max_chars=settings.max_extracted_chars),
        timeout_seconds=settings.ingest_timeout_seconds,
        limiter=runtime.limiter,
    )
    return ExtractedFile(source=source, documents=documents, engine=converter.name)


def page_metadata(document: Document, engine: str) -> dict[str, Any]:
    """A document's citation metadata (PAGE_METADATA_KEYS), ``extractor`` defaulting to ``engine``."""
    metadata = {key: document.meta[key] for key in PAGE_METADATA_KEYS if key in document.meta}
    metadata.setdefault(EXTRACTOR_KEY, engine)
    return metadata

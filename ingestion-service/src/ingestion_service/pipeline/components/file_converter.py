"""Converter stage: a file -> Documents through the selected engine, request metadata merged in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from haystack import Document, component

from ingestion_service.documents import Converter, ConverterRegistry, SourceFile
from ingestion_service.documents.front_matter import FRONT_MATTER_KEY, typed_labels, without_front_matter
from ingestion_service.errors import DocumentTooLargeError, ExtractionError, IngestionError, NoExtractableTextError
from ingestion_service.pipeline.observe import StageObserver, timed
from ingestion_service.run_control import checkpoint, report_progress
from shared_contract.attributes import AttributeType

EXTRACTOR_KEY = "extractor"


# Format characters (a byte-order mark, zero-width spaces and joiners) are not text to index.
_INVISIBLE = {ord(char): None for char in "\ufeff\u200b\u200c\u200d\u2060\u00ad"}


def require_text(documents: list[Document]) -> None:
    """Raise the documented 422 when extraction found no visible text at all."""
    if not any((document.content or "").translate(_INVISIBLE).strip() for document in documents):
        raise NoExtractableTextError()


def check_extracted_size(documents: list[Document], max_chars: int | None) -> None:
    """DOCUMENT_TOO_LARGE when the extracted text exceeds MAX_EXTRACTED_CHARS."""
    if max_chars is None:
        return
    total = sum(len(document.content or "") for document in documents)
    if total > max_chars:
        raise DocumentTooLargeError(
            f"The document's extracted text ({total} characters) exceeds MAX_EXTRACTED_CHARS ({max_chars})."
        )


def convert_checked(
    converter: Converter, source: SourceFile, *, profile: str | None = None, max_chars: int | None = None
) -> list[Document]:
    """One engine on ``source`` with the pipeline's checks (blocking: a worker thread).

    The profile goes only to an engine that has it; an engine bug is still a typed extraction error.
    A Markdown file's front matter is read here and never reaches the engine (``front_matter``).
    """
    with without_front_matter(source) as reading:
        try:
            documents = converter.convert(reading.source, profile=profile if profile in converter.profiles else None)
        except IngestionError:
            raise
        except Exception as exc:  # an engine bug is still an extraction failure, typed as one
            raise ExtractionError(f"{converter.name}: {type(exc).__name__}: {exc}") from exc
    documents = reading.apply(documents)
    check_extracted_size(documents, max_chars)
    require_text(documents)
    return documents


@component
class FileConverter:
    """Runs one engine from the registry (EXTRACTION_ENGINE, or a per-run override)."""

    def __init__(
        self,
        registry: ConverterRegistry,
        default_engine: str,
        observer: StageObserver | None = None,
        *,
        max_chars: int | None = None,
        attribute_types: Mapping[str, AttributeType] | None = None,
    ) -> None:
        self.registry = registry
        self.default_engine = default_engine
        self.observer = observer
        self.max_chars = max_chars
        # INDEXED_ATTRIBUTES: a front matter attribute of another type is left out.
        self.attribute_types = dict(attribute_types) if attribute_types is not None else {}

    @component.output_types(documents=list[Document], source=SourceFile)
    def run(
        self,
        source: SourceFile,
        meta: dict[str, Any],
        engine: str | None = None,
        extracted: list[Document] | None = None,
    ) -> dict[str, Any]:
        """Extract ``source``; request ``meta`` wins over extractor metadata on key collisions.

        ``extracted``: what ``convert_checked`` already returned for ``source`` with this engine (the
        document loader answers with it), used instead of a second extraction.
        """
        with timed(self.observer, "converter"):
            converter = self.registry.get(engine if engine is not None else self.default_engine)
            checkpoint()
            report_progress("converting", 0, 1)
            if extracted is None:
                extracted = convert_checked(converter, source, max_chars=self.max_chars)
            checkpoint()
            report_progress("converting", 1, 1)
            documents = [
                # A router (auto) records the concrete engine it chose; others are their own extractor.
                Document(
                    content=document.content or "",
                    meta={EXTRACTOR_KEY: converter.name, **self._typed(document.meta), **meta},
                )
                for document in extracted
            ]
        # The file goes on too: where each chunk sits on its page is read from it.
        return {"documents": documents, "source": source}

    def _typed(self, meta: dict[str, Any]) -> dict[str, Any]:
        labels = meta.get(FRONT_MATTER_KEY)
        if not isinstance(labels, dict):
            return meta
        return {**meta, FRONT_MATTER_KEY: typed_labels(labels, self.attribute_types)}

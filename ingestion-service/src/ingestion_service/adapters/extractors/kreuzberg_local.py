"""Kreuzberg in-process (the default engine): Markdown output with tables, metadata, languages."""

from __future__ import annotations

from typing import Any

from haystack import Document

from ingestion_service.adapters.extractors import _errors
from ingestion_service.adapters.extractors.base import SourceFile
from ingestion_service.adapters.extractors.languages import to_iso639_1
from ingestion_service.settings import Settings

ENGINE = "kreuzberg"


LANGUAGE_MIN_CONFIDENCE = 0.1


def document_metadata(metadata: Any, languages: list[str] | None) -> dict[str, Any]:
    """title / authors / languages from a kreuzberg result (in-process or over HTTP)."""
    meta: dict[str, Any] = {}
    if isinstance(metadata, dict):
        title = metadata.get("title")
        if isinstance(title, str) and title.strip():
            meta["title"] = title.strip()
        authors = metadata.get("authors")
        if isinstance(authors, str):
            authors = [authors]
        if isinstance(authors, list):
            cleaned = [str(author).strip() for author in authors if str(author).strip()]
            if cleaned:
                meta["authors"] = cleaned
    codes = to_iso639_1(languages)
    if codes:
        meta["languages"] = codes
    return meta


class KreuzbergConverter:
    """``kreuzberg.extract_file_sync`` with one fixed configuration built at start-up."""

    name = ENGINE
    profiles: frozenset[str] = frozenset()

    def __init__(self, settings: Settings) -> None:
        import kreuzberg

        ocr = kreuzberg.OcrConfig(backend="tesseract", language=settings.ocr_language) if settings.enable_ocr else None
        self._config = kreuzberg.ExtractionConfig(
            # The result cache writes to disk and could serve a stale extraction for a reused path.
            use_cache=False,
            output_format="markdown",  # tables come out as Markdown tables, headings as '#'
            ocr=ocr,
            images=kreuzberg.ImageExtractionConfig(extract_images=False),
            pdf_options=kreuzberg.PdfConfig(extract_metadata=True),
            # One primary language: multi-language detection tags most long documents with
            # several spurious languages (measured on ../shared/eval/docs), which would make the
            # meta.languages filter match wrongly.
            # kreuzberg's default confidence bar left 12 of 30 Norwegian news passages without a
            # language; the language picks the chunk's stemmed BM25 field, so accept lower confidence.
            language_detection=kreuzberg.LanguageDetectionConfig(
                enabled=True, detect_multiple=False, min_confidence=LANGUAGE_MIN_CONFIDENCE
            ),
        )
        self._ocr_enabled = settings.enable_ocr

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:  # noqa: ARG002 - protocol signature; text engines take no profile
        import kreuzberg
        from kreuzberg.exceptions import (
            KreuzbergError,
            MissingDependencyError,
            OCRError,
            ParsingError,
            ValidationError,
        )

        try:
            result = kreuzberg.extract_file_sync(str(source.path), config=self._config)
        except OCRError as exc:
            if self._ocr_enabled:
                raise _errors.engine_fault(ENGINE, f"OCR failed: {exc.message}") from exc
            raise _errors.needs_ocr(ENGINE, "image content needs OCR, which is disabled") from exc
        except ParsingError as exc:
            raise _errors.unparseable(ENGINE, exc.message) from exc
        except ValidationError as exc:
            # kreuzberg reports an unreadable MIME type as a validation error naming the type.
            raise _errors.unsupported(ENGINE, f"unsupported format {exc.message}") from exc
        except MissingDependencyError as exc:
            raise _errors.engine_fault(ENGINE, exc.message) from exc
        except KreuzbergError as exc:
            raise _errors.engine_fault(ENGINE, f"{type(exc).__name__}: {exc.message}") from exc
        meta = document_metadata(result.metadata, result.detected_languages)
        meta["mime_type"] = result.mime_type
        return [Document(content=result.content, meta=meta)]

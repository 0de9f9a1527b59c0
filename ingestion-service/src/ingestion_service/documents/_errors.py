"""Shared helpers engines use to report why a document could not be read."""

from __future__ import annotations

from ingestion_service.errors import (
    CORRUPT_REASON,
    ENCRYPTED_REASON,
    UNSUPPORTED_REASON,
    ExtractionDependencyError,
    ExtractionError,
    NoExtractableTextError,
)

_ENCRYPTION_HINTS = ("password", "encrypt", "decrypt")


def encrypted(engine: str, detail: str) -> ExtractionError:
    """The document is encrypted (422)."""
    return ExtractionError(f"{engine}: {detail}", document_problem=True, reason=ENCRYPTED_REASON)


def unsupported(engine: str, detail: str) -> ExtractionError:
    """The engine does not read this format (422)."""
    return ExtractionError(f"{engine}: {detail}", document_problem=True, reason=UNSUPPORTED_REASON)


def unparseable(engine: str, detail: str) -> ExtractionError:
    """The document is damaged, or encrypted when the message says so (422)."""
    if any(hint in detail.lower() for hint in _ENCRYPTION_HINTS):
        return encrypted(engine, detail)
    return ExtractionError(f"{engine}: {detail}", document_problem=True, reason=CORRUPT_REASON)


def needs_ocr(engine: str, detail: str) -> ExtractionError:
    """An image or scan without a text layer while OCR is off or unavailable (422)."""
    return NoExtractableTextError(f"{engine}: {detail}")


def engine_fault(engine: str, detail: str) -> ExtractionError:
    """The engine itself failed (500)."""
    return ExtractionError(f"{engine}: {detail}")


def dependency_fault(
    engine: str, dependency: str, problem: str, *, setting: str, internal: str = ""
) -> ExtractionError:
    """A service the engine needs failed or is not configured (500, the body names it and the setting)."""
    return ExtractionDependencyError(
        dependency, problem, setting=setting, internal=f"{engine}: {internal or f'{dependency} {problem}'}"
    )

"""docling and unstructured: optional extras, imported only when selected.

Neither is a dependency of the service. Selecting one without its package installed is a
configuration or request error (INVALID_REQUEST naming the package), never a crash at import.
"""

from __future__ import annotations

import importlib
from typing import Any

from haystack import Document

from ingestion_service.documents import _errors
from ingestion_service.documents.base import SourceFile
from ingestion_service.errors import EngineUnavailableError


def _import(engine: str, module: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise EngineUnavailableError(
            f"Extraction engine {engine!r} needs the optional extra {package!r}, which is not installed."
        ) from exc


class DoclingConverter:  # pragma: no cover - the extra is not installed in CI
    """docling's DocumentConverter, exported to Markdown."""

    name = "docling"
    profiles: frozenset[str] = frozenset()

    def __init__(self) -> None:
        module = _import(self.name, "docling.document_converter", "docling")
        self._converter = module.DocumentConverter()

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:  # noqa: ARG002 - protocol signature; text engines take no profile
        try:
            result = self._converter.convert(str(source.path))
            markdown = result.document.export_to_markdown()
        except Exception as exc:  # docling raises many unrelated types; all are extraction failures
            raise _errors.engine_fault(self.name, type(exc).__name__) from exc
        return [Document(content=str(markdown), meta={})]


class UnstructuredConverter:  # pragma: no cover - the extra is not installed in CI
    """unstructured's ``partition``; elements joined by blank lines, titles as Markdown headings."""

    name = "unstructured"
    profiles: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self._partition = _import(self.name, "unstructured.partition.auto", "unstructured").partition

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:  # noqa: ARG002 - protocol signature; text engines take no profile
        try:
            elements = self._partition(filename=str(source.path))
        except Exception as exc:  # unstructured raises many unrelated types; all are extraction failures
            raise _errors.engine_fault(self.name, type(exc).__name__) from exc
        parts = [f"# {el.text}" if getattr(el, "category", "") == "Title" else str(el.text) for el in elements]
        return [Document(content="\n\n".join(part for part in parts if part.strip()), meta={})]

"""The converter seam: what every extraction engine (text, sidecar, vision, router) implements."""

from __future__ import annotations

import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from haystack import Document

_PLAIN_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,10}$")


def plain_suffix(name: str) -> str:
    """``name``'s suffix when it is plain letters and digits (engines pick their parser by it), else ""."""
    suffix = Path(name).suffix
    return suffix if _PLAIN_SUFFIX.match(suffix) else ""


@dataclass(frozen=True)
class SourceFile:
    """A file to convert: a local path plus what the caller told us about it."""

    path: Path
    filename: str
    # Set when the content was recognised as a type other than the name suggests.
    media_type: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        """Serializable form (Haystack snapshots pipeline inputs when a run fails)."""
        return {"path": str(self.path), "filename": self.filename, "media_type": self.media_type}

    @property
    def mime_type(self) -> str | None:
        """The recognised type, else the one the file name suggests."""
        if self.media_type is not None:
            return self.media_type
        return mimetypes.guess_type(self.filename)[0]


@runtime_checkable
class Converter(Protocol):
    """One extraction engine.

    ``convert`` runs in a worker thread and returns Haystack Documents whose content is Markdown
    where the engine can produce it, with extractor metadata (title, authors, languages, page).
    Failures raise :class:`ingestion_service.errors.ExtractionError` (``document_problem=True``
    when the document itself is at fault). ``profiles`` is empty for engines without prompt
    profiles; vision engines list theirs, and an ``auto`` router can wrap other converters.
    """

    name: str
    profiles: frozenset[str]

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:
        """Extract ``source`` into one or more Documents."""
        ...


@runtime_checkable
class ClosableConverter(Converter, Protocol):
    """An engine holding a resource (an HTTP connection pool) that the registry closes at shutdown."""

    def close(self) -> None:
        """Release the resource; the converter is not used afterwards."""
        ...

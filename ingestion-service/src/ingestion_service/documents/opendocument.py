"""OpenDocument (ODT, ODS, ODP, ODG) to Markdown, in-process: content.xml read with the stdlib, DOCTYPEs refused.

Text documents and spreadsheets give one page (0); presentations and drawings one page per
``draw:page``. Speaker notes are kept under a ``### Notes`` heading; tracked deletions, comments
and embedded objects (ODF charts) are left out.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from xml.etree.ElementTree import Element

from ingestion_service.documents import _errors
from ingestion_service.documents._safe_xml import BadXmlError, parse_xml
from ingestion_service.documents.opendocument_xml import (
    ENGINE_NAME,
    PAGE,
    Renderer,
    q,
)
from ingestion_service.errors import DocumentTooLargeError

# content.xml above this is refused (the service's ZIP checks bound the archive as a whole).
MAX_CONTENT_BYTES = 128 * 1024 * 1024

# What zipfile raises for a damaged archive or member: bad structures, undecodable names, unknown
# versions or methods, truncated data, offsets out of the file (OSError on an open file);
# RuntimeError is its "password required" for an encrypted member.
_ZIP_DAMAGE = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError, ValueError)


@dataclass(frozen=True)
class OdfPage:
    """One page of Markdown: 0 for text documents and spreadsheets, the slide index for presentations."""

    number: int
    markdown: str


def read_opendocument(path: Path) -> list[OdfPage]:
    """The document's pages as Markdown.

    Raises the typed 422 error (``_errors.unparseable``) when the file is not a ZIP archive, has no
    content.xml, is encrypted, or holds malformed XML or a DOCTYPE; ``_errors.unsupported`` when
    content.xml is no text, spreadsheet, presentation or drawing; DocumentTooLargeError past the limits.
    """
    with _open(path) as archive:
        _refuse_encrypted(archive)
        root = _parse_member(archive, "content.xml")
    body = root.find(q("office:body"))
    kind = next(iter(body), None) if body is not None else None
    if kind is None:
        raise _errors.unparseable(ENGINE_NAME, "content.xml has no office:body content")
    renderer = Renderer()
    if kind.tag == q("office:text"):
        return [OdfPage(0, renderer.page(kind))]
    if kind.tag == q("office:spreadsheet"):
        return [OdfPage(0, renderer.spreadsheet(kind))]
    if kind.tag in (q("office:presentation"), q("office:drawing")):
        label = "Slide" if kind.tag == q("office:presentation") else "Page"
        return [OdfPage(index, renderer.slide(page, index, label)) for index, page in enumerate(kind.findall(PAGE))]
    raise _errors.unsupported(ENGINE_NAME, f"unsupported OpenDocument body {kind.tag.rpartition('}')[2]!r}")


def read_opendocument_title(path: Path) -> str | None:
    """dc:title from meta.xml, or None when it is missing or empty; errors as for read_opendocument."""
    with _open(path) as archive:
        if "meta.xml" not in archive.namelist():
            return None
        root = _parse_member(archive, "meta.xml")
    title = " ".join((root.findtext(f"{q('office:meta')}/{q('dc:title')}") or "").split())
    return title or None


@contextmanager
def _open(path: Path) -> Iterator[zipfile.ZipFile]:
    with path.open("rb") as handle:  # opened here: an OSError below is damage, not a missing file
        try:
            archive = zipfile.ZipFile(handle)
        except _ZIP_DAMAGE as exc:
            raise _errors.unparseable(ENGINE_NAME, f"not a ZIP archive: {exc}") from exc
        with archive:
            yield archive


def _refuse_encrypted(archive: zipfile.ZipFile) -> None:
    # ODF encryption keeps the ZIP readable but scrambles content.xml; the manifest says so.
    if "META-INF/manifest.xml" in archive.namelist() and b"encryption-data" in _read(archive, "META-INF/manifest.xml"):
        raise _errors.encrypted(ENGINE_NAME, "the document is encrypted (password-protected)")


def _read(archive: zipfile.ZipFile, name: str) -> bytes:
    try:
        info = archive.getinfo(name)
    except KeyError as exc:
        raise _errors.unparseable(ENGINE_NAME, f"no {name} in the archive") from exc
    if info.file_size > MAX_CONTENT_BYTES:
        raise DocumentTooLargeError(f"The document's {name} is {info.file_size} bytes, more than {MAX_CONTENT_BYTES}.")
    try:
        with archive.open(info) as member:
            return member.read(MAX_CONTENT_BYTES)
    except _ZIP_DAMAGE as exc:
        raise _errors.unparseable(ENGINE_NAME, f"{name}: {exc}") from exc


def _parse_member(archive: zipfile.ZipFile, name: str) -> Element:
    try:
        return parse_xml(_read(archive, name))
    except BadXmlError as exc:
        raise _errors.unparseable(ENGINE_NAME, f"{name}: {exc}") from exc

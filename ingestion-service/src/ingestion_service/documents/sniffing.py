"""What a source file really is, decided from its bytes before any engine reads it.

Engines pick a parser by file name, so a PDF named ``.txt`` was indexed as raw bytes and random
bytes or an executable as garbage. Here: executables are refused whatever their name; a file
named like text (or not named at all) must look like text, or carry a document signature we
can extract (then it is extracted as that type); ZIP-based documents are checked against the
unpack limits before extraction, since a few KB can inflate to gigabytes, and every document
against the structural limits (``structure_limits``: table cells, XML depth). Text that is not UTF-8
(a UTF-16 byte-order mark, Windows-1252) is rewritten as UTF-8, which is how engines read it.
"""

from __future__ import annotations

import hashlib
import mimetypes
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ingestion_service.documents import plain_text
from ingestion_service.documents.base import SourceFile
from ingestion_service.documents.structure_limits import check_structure
from ingestion_service.errors import DocumentTooLargeError, UnsupportedContentError
from ingestion_service.settings import Settings

# Text heuristics: start, middle and end of the file, so binary tails behind a text header count.
_HEAD_BYTES = 64 * 1024
_DIGEST_BLOCK = 1024 * 1024
_WINDOW_BYTES = 16 * 1024
# Control characters that occur in real text: BEL, BS, TAB, LF, VT, FF, CR, SUB, ESC.
_TEXT_CONTROLS = frozenset({7, 8, 9, 10, 11, 12, 13, 26, 27})
_DROP_BINARY_CONTROLS: dict[int, None] = {code: None for code in [*range(32), 127] if code not in _TEXT_CONTROLS}
_MAX_CONTROL_RATIO = 0.01
# Legacy single-byte text (Latin-1, cp1252) stays far below this share of undecodable bytes.
_MAX_INVALID_UTF8_RATIO = 0.3
# Members smaller than this may compress arbitrarily well (tiny repetitive XML); Apache POI
# applies its ratio check above a similar floor.
_RATIO_FLOOR_BYTES = 1024 * 1024

# Text names the engines parse as their format (tables, markup, mail); they must contain text (or a
# recognised document signature).
_ENGINE_TEXT_SUFFIXES = frozenset(
    {
        "",
        ".txt",
        ".text",
        ".md",
        ".markdown",
        ".rst",
        ".csv",
        ".tsv",
        ".log",
        ".json",
        ".jsonl",
        ".ndjson",
        ".xml",
        ".html",
        ".htm",
        ".xhtml",
        ".yaml",
        ".yml",
        ".org",
        ".eml",
    }
)
# Engines read text as UTF-8: other text is rewritten as UTF-8 first (``plain_text.transcode_to_utf8``),
# markup in the charset it declares. Mail declares a charset per MIME part and is left to its parser.
_SELF_DECLARED_ENCODING = frozenset({".eml"})
_MARKUP_SUFFIXES = frozenset({".html", ".htm", ".xhtml", ".xml"})
# Text no engine has a parser for (configuration, markup sources, subtitles, source code): staged as
# .txt and read line for line (``plain_text``). So is any other name the platform's types call text/*.
_PLAIN_TEXT_SUFFIXES = plain_text.SUFFIXES - _ENGINE_TEXT_SUFFIXES
_TEXT_SUFFIXES = _ENGINE_TEXT_SUFFIXES | _PLAIN_TEXT_SUFFIXES
_OOXML_PARTS = (
    ("word/document.xml", ".docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    ("xl/workbook.xml", ".xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    ("ppt/presentation.xml", ".pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
)
_ZIP_MIMETYPES = {
    "application/vnd.oasis.opendocument.text": ".odt",
    "application/vnd.oasis.opendocument.spreadsheet": ".ods",
    "application/vnd.oasis.opendocument.presentation": ".odp",
    "application/epub+zip": ".epub",
}


@dataclass(frozen=True)
class Detected:
    """A document type recognised by its signature."""

    media_type: str
    suffix: str


def _executable(head: bytes) -> str | None:
    if head.startswith(b"\x7fELF"):
        return "an ELF executable"
    if head.startswith(b"MZ") and len(head) >= 0x40:
        offset = int.from_bytes(head[0x3C:0x40], "little")
        if head[offset : offset + 4] == b"PE\x00\x00":
            return "a Windows executable"
    if head[:4] in (b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe"):
        return "a Mach-O executable"
    if head.startswith(b"\x00asm"):
        return "a WebAssembly module"
    return None


def _zip_type(path: Path) -> Detected:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            for part, suffix, media_type in _OOXML_PARTS:
                if part in names:
                    return Detected(media_type, suffix)
            if "mimetype" in names:
                with archive.open("mimetype") as member:
                    declared = member.read(100).decode("ascii", "replace").strip()
                if declared in _ZIP_MIMETYPES:
                    return Detected(declared, _ZIP_MIMETYPES[declared])
    except (zipfile.BadZipFile, OSError, KeyError):
        pass  # damaged: the engine reports it as such
    return Detected("application/zip", ".zip")


_IMAGE_SIGNATURES: tuple[tuple[bytes, str, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png", ".png"),
    (b"\xff\xd8\xff", "image/jpeg", ".jpg"),
    (b"GIF87a", "image/gif", ".gif"),
    (b"GIF89a", "image/gif", ".gif"),
    (b"II*\x00", "image/tiff", ".tif"),
    (b"MM\x00*", "image/tiff", ".tif"),
    (b"II+\x00", "image/tiff", ".tif"),  # BigTIFF
    (b"MM\x00+", "image/tiff", ".tif"),
)
# BMP starts with just "BM", so the DIB header's size (offset 14) must be one of the known ones.
_BMP_DIB_SIZES = frozenset({12, 40, 52, 56, 64, 108, 124})
# PDF readers accept junk before the header (some real PDFs carry it); pypdf_engine uses the same window.
PDF_HEADER_WINDOW = 1024


def _signature(path: Path, head: bytes) -> Detected | None:
    if b"%PDF-" in head[:PDF_HEADER_WINDOW]:
        return Detected("application/pdf", ".pdf")
    if head.startswith(b"PK\x03\x04"):
        return _zip_type(path)
    if head.startswith(b"{\\rtf"):
        return Detected("application/rtf", ".rtf")
    for signature, media_type, suffix in _IMAGE_SIGNATURES:
        if head.startswith(signature):
            return Detected(media_type, suffix)
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return Detected("image/webp", ".webp")
    if head[:2] == b"BM" and len(head) >= 18 and int.from_bytes(head[14:18], "little") in _BMP_DIB_SIZES:
        return Detected("image/bmp", ".bmp")
    return None


def sniff(path: Path) -> Detected | None:
    """The document type ``path``'s bytes show (its signature), whatever its name (blocking)."""
    with path.open("rb") as handle:
        head = handle.read(PDF_HEADER_WINDOW)
    return _signature(path, head)


def _samples(path: Path, size: int) -> list[bytes]:
    with path.open("rb") as handle:
        samples = [handle.read(_HEAD_BYTES)]
        if size > _HEAD_BYTES + 2 * _WINDOW_BYTES:
            for offset in (size // 2, size - _WINDOW_BYTES):
                handle.seek(offset)
                samples.append(handle.read(_WINDOW_BYTES))
    return samples


def looks_like_text(sample: bytes, encoding: str = "utf-8") -> bool:
    """No NUL, few control characters, mostly decodable in ``encoding``."""
    text = sample.decode(encoding, "replace")
    if not text:
        return True
    if "\x00" in text:
        return False
    if len(text) - len(text.translate(_DROP_BINARY_CONTROLS)) > len(text) * _MAX_CONTROL_RATIO:
        return False
    return text.count("\ufffd") <= len(text) * _MAX_INVALID_UTF8_RATIO


def _claims_text(filename: str) -> bool:
    suffix = Path(filename).suffix.lower()
    if suffix in _TEXT_SUFFIXES:
        return True
    guessed = mimetypes.guess_type(filename)[0]
    return guessed is not None and guessed.startswith("text/")


def check_zip_limits(path: Path, settings: Settings) -> None:
    """DOCUMENT_TOO_LARGE when the archive declares more than MAX_UNPACKED_BYTES or a bomb-like ratio."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError):
        return  # not readable as a ZIP: the engine reports the damage
    total = sum(member.file_size for member in members)
    if total > settings.max_unpacked_bytes:
        raise DocumentTooLargeError(
            f"The document unpacks to {total} bytes, more than MAX_UNPACKED_BYTES ({settings.max_unpacked_bytes})."
        )
    ratio = settings.max_compression_ratio
    for member in members:
        if member.file_size > _RATIO_FLOOR_BYTES and member.file_size > ratio * max(member.compress_size, 1):
            raise DocumentTooLargeError(
                f"The document holds a part compressed more than MAX_COMPRESSION_RATIO ({ratio:g}:1) allows "
                f"({member.file_size} bytes from {member.compress_size}); refused as a likely decompression bomb."
            )


@dataclass(frozen=True)
class SourceDigest:
    """What identifies a source's bytes: sha256 (hex) and size."""

    sha256: str
    size: int


def digest_source(path: Path) -> SourceDigest:
    """sha256 of the file, streamed (blocking: call in a thread)."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while piece := handle.read(_DIGEST_BLOCK):
            digest.update(piece)
            size += len(piece)
    return SourceDigest(sha256=digest.hexdigest(), size=size)


def source_format(source: SourceFile) -> str:
    """A short lower-case kind for filters and listings: the recognised type's extension, else the name's."""
    if source.media_type is not None:
        guessed = mimetypes.guess_extension(source.media_type, strict=False)
        if guessed:
            return guessed.lstrip(".").lower()
    suffix = Path(source.filename).suffix.lstrip(".").lower()
    return suffix if suffix.isalnum() else "unknown"


def inspect_source(path: Path, filename: str, settings: Settings) -> SourceFile:
    """The file as engines should see it, or UNSUPPORTED_CONTENT / DOCUMENT_TOO_LARGE (blocking: call in a thread).

    A recognised document named like text, or as another type or one the platform does not know, is
    renamed to its real suffix, and text no engine has a
    parser for (no suffix, configuration, source code) to ``.txt``, since engines choose their parser
    by suffix; ``filename`` (what users see) is kept. The structural limits are checked on the file
    as engines will read it (its final suffix); too deep XML is EXTRACTION_FAILED (unparseable).
    """
    source = _staged(path, filename, settings)
    check_structure(source.path, settings)
    return source


def _staged(path: Path, filename: str, settings: Settings) -> SourceFile:
    size = path.stat().st_size
    samples = _samples(path, size)
    head = samples[0]
    executable = _executable(head)
    if executable is not None:
        raise UnsupportedContentError(f"The file is {executable}, not a document.")
    # Engines open a ZIP behind leading junk too (they find its end record), so the limits apply to
    # any file holding one, not only to those starting with a ZIP header; only the tail is read.
    if zipfile.is_zipfile(path):
        check_zip_limits(path, settings)
    detected = _signature(path, head)
    named_text = _claims_text(filename)
    if detected is not None and (named_text or mimetypes.guess_type(filename)[0] != detected.media_type):
        # Named as text, or as another type or none the platform knows (a PDF named x.U, which an
        # engine reads as source code by its suffix): engines see the type the content shows.
        real = path.with_suffix(detected.suffix)
        path.rename(real)
        return SourceFile(path=real, filename=filename, media_type=detected.media_type)
    if not named_text:
        return SourceFile(path=path, filename=filename)
    encoding = plain_text.bom_encoding(head)
    # UTF-16/32 text is judged by its start only: later windows may begin mid-character.
    text_ok = looks_like_text(head, encoding) if encoding else all(looks_like_text(sample) for sample in samples)
    if not text_ok:
        shown = Path(filename).suffix.lower() or "without an extension"
        raise UnsupportedContentError(
            f"The file is named as text ({shown}) but its content is binary or not UTF-8 text, and no supported "
            "document type was recognised."
        )
    if path.suffix.lower() not in _SELF_DECLARED_ENCODING:
        plain_text.transcode_to_utf8(path, markup=path.suffix.lower() in _MARKUP_SUFFIXES)
    if not path.suffix:
        # README, LICENSE: engines pick their parser by suffix and refuse a file without one.
        plain = path.with_suffix(".txt")
        path.rename(plain)
        return SourceFile(path=plain, filename=filename, media_type="text/plain")
    if path.suffix.lower() not in _ENGINE_TEXT_SUFFIXES:
        # nginx.conf, main.py: text no engine parses; read as plain text. The format stays the name's.
        plain = path.with_suffix(".txt")
        path.rename(plain)
        return SourceFile(path=plain, filename=filename)
    return SourceFile(path=path, filename=filename)

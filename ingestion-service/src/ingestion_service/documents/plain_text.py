"""Source code, configuration, logs and subtitles, read line for line.

kreuzberg's Markdown output joins the lines of a paragraph, so a Python file lost its
indentation, a log became one line and a TOML table ran into its keys; and a ``# comment`` at a
line start would be taken for a Markdown heading by the splitter. These files are read verbatim
instead: code and configuration inside one fenced block naming its language (as kreuzberg
already renders YAML), logs and subtitles as their lines. A Jupyter notebook becomes its
Markdown cells and its code cells, fenced; outputs are left out.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Suffix -> the fence's info string (GitHub's language names).
CODE_LANGUAGES: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".ts": "typescript", ".tsx": "tsx", ".jsx": "jsx", ".vue": "vue", ".svelte": "svelte",
    ".java": "java", ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala", ".groovy": "groovy",
    ".gradle": "groovy", ".go": "go", ".rs": "rust", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp",
    ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".cs": "csharp", ".fs": "fsharp", ".rb": "ruby",
    ".php": "php", ".swift": "swift", ".m": "objectivec", ".mm": "objectivec", ".r": "r", ".jl": "julia",
    ".lua": "lua", ".pl": "perl", ".pm": "perl", ".sh": "bash", ".bash": "bash", ".zsh": "zsh",
    ".fish": "fish", ".ps1": "powershell", ".bat": "batch", ".cmd": "batch", ".sql": "sql", ".css": "css",
    ".scss": "scss", ".sass": "sass", ".less": "less", ".dart": "dart", ".ex": "elixir", ".exs": "elixir",
    ".erl": "erlang", ".hs": "haskell", ".clj": "clojure", ".cljs": "clojure", ".elm": "elm",
    ".proto": "protobuf", ".graphql": "graphql", ".gql": "graphql", ".tf": "hcl", ".hcl": "hcl",
    ".cmake": "cmake", ".mk": "makefile", ".dockerfile": "dockerfile",
    ".toml": "toml", ".ini": "ini", ".cfg": "ini", ".conf": "ini", ".properties": "properties",
    ".env": "dotenv", ".diff": "diff", ".patch": "diff", ".po": "po", ".pot": "po",
    ".tex": "latex", ".sty": "latex", ".cls": "latex", ".bib": "bibtex",
}  # fmt: skip
# Build and dot files known by name alone (no suffix).
CODE_FILE_NAMES: dict[str, str] = {
    "makefile": "makefile", "gnumakefile": "makefile", "dockerfile": "dockerfile",
    "containerfile": "dockerfile", "jenkinsfile": "groovy", "vagrantfile": "ruby", "gemfile": "ruby",
    "rakefile": "ruby", "justfile": "just", ".env": "dotenv", ".gitignore": "gitignore",
    ".dockerignore": "gitignore", ".editorconfig": "ini", ".bashrc": "bash", ".zshrc": "zsh",
}  # fmt: skip
NOTEBOOK_SUFFIX = ".ipynb"
# Line-oriented text kept as its lines, unfenced (prose markup, subtitles, logs).
LINE_TEXT_SUFFIXES = frozenset({".adoc", ".asciidoc", ".srt", ".vtt", ".log"})
# Every name this reader takes by suffix.
SUFFIXES = frozenset({*CODE_LANGUAGES, NOTEBOOK_SUFFIX, *LINE_TEXT_SUFFIXES})
READER = "verbatim"

# UTF-16/32 text is recognised by its byte-order mark only (the content check relies on it too).
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)
# An HTML meta charset (either form) or an XML declaration's encoding, within the file's start.
_DECLARED_CHARSET = re.compile(
    r"""(?:<meta\b[^>]*?\bcharset\s*=\s*["']?|<\?xml\b[^>]*?\bencoding\s*=\s*["'])(?P<charset>[A-Za-z0-9_.:-]+)""",
    re.IGNORECASE,
)
_DECLARATION_WINDOW = 4096
_TRANSCODE_BLOCK = 1 << 20
_BACKTICK_FENCE = re.compile(r"^ {0,3}(`{3,})", re.MULTILINE)


@dataclass(frozen=True)
class Reading:
    """How a file is read verbatim: as code of ``language`` (fenced), a notebook, or lines."""

    kind: str  # "code", "notebook" or "lines"
    language: str = ""


def reading_for(filename: str, staged: Path) -> Reading | None:
    """The verbatim reading for a file the content check staged as text, else None (the engine reads it).

    ``staged`` is the path engines see: a recognised document under a code name (a PDF named
    ``main.py``) was renamed to its real suffix and is not read here; plain ``.txt`` and Markdown
    stay with the engine.
    """
    if staged.suffix.lower() not in {".txt", ".log"}:
        return None
    name = Path(filename)
    suffix = name.suffix.lower()
    if suffix in CODE_LANGUAGES:
        return Reading("code", CODE_LANGUAGES[suffix])
    if suffix == NOTEBOOK_SUFFIX:
        return Reading("notebook")
    if suffix in LINE_TEXT_SUFFIXES:
        return Reading("lines")
    if not suffix and name.name.lower() in CODE_FILE_NAMES:
        return Reading("code", CODE_FILE_NAMES[name.name.lower()])
    if suffix and suffix not in {".txt", ".text"} and staged.suffix.lower() == ".txt":
        # Another name the platform calls text/* (.ics, .vcf): line-oriented, no engine parses it.
        return Reading("lines")
    return None


def bom_encoding(head: bytes) -> str | None:
    """``utf-16`` or ``utf-32`` when ``head`` starts with that byte-order mark."""
    return next((encoding for bom, encoding in _BOMS if head.startswith(bom)), None)


def decode(data: bytes) -> str:
    """Text from bytes: a UTF-16/32 BOM's encoding, else UTF-8 (a BOM dropped), else Windows-1252."""
    encoding = bom_encoding(data)
    if encoding is not None:
        return data.decode(encoding, "replace")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", "replace")


def is_utf8(path: Path) -> bool:
    """Whether the whole file decodes as UTF-8 (read in blocks)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(_TRANSCODE_BLOCK), b""):
                decoder.decode(block)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def transcode_to_utf8(path: Path, *, markup: bool = False) -> str | None:
    """Rewrite a text file that is not UTF-8 as UTF-8 in place; returns the encoding it was read in
    (None: already UTF-8, left alone). Engines read text as UTF-8 and turned every other byte into
    U+FFFD: Latin-1 umlauts and the euro sign, and all of a UTF-16 file.

    The encoding is :func:`decode`'s rule (a UTF-16/32 byte-order mark, else Windows-1252), except
    that ``markup`` (HTML, XML) declaring its charset is read in that charset, and the declaration is
    rewritten to say UTF-8 so an engine that honours it reads the new bytes right.
    """
    if is_utf8(path):
        return None
    with path.open("rb") as handle:
        head = handle.read(_DECLARATION_WINDOW)
    encoding = bom_encoding(head) or (_declared_encoding(head) if markup else None) or "cp1252"
    decoder = codecs.getincrementaldecoder(encoding)("replace")
    staged = path.with_name(path.name + ".utf8")
    with path.open("rb") as source, staged.open("w", encoding="utf-8", newline="") as target:
        first = True
        for block in iter(lambda: source.read(_TRANSCODE_BLOCK), b""):
            text = decoder.decode(block)
            if first and markup:
                text = _DECLARED_CHARSET.sub(_say_utf8, text, count=2)
            first = False
            target.write(text)
        target.write(decoder.decode(b"", final=True))
    staged.replace(path)
    return encoding


def _declared_encoding(head: bytes) -> str | None:
    match = _DECLARED_CHARSET.search(head.decode("ascii", "replace"))
    if match is None:
        return None
    try:
        return codecs.lookup(match.group("charset")).name
    except LookupError:
        return None


def _say_utf8(match: re.Match[str]) -> str:
    start, end = match.span("charset")
    offset = match.start()
    return f"{match.group(0)[: start - offset]}utf-8{match.group(0)[end - offset :]}"


def _lines(text: str) -> str:
    """Newlines normalised, trailing spaces and blank edges dropped; indentation kept."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


def fenced(text: str, language: str) -> str:
    """``text`` in a backtick fence longer than any backtick fence inside it (CommonMark)."""
    longest = max((len(match.group(1)) for match in _BACKTICK_FENCE.finditer(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def _cell_source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(str(part) for part in source)
    return str(source)


def notebook_markdown(text: str) -> str:
    """A notebook's Markdown cells as they are and its code cells fenced; outputs left out.

    Text that is not a notebook's JSON is shown as fenced JSON, whatever it holds.
    """
    try:
        notebook = json.loads(text)
    except ValueError:
        return fenced(_lines(text), "json")
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        return fenced(_lines(text), "json")
    metadata = notebook.get("metadata")
    language = ""
    if isinstance(metadata, dict):
        info = metadata.get("language_info")
        kernel = metadata.get("kernelspec")
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            language = info["name"]
        elif isinstance(kernel, dict) and isinstance(kernel.get("language"), str):
            language = kernel["language"]
    parts: list[str] = []
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        source = _lines(_cell_source(cell))
        if not source:
            continue
        kind = cell.get("cell_type")
        if kind == "markdown":
            parts.append(source)
        elif kind == "code":
            parts.append(fenced(source, language))
        else:
            parts.append(fenced(source, ""))
    return "\n\n".join(parts)


def read(path: Path, reading: Reading) -> str:
    """The file's text as ``reading`` says (blocking)."""
    text = decode(path.read_bytes())
    if reading.kind == "notebook":
        return notebook_markdown(text)
    lines = _lines(text)
    if reading.kind == "code" and lines:
        return fenced(lines, reading.language)
    return lines

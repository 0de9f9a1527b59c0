"""Code, configuration, logs and notebooks read line for line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingestion_service.documents.plain_text import (
    Reading,
    decode,
    fenced,
    read,
    reading_for,
    transcode_to_utf8,
)


@pytest.mark.parametrize(
    ("filename", "staged", "expected"),
    [
        ("main.py", "source.txt", Reading("code", "python")),
        ("Main.RS", "source.txt", Reading("code", "rust")),
        ("pyproject.toml", "source.txt", Reading("code", "toml")),
        ("Makefile", "source.txt", Reading("code", "makefile")),
        (".env", "source.txt", Reading("code", "dotenv")),
        ("analysis.ipynb", "source.txt", Reading("notebook")),
        ("talk.srt", "source.txt", Reading("lines")),
        ("server.log", "source.log", Reading("lines")),
        ("calendar.ics", "source.txt", Reading("lines")),
    ],
)
def test_code_configuration_and_line_text_get_their_reading(filename: str, staged: str, expected: Reading) -> None:
    assert reading_for(filename, Path(staged)) == expected


@pytest.mark.parametrize(
    ("filename", "staged"),
    [
        ("notes.txt", "source.txt"),  # prose: the engine's reading
        ("README", "source.txt"),
        ("wiki.md", "source.md"),
        ("report.py", "source.pdf"),  # a PDF under a code name is read as a PDF
    ],
)
def test_prose_markup_and_recognised_documents_stay_with_the_engine(filename: str, staged: str) -> None:
    assert reading_for(filename, Path(staged)) is None


def test_decode_honours_a_bom_then_utf8_then_windows_1252() -> None:
    assert decode("æøå".encode("utf-16")) == "æøå"
    assert decode(b"\xef\xbb\xbfname = 1") == "name = 1"
    assert decode("blåbær".encode()) == "blåbær"
    assert decode("blåbær “quoted”".encode("cp1252")) == "blåbær “quoted”"


def test_a_fence_is_longer_than_any_fence_inside_it() -> None:
    assert fenced("x = 1", "python") == "```python\nx = 1\n```"
    inner = 'doc = """\n````md\n# Title\n````\n"""'
    assert fenced(inner, "python") == f"`````python\n{inner}\n`````"


def test_code_is_read_with_indentation_and_normalised_newlines(tmp_path: Path) -> None:
    path = tmp_path / "source.txt"
    path.write_bytes(b"\r\n\r\ndef f():\r\n    return 1   \r\n\r\n\r\n")
    assert read(path, Reading("code", "python")) == "```python\ndef f():\n    return 1\n```"
    assert read(path, Reading("lines")) == "def f():\n    return 1"


def test_a_notebook_reads_as_its_markdown_and_fenced_code_cells(tmp_path: Path) -> None:
    notebook = {
        "cells": [
            {"cell_type": "markdown", "source": ["# Llama census\n", "Counted weekly."]},
            {"cell_type": "code", "source": "herd = load()\nlen(herd)", "outputs": [{"text": "42"}]},
            {"cell_type": "code", "source": []},
            {"cell_type": "raw", "source": "raw text"},
        ],
        "metadata": {"language_info": {"name": "python"}},
    }
    path = tmp_path / "source.txt"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    assert read(path, Reading("notebook")) == (
        "# Llama census\nCounted weekly.\n\n```python\nherd = load()\nlen(herd)\n```\n\n```\nraw text\n```"
    )


def test_a_notebook_name_over_other_json_shows_the_json(tmp_path: Path) -> None:
    path = tmp_path / "source.txt"
    path.write_text('{"not": "a notebook"}', encoding="utf-8")
    assert read(path, Reading("notebook")) == '```json\n{"not": "a notebook"}\n```'


TEXT = "Grüße aus München: 15 € ÆØÅ\n"


def test_utf8_text_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "utf8.txt"
    path.write_bytes(b"\xef\xbb\xbf" + TEXT.encode())
    assert transcode_to_utf8(path) is None
    assert path.read_bytes() == b"\xef\xbb\xbf" + TEXT.encode()


@pytest.mark.parametrize(
    ("data", "encoding"),
    [(TEXT.encode("utf-16"), "utf-16"), (TEXT.encode("utf-32"), "utf-32"), (TEXT.encode("cp1252"), "cp1252")],
)
def test_other_text_is_rewritten_as_utf8(tmp_path: Path, data: bytes, encoding: str) -> None:
    path = tmp_path / "legacy.txt"
    path.write_bytes(data)
    assert transcode_to_utf8(path) == encoding
    assert path.read_bytes() == TEXT.encode()


def test_markup_is_read_in_its_declared_charset_and_then_declares_utf8(tmp_path: Path) -> None:
    page = '<?xml version="1.0" encoding="ISO-8859-15"?>\n<html><head><meta charset="iso-8859-15"/></head>'
    path = tmp_path / "page.xhtml"
    path.write_bytes(f"{page}<body>{TEXT}</body></html>".encode("iso-8859-15"))
    assert transcode_to_utf8(path, markup=True) == "iso8859-15"
    written = path.read_text(encoding="utf-8")
    assert f"<body>{TEXT}</body>" in written  # the euro sign is 0xA4 in ISO-8859-15, ¤ in cp1252
    assert written.startswith('<?xml version="1.0" encoding="utf-8"?>\n<html><head><meta charset="utf-8"/>')


def test_markup_declaring_an_unknown_charset_is_read_as_windows_1252(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_bytes(f'<meta charset="klingon"><p>{TEXT}</p>'.encode("cp1252"))
    assert transcode_to_utf8(path, markup=True) == "cp1252"
    assert TEXT in path.read_text(encoding="utf-8")

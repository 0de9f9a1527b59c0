"""Code, configuration, logs and notebooks read line for line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingestion_service.adapters.extractors.plain_text import Reading, decode, fenced, read, reading_for


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

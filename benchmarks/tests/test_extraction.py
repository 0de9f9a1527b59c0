"""The extraction benchmark's scoring: CER, normalisation and the per-format table."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.extraction import TRUTH_PATH, cer, format_table, levenshtein, normalise


def test_levenshtein_counts_edits() -> None:
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == 3


def test_normalise_drops_markdown_escapes_and_markup() -> None:
    assert normalise("## Happy New Year 2003\\!\n\n**bold**  text") == "Happy New Year 2003! bold text"


def test_cer_is_zero_for_the_same_text_and_grows_with_errors() -> None:
    truth = "Happy New Year 2003!"
    assert cer("Happy New Year 2003\\!", truth) == 0.0
    assert cer("Happy New Yoar 2003!", truth) == 1 / len(truth)


def test_truth_file_names_existing_scans() -> None:
    truth = json.loads(TRUTH_PATH.read_text())
    assert set(truth) >= {"pdf/tika__testOCR.pdf", "pdf/kreuzberg__non_searchable.pdf"}
    assert all(Path(name).suffix == ".pdf" and text.strip() for name, text in truth.items())


def test_format_table_sums_pages_and_seconds_of_documents_read() -> None:
    rows = [
        {"format": "pdf", "engine": "kreuzberg", "ok": True, "pages": 2, "seconds": 1.0, "ocr": True},
        {"format": "pdf", "engine": "kreuzberg", "ok": False, "pages": 5, "seconds": 0.1, "ocr": False},
    ]
    table = format_table(rows)
    assert "| pdf | kreuzberg | 2 | 1 | 2 | 1.0 | 0.500 |" in table
    assert "| **OCR'd (any format)** | kreuzberg | 1 | 1 | 2 | 1.0 | 0.500 |" in table

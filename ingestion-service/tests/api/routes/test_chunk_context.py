"""What an ingest stores for each chunk: its own text shown, its context indexed, its own language."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi.testclient import TestClient

if TYPE_CHECKING:
    from ...conftest import Points, Upload  # noqa: TID252

HEADER = "| Region | Quarter | Sales (kEUR) | Margin |"
ROW = re.compile(r"^\| Region \d\d \|")


def _stored(points: Points, client: TestClient, file_id: str) -> list[dict[str, Any]]:
    records = sorted(points(client, file_id=file_id), key=lambda record: record.payload["meta"]["split_id"])
    return [dict(record.payload) for record in records]


def _indexed(payload: dict[str, Any]) -> str:
    text: str = payload[f"lexical_{payload['meta']['lexical_language']}"]
    return text


def test_a_long_table_is_cut_between_rows_and_each_part_is_indexed_with_its_header(
    client: TestClient, upload: Upload, points: Points, tmp_path: Path
) -> None:
    rows = [f"| Region {i:02d} | Q{i % 4 + 1} | {1000 + 37 * i:,} | {10 + i % 7}% |" for i in range(60)]
    table = "\n".join([HEADER, "| --- | --- | --- | --- |", *rows])
    source = tmp_path / "regional-sales.md"
    source.write_text(f"# Regional sales 2024\n\nTable 3: sales by region and quarter\n\n{table}\n")
    response = upload(client, source, file_id="sales")
    assert response.status_code == 200, response.text
    stored = _stored(points, client, "sales")
    assert len(stored) >= 3
    first, rest = stored[0], stored[1:]
    assert first["content"].startswith(f"# Regional sales 2024\n\nTable 3: sales by region and quarter\n\n{HEADER}")
    shown_rows = [line for payload in stored for line in payload["content"].split("\n") if ROW.match(line)]
    assert shown_rows == rows  # every row once, in order, as the document has it
    for payload in rest:
        content, indexed = payload["content"], _indexed(payload)
        assert ROW.match(content)
        assert "Sales (kEUR)" not in content
        # Indexed with the title, the caption and the header row, each row as column: value pairs.
        assert indexed.startswith(f"Regional sales 2024\nTable 3: sales by region and quarter\n{HEADER}\n")
        key = content.split("|")[1].strip()
        assert f"Region: {key}; Quarter: " in indexed
        assert "; Sales (kEUR): " in indexed


def test_speaker_notes_travel_with_their_slide(client: TestClient, upload: Upload, points: Points, docs: Path) -> None:
    response = upload(client, docs / "pptx" / "docling__powerpoint_sample.pptx", file_id="deck")
    assert response.status_code == 200, response.text
    by_page: dict[int, str] = {}
    for payload in _stored(points, client, "deck"):
        by_page[payload["meta"]["page"]] = by_page.get(payload["meta"]["page"], "") + payload["content"]
    assert "### Notes\n\nSome notes on the second slide." in by_page[1]
    assert "Final notes on the third slide." in by_page[2]
    assert "notes" not in by_page[0].lower()


def test_an_html_pages_head_metadata_is_not_indexed_as_text(
    client: TestClient, upload: Upload, points: Points, docs: Path
) -> None:
    response = upload(client, docs / "html" / "kreuzberg__complex_table.html", file_id="page")
    assert response.status_code == 200, response.text
    stored = _stored(points, client, "page")
    assert stored[0]["content"].startswith("# Quarterly Sales Report")
    assert not any("title: Complex Table Test" in payload["content"] for payload in stored)
    # The metadata title still names the document in every chunk's context.
    assert all(_indexed(payload).startswith("Complex Table Test\n") for payload in stored)


def test_each_chunk_is_indexed_in_its_own_language(
    client: TestClient, upload: Upload, points: Points, tmp_path: Path
) -> None:
    english = " ".join(
        ["The annual report describes how the company performed and what it plans for the coming year."] * 40
    )
    spanish = " ".join(
        ["El informe anual describe los resultados de la empresa y sus planes para el próximo año."] * 12
    )
    source = tmp_path / "bilingual.md"
    source.write_text(f"# Report\n\n## Summary\n\n{english}\n\n## Resumen\n\n{spanish}\n")
    response = upload(client, source, file_id="bilingual")
    assert response.status_code == 200, response.text
    stored = _stored(points, client, "bilingual")
    english_chunks = [payload for payload in stored if "The annual report" in payload["content"]]
    spanish_chunks = [payload for payload in stored if "El informe anual" in payload["content"]]
    assert english_chunks
    assert spanish_chunks
    assert {(p["meta"]["language"], p["meta"]["lexical_language"]) for p in english_chunks} == {("en", "en")}
    assert {(p["meta"]["language"], p["meta"]["lexical_language"]) for p in spanish_chunks} == {("es", "es")}
    assert all("lexical_es" in payload for payload in spanish_chunks)
    # The document's language is its main one (most of its text), on every chunk.
    assert {tuple(payload["meta"]["languages"]) for payload in stored} == {("en",)}

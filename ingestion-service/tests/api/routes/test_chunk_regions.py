"""Each chunk's place on its page (``meta.regions``, ``meta.geometry``) as stored by an ingest."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...conftest import AppFactory, Points, Upload  # noqa: TID252

KB = "kb-regions"


def test_every_chunk_of_a_pdf_with_a_text_layer_records_its_lines_on_its_page(
    app_client: AppFactory, upload: Upload, points: Points, docs: Path
) -> None:
    with app_client() as client:
        response = upload(client, docs / "pdf/unstructured__multi-column-2p.pdf", file_id="paper", collection_name=KB)
        assert response.status_code == 200, response.text
        stored = points(client, file_id="paper", collection_name=KB)
    assert len(stored) > 2
    pages = set()
    for record in stored:
        meta = record.payload["meta"]
        assert meta["geometry"] == "text_layer"
        [region] = meta["regions"]
        assert region["page"] == meta["page"]
        pages.add(region["page"])
        assert region["boxes"]
        for x0, y0, x1, y1 in region["boxes"]:
            assert 0 <= x0 < x1 <= 1
            assert 0 <= y0 < y1 <= 1
    assert pages == {0, 1}


def test_chunks_of_a_format_without_pages_say_they_have_no_geometry(
    app_client: AppFactory, upload: Upload, points: Points, docs: Path
) -> None:
    with app_client() as client:
        response = upload(client, docs / "md/docling__wiki.md", file_id="wiki", collection_name=KB)
        assert response.status_code == 200, response.text
        stored = points(client, file_id="wiki", collection_name=KB)
    assert stored
    assert {record.payload["meta"]["geometry"] for record in stored} == {"none"}
    assert all("regions" not in record.payload["meta"] for record in stored)


def test_a_scan_says_it_has_no_text_layer_geometry(
    app_client: AppFactory, upload: Upload, points: Points, docs: Path
) -> None:
    with app_client() as client:
        response = upload(client, docs / "pdf/kreuzberg__scanned.pdf", file_id="scan", collection_name=KB)
        assert response.status_code == 200, response.text
        stored = points(client, file_id="scan", collection_name=KB)
    assert stored
    assert {record.payload["meta"]["geometry"] for record in stored} == {"none"}

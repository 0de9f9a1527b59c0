"""Real documents (tests/fixtures/docs) through the HTTP API with the default kreuzberg engine.

One representative file per format kreuzberg reads (keeps the suite fast), plus the documented
outcomes for documents without text, encrypted PDFs and formats kreuzberg does not read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from fastapi.testclient import TestClient
from pypdf import PdfReader, PdfWriter

if TYPE_CHECKING:
    from ...conftest import AppFactory, Points, Upload  # noqa: TID252

# file -> a word the chunks must contain, and the language kreuzberg should detect (None: any)
READABLE = {
    "pdf/kreuzberg__searchable.pdf": ("Lorem", None),
    "docx/docling__word_tables.docx": ("Header", "en"),
    "pptx/docling__powerpoint_sample.pptx": ("Class1", "en"),
    "xlsx/kreuzberg__excel_multi_sheet.xlsx": ("Tomato", None),
    "html/kreuzberg__complex_table.html": ("Quarterly", "en"),
    "md/docling__wiki.md": ("IBM", "en"),
    "csv/docling__csv-comma-in-cell.csv": (",", None),
    "eml/kreuzberg__html_only.eml": ("HTML Only Email", None),
    "odt/docling__text_document_01.odt": ("heading", None),
    "ods/docling__odf_table_with_title_01.ods": ("Freshwater", None),
    "txt/tika__danish_europarl_sample.txt": ("sessionen", "da"),
}


@pytest.mark.parametrize("name", sorted(READABLE))
def test_every_format_ingests_with_sensible_metadata(
    client: TestClient, upload: Upload, docs: Path, points: Points, name: str
) -> None:
    word, language = READABLE[name]
    response = upload(client, docs / name, file_id="doc")
    assert response.status_code == 200, response.text
    stored = points(client, file_id="doc")
    assert len(stored) == response.json()["chunks_count"] >= 1
    text = "\n".join(record.payload["content"] for record in stored)
    assert word in text
    meta = stored[0].payload["meta"]
    assert meta["extractor"] == "kreuzberg"
    assert meta["name"] == Path(name).name
    assert isinstance(meta["headers"], list)
    if language is not None:
        assert meta["languages"] == [language]
    # Tables come out as Markdown tables.
    if name.endswith((".docx", ".xlsx", ".ods")):
        assert "| --- |" in text


def test_pdf_metadata_title_and_authors(client: TestClient, upload: Upload, docs: Path, points: Points) -> None:
    upload(client, docs / "pdf/kreuzberg__searchable.pdf", file_id="meta")
    meta = points(client, file_id="meta")[0].payload["meta"]
    assert meta["title"] == "sample"
    assert meta["authors"] == ["Philip Hutchison"]


NO_TEXT = "The document contains no extractable text (a scan without a text layer needs OCR)."


@pytest.mark.parametrize(
    "name",
    [
        "pdf/kreuzberg__non_searchable.pdf",
        "pdf/tika__testOCR.pdf",
        "tif/docling__2206.01062.tif",
        "jpg/unstructured__double-column-A.jpg",
    ],
)
def test_scans_without_text_are_422_and_keep_the_previous_version(
    client: TestClient, upload: Upload, docs: Path, points: Points, name: str
) -> None:
    assert upload(client, docs / "md/docling__wiki.md", file_id="scan").status_code == 200
    before = points(client, file_id="scan")
    response = upload(client, docs / name, file_id="scan")
    assert response.status_code == 422
    assert response.json() == {
        "status": False,
        "error": NO_TEXT,
        "code": "EXTRACTION_FAILED",
        "request_id": response.headers["x-request-id"],
    }
    assert sorted(r.point_id for r in points(client, file_id="scan")) == sorted(r.point_id for r in before)
    assert "ingest_empty_total 1.0" in client.get("/metrics").text


def test_password_protected_pdf_is_422_encrypted(
    client: TestClient, upload: Upload, docs: Path, tmp_path: Path
) -> None:
    writer = PdfWriter(clone_from=PdfReader(docs / "pdf/kreuzberg__searchable.pdf"))
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="AES-256")
    locked = tmp_path / "locked.pdf"
    writer.write(locked)
    response = upload(client, locked)
    assert response.status_code == 422
    assert response.json()["error"] == "The document is encrypted and cannot be read without its password."


def test_copy_protected_pdf_with_empty_user_password_is_read(client: TestClient, upload: Upload, docs: Path) -> None:
    response = upload(client, docs / "pdf/kreuzberg__copy_protected.pdf")
    assert response.status_code == 200
    assert response.json()["chunks_count"] > 0


def test_unsupported_format_is_422(client: TestClient, upload: Upload, docs: Path) -> None:
    response = upload(client, docs / "odp/docling__odf_presentation_01.odp")
    assert response.status_code == 422
    assert response.json()["error"] == "The document format is not supported by the extraction engine."


def test_pypdf_engine_records_pages(app_client: AppFactory, upload: Upload, docs: Path, points: Points) -> None:
    with app_client(extraction_engine="pypdf", chunk_split_by="token") as client:
        response = upload(client, docs / "pdf/unstructured__list-item-example.pdf", file_id="pages")
        assert response.status_code == 200, response.text
        assert response.json()["extraction"]["engine"] == "pypdf"
        pages = {record.payload["meta"]["page"] for record in points(client, file_id="pages")}
        assert pages == {1, 2}

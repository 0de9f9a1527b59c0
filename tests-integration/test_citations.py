"""Citation links end to end: search a phrase from page 3, open the signed link without a key, and
see that page with the passage highlighted; expired, changed and forged links are refused."""

from __future__ import annotations

import io
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pypdfium2 as pdfium
import pytest
from integration_support import CITATION_KEY, FIXTURES, Stack, ingest_multipart
from PIL import Image

from shared_contract.citations import page_image_url, sign_link, verify_link

SOURCE = FIXTURES / "unstructured__multi-column-2p.pdf"
SCAN = FIXTURES / "kreuzberg__non_searchable.pdf"
# The source's second page, and only it, holds this phrase; it becomes page 3 of the test's PDF.
QUESTION = "Where was the 8th Dalai Lama born, and who voiced Meg on Family Guy?"
PHRASE = "Dalai Lama"


@pytest.fixture(scope="module")
def three_pages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A three-page PDF: the source's first page twice, then its second page."""
    path = tmp_path_factory.mktemp("citations") / "three-pages.pdf"
    with pdfium.PdfDocument(str(SOURCE)) as source:
        merged = pdfium.PdfDocument.new()
        merged.import_pages(source, [0, 0, 1])
        merged.save(str(path))
        merged.close()
    return path


def _ingest(stack: Stack, path: Path, collection: str) -> str:
    file_id = str(uuid.uuid4())
    ingest_multipart(stack.ingestion(), path, file_id, collection)
    return file_id


def _top(stack: Stack, query: str, collection: str) -> tuple[str, dict[str, Any]]:
    response = stack.retrieval().post("/search", json={"queries": [query], "collection_names": [collection], "k": 3})
    assert response.status_code == 200, response.text
    return response.json()["documents"][0][0], response.json()["metadatas"][0][0]


def _token(url: str) -> str:
    return url.split("/api/v1/citations/")[1].split("/")[0]


def _mean_rgb(image: Image.Image, box: list[float]) -> tuple[float, float, float]:
    x0, y0, x1, y1 = box
    crop = image.crop((int(x0 * image.width), int(y0 * image.height), int(x1 * image.width), int(y1 * image.height)))
    pixels = [crop.getpixel((x, y)) for x in range(crop.width) for y in range(crop.height)]
    rgb = [pixel for pixel in pixels if isinstance(pixel, tuple)]
    red, green, blue = (sum(float(pixel[channel]) for pixel in rgb) / len(rgb) for channel in range(3))
    return red, green, blue


@pytest.fixture(scope="module")
def cited(stack: Stack, unique: str, three_pages: Path) -> dict[str, Any]:
    collection = f"kb-citations-{unique}"
    file_id = _ingest(stack, three_pages, collection)
    _ingest(stack, SCAN, collection)
    content, meta = _top(stack, QUESTION, collection)
    return {"collection": collection, "file_id": file_id, "content": content, "meta": meta}


def test_the_link_of_a_page_3_hit_opens_page_3_without_a_key_with_the_phrase_highlighted(
    cited: dict[str, Any], three_pages: Path
) -> None:
    meta = cited["meta"]
    assert PHRASE in cited["content"]
    assert meta["page"] == 2
    link = verify_link(_token(meta["citation_url"]), CITATION_KEY.encode())
    assert (link.collection_name, link.file_id, link.page) == (cited["collection"], cited["file_id"], 2)
    response = httpx.get(meta["citation_url"], params={"width": 1000}, timeout=60)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(response.content)).convert("RGB")
    with pdfium.PdfDocument(str(three_pages)) as document:
        width, height = document[2].get_size()
    # The image is page 3 of the original: its shape, and the highlight where the chunk's lines are.
    assert abs(image.height - round(1000 * height / width)) <= 1
    [region] = meta["regions"]
    assert region["page"] == 2
    red, green, blue = _mean_rgb(image, region["boxes"][0])
    assert red - blue > 40
    assert green - blue > 20
    assert image.getpixel((3, 3)) == (255, 255, 255)


def test_the_original_link_serves_the_pdf_at_its_page(cited: dict[str, Any], three_pages: Path) -> None:
    url = cited["meta"]["original_url"]
    assert url.endswith("#page=3")
    response = httpx.get(url.split("#")[0], timeout=60)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/pdf"
    assert response.content == three_pages.read_bytes()


def test_expired_changed_and_forged_links_are_refused(stack: Stack, cited: dict[str, Any], unique: str) -> None:
    url = cited["meta"]["citation_url"]
    token = _token(url)
    link = verify_link(token, CITATION_KEY.encode())
    expired = sign_link(replace(link, expires_at=int(time.time()) - 1), CITATION_KEY.encode())
    changed = token[:10] + ("A" if token[10] != "A" else "B") + token[11:]
    # Another tenant's copy of the document: its payload under this link's signature.
    other_collection = f"kb-citations-other-{unique}"
    _ingest(stack, SOURCE, other_collection)
    _, other_meta = _top(stack, QUESTION, other_collection)
    other_payload = _token(other_meta["citation_url"]).split(".")[0]
    forged = f"{other_payload}.{token.split('.')[1]}"
    for name, bad in {"expired": expired, "changed": changed, "forged": forged}.items():
        response = httpx.get(page_image_url(stack.ingestion_url, bad), timeout=60)
        assert response.status_code == 403, name
        assert response.json()["code"] == "CITATION_LINK_INVALID", name
    assert httpx.get(url, timeout=60).status_code == 200


def test_a_scan_hit_links_to_its_page_with_its_ocr_words_highlighted(stack: Stack, cited: dict[str, Any]) -> None:
    content, meta = _top(stack, "a PDF created from an image cannot be rendered as plain text", cited["collection"])
    assert "non-text-searchable PDF" in content
    assert meta["page"] == 0
    # Placed by the OCR engine's word boxes: no text layer to read them from.
    assert meta["geometry"] == "ocr"
    [region] = meta["regions"]
    response = httpx.get(meta["citation_url"], timeout=60)
    assert response.status_code == 200, response.text
    image = Image.open(io.BytesIO(response.content)).convert("RGB")
    with pdfium.PdfDocument(str(SCAN)) as document:
        width, height = document[0].get_size()
    assert abs(image.height - round(image.width * height / width)) <= 1
    red, green, blue = _mean_rgb(image, region["boxes"][0])
    assert red - blue > 40
    assert green - blue > 20

"""GET /api/v1/citations/{token}/page.png and /original: signed links opened without a key."""

from __future__ import annotations

import io
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pypdfium2 as pdfium
from fastapi.testclient import TestClient
from PIL import Image

from shared_contract.citations import PageLink, link_for, original_url, page_image_url, sign_link

if TYPE_CHECKING:
    from ...conftest import AppFactory, Points, Upload  # noqa: TID252

KEY = "citation-signing-key-for-the-tests-0123456789"
KB = "kb-citations"
PDF = "pdf/unstructured__multi-column-2p.pdf"


def _link(points: Points, client: TestClient, *, page: int, file_id: str = "paper") -> PageLink:
    """The link of the first stored chunk of ``page`` that has regions, valid for an hour."""
    for record in points(client, file_id=file_id, collection_name=KB):
        meta = record.payload["meta"]
        if meta.get("page") == page and meta.get("regions"):
            link = link_for(meta, str(record.point_id), expires_at=int(time.time()) + 3600)
            assert link is not None
            return link
    raise AssertionError(f"no chunk with regions on page {page}")


def _path(url: str) -> str:
    return url.removeprefix("http://testserver")


def _get(client: TestClient, url: str) -> Any:
    """A browser's request: no Authorization header."""
    return client.get(_path(url), headers={"Authorization": ""})


def _boxes(client: TestClient, link: PageLink, points: Points) -> list[list[float]]:
    for record in points(client, file_id=link.file_id, collection_name=link.collection_name):
        if str(record.point_id) == link.point_id:
            [region] = record.payload["meta"]["regions"]
            return list(region["boxes"])
    raise AssertionError("the linked chunk is gone")


def _mean(image: Image.Image, box: list[float]) -> tuple[float, float, float]:
    x0, y0, x1, y1 = box
    crop = image.convert("RGB").crop(
        (int(x0 * image.width), int(y0 * image.height), int(x1 * image.width), int(y1 * image.height))
    )
    pixels = [crop.getpixel((x, y)) for x in range(crop.width) for y in range(crop.height)]
    rgb = [pixel for pixel in pixels if isinstance(pixel, tuple)]
    assert len(rgb) == len(pixels)
    red, green, blue = (sum(float(pixel[channel]) for pixel in rgb) / len(rgb) for channel in range(3))
    return red, green, blue


def test_a_signed_link_opens_the_page_without_a_key_with_the_passage_highlighted(
    app_client: AppFactory, upload: Upload, points: Points, docs: Path
) -> None:
    with app_client(citation_signing_key=KEY) as client:
        assert upload(client, docs / PDF, file_id="paper", collection_name=KB).status_code == 200
        link = _link(points, client, page=1)
        boxes = _boxes(client, link, points)
        response = _get(client, page_image_url("http://testserver", sign_link(link, KEY.encode())) + "?width=800")
        metrics = client.get("/metrics").text
    assert response.status_code == 200, response.text
    assert 'citation_pages_total{kind="page",outcome="ok"} 1.0' in metrics
    assert response.headers["content-type"] == "image/png"
    assert response.headers["cache-control"].startswith("private, max-age=")
    image = Image.open(io.BytesIO(response.content)).convert("RGB")
    assert image.width == 800
    with pdfium.PdfDocument(docs / PDF) as document:
        width, height = document[1].get_size()
    assert abs(image.height - round(800 * height / width)) <= 1
    red, green, blue = _mean(image, boxes[0])
    # Marker yellow over the line: blue is held back, red and green are not.
    assert red - blue > 40
    assert green - blue > 20
    # The page margin (top-left corner) stays paper white.
    assert image.getpixel((3, 3)) == (255, 255, 255)


def test_the_original_link_serves_the_stored_bytes_inline(
    app_client: AppFactory, upload: Upload, points: Points, docs: Path
) -> None:
    with app_client(citation_signing_key=KEY) as client:
        assert upload(client, docs / PDF, file_id="paper", collection_name=KB).status_code == 200
        link = _link(points, client, page=0)
        url = original_url("http://testserver", sign_link(link, KEY.encode()), link.page)
        assert url.endswith("#page=1")
        response = _get(client, url.split("#")[0])
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/pdf"
    assert response.headers["content-disposition"].startswith("inline")
    assert response.content == (docs / PDF).read_bytes()


def test_an_expired_a_tampered_and_a_forged_link_are_refused_with_403(
    app_client: AppFactory, upload: Upload, points: Points, docs: Path
) -> None:
    with app_client(citation_signing_key=KEY) as client:
        assert upload(client, docs / PDF, file_id="paper", collection_name=KB).status_code == 200
        assert upload(client, docs / PDF, file_id="paper", collection_name="kb-other").status_code == 200
        link = _link(points, client, page=1)
        token = sign_link(link, KEY.encode())
        expired = sign_link(replace(link, expires_at=int(time.time()) - 1), KEY.encode())
        changed = token[:-5] + ("A" if token[-5] != "A" else "B") + token[-4:]
        # Another tenant's copy of the document, its payload swapped into a valid link's signature.
        other = sign_link(replace(link, collection_name="kb-other"), b"not-the-key" * 4).split(".")[0]
        forged = f"{other}.{token.split('.')[1]}"
        answers = {
            name: _get(client, page_image_url("http://testserver", value))
            for name, value in {"expired": expired, "changed": changed, "forged": forged}.items()
        }
        valid = _get(client, page_image_url("http://testserver", token))
        metrics = client.get("/metrics").text
    assert valid.status_code == 200
    assert 'citation_pages_total{kind="page",outcome="CITATION_LINK_INVALID"} 3.0' in metrics
    for name, response in answers.items():
        assert response.status_code == 403, name
        assert response.json()["code"] == "CITATION_LINK_INVALID", name
    assert "expired" in answers["expired"].json()["error"]


def test_a_link_to_a_replaced_document_is_gone(
    app_client: AppFactory, upload: Upload, points: Points, docs: Path
) -> None:
    with app_client(citation_signing_key=KEY) as client:
        assert upload(client, docs / PDF, file_id="paper", collection_name=KB).status_code == 200
        token = sign_link(_link(points, client, page=0), KEY.encode())
        replacement = docs / "pdf/kreuzberg__searchable.pdf"
        assert upload(client, replacement, file_id="paper", collection_name=KB).status_code == 200
        response = _get(client, page_image_url("http://testserver", token))
        stats = client.get(f"/api/v1/collections/{KB}/stats").json()
    assert response.status_code == 404
    assert response.json()["code"] == "CITATION_GONE"
    # Only the live version's original is kept.
    assert stats["originals"] == {"originals": 1, "bytes": replacement.stat().st_size}


def test_citation_routes_are_off_without_a_signing_key(
    app_client: AppFactory, upload: Upload, points: Points, docs: Path
) -> None:
    with app_client() as client:
        assert upload(client, docs / PDF, file_id="paper", collection_name=KB).status_code == 200
        token = sign_link(_link(points, client, page=0), KEY.encode())
        response = _get(client, page_image_url("http://testserver", token))
    assert response.status_code == 404
    assert response.json()["code"] == "CITATIONS_DISABLED"


def test_other_routes_still_need_the_key(app_client: AppFactory) -> None:
    with app_client(citation_signing_key=KEY) as client:
        response = client.get(f"/api/v1/collections/{KB}/stats", headers={"Authorization": ""})
    assert response.status_code == 401

"""PUT /process: stock Open WebUI's external document loader, sent exactly as its client sends it.

Open WebUI (``retrieval/loaders/external_document.py``) PUTs the file's bytes to ``{url}/process``
with ``Content-Type: <mime>``, ``X-Filename: <quoted basename>`` and the Bearer key, and reads
``{page_content, metadata}`` or a list of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from ingestion_service.api.routes.loader import loader_filename
from ingestion_service.errors import InvalidRequestError

if TYPE_CHECKING:
    import httpx2

    from ...conftest import AppFactory  # noqa: TID252
    from ...scripted_servers import ScriptedVisionServer  # noqa: TID252


def open_webui_put(
    client: TestClient, path: Path, *, url: str = "", mime: str | None = "application/pdf", name: str | None = None
) -> httpx2.Response:
    """What Open WebUI's ExternalDocumentLoader sends (the TestClient adds the Bearer key)."""
    headers = {"X-Filename": quote(name if name is not None else path.name)}
    if mime is not None:
        headers["Content-Type"] = mime
    return client.put(f"{url.rstrip('/')}/process", content=path.read_bytes(), headers=headers)


def test_a_pdf_comes_back_page_by_page(client: TestClient, docs: Path) -> None:
    response = open_webui_put(client, docs / "pdf/unstructured__multi-column-2p.pdf", name="two pages.pdf")
    assert response.status_code == 200, response.text
    pages = response.json()
    assert [page["metadata"]["page"] for page in pages] == [0, 1]
    for page in pages:
        assert page["page_content"].strip()
        assert page["metadata"]["source"] == "two pages.pdf"
        assert page["metadata"]["extractor"] == "kreuzberg"
        assert set(page["metadata"]) <= {"source", "page", "title", "authors", "languages", "mime_type", "extractor"}


def test_the_api_prefix_path_answers_too(client: TestClient, docs: Path) -> None:
    response = open_webui_put(client, docs / "md/docling__wiki.md", url="/api/v1/", mime="text/markdown")
    assert response.status_code == 200
    [document] = response.json()
    assert "IBM" in document["page_content"]


def test_text_without_an_extension_is_read_as_plain_text(client: TestClient, docs: Path) -> None:
    response = open_webui_put(client, docs / "txt/tika__danish_europarl_sample.txt", mime="text/plain", name="LICENSE")
    assert response.status_code == 200, response.text
    [document] = response.json()
    assert "Europa" in document["page_content"]
    assert document["metadata"]["source"] == "LICENSE"


def test_a_scan_is_read_with_ocr(client: TestClient, docs: Path) -> None:
    [page] = open_webui_put(client, docs / "pdf/kreuzberg__non_searchable.pdf").json()
    assert "non-text-searchable PDF" in page["page_content"]
    assert page["metadata"]["ocr"] is True


def test_the_configured_engine_and_routing_are_used(app_client: AppFactory, docs: Path) -> None:
    with app_client(extraction_engine="auto") as client:
        [document] = open_webui_put(client, docs / "docx/docling__textbox.docx", mime=None).json()
    # No vision endpoint: auto reads the flowchart with the default engine and says why.
    assert document["metadata"]["extractor"] == "kreuzberg"
    assert document["metadata"]["extraction_route"] == "diagram:vision-unconfigured"


def test_auto_with_a_vision_endpoint_but_no_gotenberg_reads_a_diagram_docx_with_the_default_engine(
    app_client: AppFactory, docs: Path, vision_server: ScriptedVisionServer
) -> None:
    with app_client(
        extraction_engine="auto", vision_llm_api_base_url=vision_server.base_url, gotenberg_url=""
    ) as client:
        response = open_webui_put(client, docs / "docx/docling__textbox.docx", mime=None)
        metrics = client.get("/metrics").text
    assert response.status_code == 200, response.text
    [document] = response.json()
    assert document["page_content"].strip()
    assert document["metadata"]["extractor"] == "kreuzberg"
    assert document["metadata"]["extraction_route"] == "diagram:gotenberg-unconfigured"
    assert vision_server.requests == []
    assert 'extraction_routes_total{route="diagram:gotenberg-unconfigured"} 1.0' in metrics


def test_nothing_is_stored(client: TestClient, docs: Path) -> None:
    open_webui_put(client, docs / "md/docling__wiki.md", mime="text/markdown")
    metrics = client.get("/metrics").text
    assert 'loader_requests_total{code="",outcome="success"} 1.0' in metrics
    assert "ingest_requests_total{" not in metrics


def test_failures_are_counted_and_typed(client: TestClient, tmp_path: Path, docs: Path) -> None:
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    binary = tmp_path / "notes.txt"
    binary.write_bytes(bytes(range(256)) * 64)
    assert open_webui_put(client, empty).json()["code"] == "INVALID_REQUEST"
    assert open_webui_put(client, binary, mime="text/plain").status_code == 415
    no_key = client.put("/process", content=(docs / "md/docling__wiki.md").read_bytes(), headers={"Authorization": ""})
    assert no_key.status_code == 401
    metrics = client.get("/metrics").text
    assert 'loader_requests_total{code="INVALID_REQUEST",outcome="error"} 1.0' in metrics
    assert 'loader_requests_total{code="UNSUPPORTED_CONTENT",outcome="error"} 1.0' in metrics


def test_loading_stops_at_ingest_timeout_seconds_like_an_ingest(app_client: AppFactory, docs: Path) -> None:
    with app_client(ingest_timeout_seconds=1e-9) as client:
        response = open_webui_put(client, docs / "pdf/kreuzberg__searchable.pdf")
    assert response.status_code == 504
    assert response.json()["code"] == "INGEST_TIMEOUT"


def test_a_body_over_the_upload_cap_is_413(app_client: AppFactory, docs: Path) -> None:
    with app_client(max_upload_bytes=1000) as client:
        response = open_webui_put(client, docs / "pdf/kreuzberg__searchable.pdf")
    assert response.status_code == 413
    assert response.json()["code"] == "DOCUMENT_TOO_LARGE"
    assert "MAX_UPLOAD_BYTES" in response.json()["error"]


@pytest.mark.parametrize(
    ("header", "content_type", "expected"),
    [
        ("my%20report%20%C3%A6%C3%B8%C3%A5.pdf", "application/pdf", "my report æøå.pdf"),
        ("/uploads/abc_report.pdf", None, "abc_report.pdf"),
        ("C:%5Cdocs%5Creport.docx", None, "report.docx"),
        (None, "application/pdf", "upload.pdf"),
        ("", None, "upload"),
    ],
)
def test_filename_from_the_headers(header: str | None, content_type: str | None, expected: str) -> None:
    assert loader_filename(header, content_type) == expected


def test_a_filename_with_control_characters_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="X-Filename"):
        loader_filename("bad%0Aname.pdf", None)

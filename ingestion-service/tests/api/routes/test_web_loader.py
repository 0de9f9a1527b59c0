"""POST /process: stock Open WebUI's external web loader, sent exactly as its client sends it.

Open WebUI 0.12.4 (``retrieval/loaders/external_web.py``) POSTs ``{"urls": [...]}`` (batches of
20) to EXTERNAL_WEB_LOADER_URL with its User-Agent and the Bearer key, and reads a list of
``{page_content, metadata}``. The pages are served by a real site on 127.0.0.1, which the app may
reach only through URL_FETCH_ALLOW_NETWORKS.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ...web_site import Page, WebSite  # noqa: TID252

if TYPE_CHECKING:
    import httpx2

    from ...conftest import AppFactory  # noqa: TID252

OPEN_WEBUI_AGENT = "Open WebUI (https://github.com/open-webui/open-webui) External Web Loader"
LOOPBACK = "127.0.0.1/32"


def open_webui_post(client: TestClient, urls: list[str], *, path: str = "/process") -> httpx2.Response:
    """What Open WebUI's ExternalWebLoader sends (the TestClient adds the Bearer key)."""
    return client.post(path, json={"urls": urls}, headers={"User-Agent": OPEN_WEBUI_AGENT})


@pytest.fixture
def site(web_site: WebSite, docs: Path) -> WebSite:
    """A real HTML page and a real two-page PDF."""
    web_site.pages["/reports/sales"] = Page((docs / "html/kreuzberg__complex_table.html").read_bytes())
    web_site.pages["/papers/columns.pdf"] = Page(
        (docs / "pdf/unstructured__multi-column-2p.pdf").read_bytes(), "application/pdf"
    )
    return web_site


@pytest.fixture
def allowed(app_client: AppFactory) -> Iterator[TestClient]:
    """An app allowed to fetch from loopback."""
    with app_client(url_fetch_allow_networks=LOOPBACK) as client:
        yield client


def by_source(pages: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for page in pages:
        found.setdefault(page["metadata"]["source"], []).append(page)
    return found


def test_an_html_page_and_a_pdf_come_back_extracted_with_their_urls(allowed: TestClient, site: WebSite) -> None:
    html_url, pdf_url = site.url("/reports/sales"), site.url("/papers/columns.pdf")
    response = open_webui_post(allowed, [html_url, pdf_url])
    assert response.status_code == 200, response.text
    pages = by_source(response.json())
    assert list(pages) == [html_url, pdf_url]
    [html] = pages[html_url]
    assert "Quarterly Sales Report" in html["page_content"]
    assert html["metadata"]["title"] == "Complex Table Test"
    assert html["metadata"]["extractor"] == "kreuzberg"
    assert [page["metadata"]["page"] for page in pages[pdf_url]] == [0, 1]
    assert all(page["page_content"].strip() for page in pages[pdf_url])
    assert {page["metadata"]["mime_type"] for page in pages[pdf_url]} == {"application/pdf"}
    # Fetched side by side: each once, in any order.
    assert sorted(visit.path for visit in site.visits) == ["/papers/columns.pdf", "/reports/sales"]


def test_a_redirected_url_keeps_its_own_source_and_reports_where_it_ended(allowed: TestClient, site: WebSite) -> None:
    site.pages["/latest"] = Page(status=302, headers={"Location": "/reports/sales"})
    [page] = open_webui_post(allowed, [site.url("/latest")]).json()
    # Web search keeps the results whose link is a returned source: it must be the URL as sent.
    assert page["metadata"]["source"] == site.url("/latest")
    assert page["metadata"]["final_url"] == site.url("/reports/sales")


def test_the_api_prefix_path_answers_too(allowed: TestClient, site: WebSite) -> None:
    response = open_webui_post(allowed, [site.url("/reports/sales")], path="/api/v1/process")
    assert response.status_code == 200
    assert response.json()[0]["metadata"]["source"] == site.url("/reports/sales")


def test_a_failing_url_is_left_out_and_the_others_answered(allowed: TestClient, site: WebSite) -> None:
    site.pages["/download"] = Page(b"\x7fELF", "application/octet-stream")
    urls = [site.url("/missing"), site.url("/reports/sales"), site.url("/download")]
    response = open_webui_post(allowed, urls)
    assert response.status_code == 200
    assert list(by_source(response.json())) == [site.url("/reports/sales")]
    metrics = allowed.get("/metrics").text
    assert 'web_loader_urls_total{code="",outcome="success"} 1.0' in metrics
    assert 'web_loader_urls_total{code="URL_FETCH_FAILED",outcome="error"} 1.0' in metrics
    assert 'web_loader_urls_total{code="UNSUPPORTED_CONTENT",outcome="error"} 1.0' in metrics


def test_when_every_url_fails_the_answer_is_the_first_error(client: TestClient, site: WebSite) -> None:
    # Without the allow-list loopback is refused: the site is never asked.
    response = open_webui_post(client, [site.url("/reports/sales"), site.url("/papers/columns.pdf")])
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "URL_NOT_ALLOWED"
    assert "loopback" in body["error"]
    assert "URL_FETCH_ALLOW_NETWORKS" in body["hint"]
    assert site.visits == []


def test_nothing_is_stored_and_no_staging_is_left(app_client: AppFactory, site: WebSite, tmp_path: Path) -> None:
    with app_client(url_fetch_allow_networks=LOOPBACK, scratch_dir=tmp_path) as client:
        assert open_webui_post(client, [site.url("/papers/columns.pdf"), site.url("/missing")]).status_code == 200
        assert "ingest_requests_total{" not in client.get("/metrics").text
        assert isinstance(client.app, FastAPI)
        assert client.app.state.runtime.scratch.reserved_bytes == 0
        assert [path.name for path in tmp_path.rglob("*") if path.is_file() and path.name != ".lock"] == []


@pytest.mark.parametrize(
    "body",
    [{"urls": []}, {"urls": ["http://example.com/"] * 21}, {"urls": "http://example.com/"}, {"url": "x"}, ["x"]],
    ids=["empty", "21-urls", "not-a-list", "no-urls", "not-an-object"],
)
def test_a_malformed_request_is_422(client: TestClient, body: Any) -> None:
    response = client.post("/process", json=body)
    assert response.status_code == 422
    assert response.json()["code"] == "INVALID_REQUEST"


def test_fields_a_later_open_webui_may_add_are_ignored(allowed: TestClient, site: WebSite) -> None:
    response = allowed.post("/process", json={"urls": [site.url("/reports/sales")], "timeout": 10})
    assert response.status_code == 200


def test_the_key_is_required(client: TestClient) -> None:
    response = client.post("/process", json={"urls": ["http://example.com/"]}, headers={"Authorization": ""})
    assert response.status_code == 401

"""PUT /api/v1/ingest with ``url``: the document is fetched (a real site on 127.0.0.1, reachable
through URL_FETCH_ALLOW_NETWORKS) and ingested like any other source."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fastapi.testclient import TestClient

from ...web_site import Page, WebSite  # noqa: TID252

if TYPE_CHECKING:
    import httpx2

    from ...conftest import AppFactory  # noqa: TID252

COLLECTION = "kb-web"


@pytest.fixture
def allowed(app_client: AppFactory) -> Iterator[TestClient]:
    with app_client(url_fetch_allow_networks="127.0.0.1/32") as client:
        yield client


@pytest.fixture
def site(web_site: WebSite, docs: Path) -> WebSite:
    web_site.pages["/papers/columns"] = Page(
        (docs / "pdf/unstructured__multi-column-2p.pdf").read_bytes(), "application/pdf"
    )
    web_site.pages["/reports/sales.html"] = Page((docs / "html/kreuzberg__complex_table.html").read_bytes())
    return web_site


def ingest_url(client: TestClient, url: str, file_id: str = "web-1", **fields: Any) -> httpx2.Response:
    body = {"url": url, "file_id": file_id, "collection_name": COLLECTION, "user_id": "user-1", **fields}
    return client.put("/api/v1/ingest", json=body)


def test_a_url_is_ingested_and_listed_under_its_url(allowed: TestClient, site: WebSite) -> None:
    url = site.url("/papers/columns")
    response = ingest_url(allowed, url)
    assert response.status_code == 200, response.text
    assert response.json()["chunks_count"] > 0
    listing = allowed.get("/api/v1/documents", params={"collection_name": COLLECTION}).json()
    [document] = listing["documents"]
    assert (document["file_id"], document["name"], document["format"]) == ("web-1", url, "pdf")
    assert (document["s3_bucket"], document["s3_key"]) == (None, None)
    text = allowed.get("/api/v1/documents/web-1/text", params={"collection_name": COLLECTION}).json()
    assert text["name"] == url
    assert text["text"].strip()


def test_the_same_content_again_is_unchanged(allowed: TestClient, site: WebSite) -> None:
    url = site.url("/reports/sales.html")
    first = ingest_url(allowed, url, tags=["sales"])
    assert first.status_code == 200, first.text
    again = ingest_url(allowed, url)
    assert again.status_code == 200
    assert again.json()["unchanged"] is True
    assert again.json()["content_hash"] == first.json()["content_hash"]
    assert [visit.path for visit in site.visits] == ["/reports/sales.html", "/reports/sales.html"]


def test_a_refused_url_is_422_and_stores_nothing(client: TestClient, site: WebSite) -> None:
    response = ingest_url(client, site.url("/papers/columns"))
    assert response.status_code == 422
    assert response.json()["code"] == "URL_NOT_ALLOWED"
    assert site.visits == []
    listing = client.get("/api/v1/documents", params={"collection_name": COLLECTION}).json()
    assert listing["documents"] == []


def test_a_dead_link_is_502(allowed: TestClient, site: WebSite) -> None:
    response = ingest_url(allowed, site.url("/gone"))
    assert response.status_code == 502
    assert response.json()["code"] == "URL_FETCH_FAILED"


@pytest.mark.parametrize(
    "extra",
    [{"s3_bucket": "openwebui", "s3_key": "a.pdf"}, {"filename": "a.pdf"}],
    ids=["with-s3", "with-filename"],
)
def test_url_goes_alone(client: TestClient, extra: dict[str, str]) -> None:
    response = ingest_url(client, "https://example.com/a.pdf", **extra)
    assert response.status_code == 422
    assert response.json()["code"] == "INVALID_REQUEST"

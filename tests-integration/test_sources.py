"""A website the server keeps in step, black-box: a real `rag dev` (the fetcher allow-listed for
127.0.0.1) registers a site served on loopback, indexes it, re-syncs it after a page changed and
another went, answers searches from it, and removes it with its documents."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from integration_support import Stack, running_rag_dev

KB = "kb-website"
# Only a guard against a stuck sync; no assertion depends on how long it takes.
SETTLE_GUARD_S = 300


@dataclass
class Site:
    """Pages by path (HTML text); a path not in it answers 404."""

    pages: dict[str, str] = field(default_factory=dict[str, str])
    url: str = ""


def _page(title: str, body: str, links: tuple[str, ...] = ()) -> str:
    anchors = " ".join(f'<a href="{link}">{link}</a>' for link in links)
    return f"<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{body}</p>{anchors}</body></html>"


@pytest.fixture
def site() -> Iterator[Site]:
    served = Site()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = served.pages.get(self.path)
            body = (page or "not found").encode()
            self.send_response(200 if page is not None else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8" if page is not None else "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def fetching_stack(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if os.environ.get("INGESTION_BASE_URL"):
        pytest.skip("starts its own `rag dev` whose URL fetcher may reach 127.0.0.1")
    with running_rag_dev(
        tmp_path_factory.mktemp("sources"), stack.s3, {"URL_FETCH_ALLOW_NETWORKS": "127.0.0.1/32"}
    ) as running:
        yield running


def _settled(ingestion: httpx.Client, source_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + SETTLE_GUARD_S
    while True:
        source: dict[str, Any] = ingestion.get(f"/api/v1/sources/{source_id}").json()
        if source["state"] in ("indexed", "failed"):
            return source
        assert time.monotonic() < deadline, source
        time.sleep(0.2)


def _documents(ingestion: httpx.Client) -> dict[str, dict[str, Any]]:
    listing = ingestion.get("/api/v1/documents", params={"collection_name": KB}).json()
    return {document["source_uri"]: document for document in listing["documents"]}


def _top(retrieval: httpx.Client, query: str) -> tuple[str, dict[str, Any]]:
    response = retrieval.post("/search", json={"queries": [query], "collection_names": [KB], "k": 1})
    assert response.status_code == 200, response.text
    body = response.json()
    return body["documents"][0][0], body["metadatas"][0][0]


def test_a_website_source_is_indexed_resynced_searched_and_removed(fetching_stack: Stack, site: Site) -> None:
    ingestion, retrieval = fetching_stack.ingestion(), fetching_stack.retrieval()
    site.pages["/"] = _page("Ferry timetable", "Ferries to the island leave the harbour.", ("/winter", "/fares"))
    site.pages["/winter"] = _page("Winter", "In winter the ferry sails twice a day, at seven and at five.")
    site.pages["/fares"] = _page("Fares", "A return ticket for a bicycle costs forty crowns.")
    home, winter, fares = (f"{site.url}{path}" for path in ("/", "/winter", "/fares"))

    response = ingestion.post("/api/v1/sources", json={"uri": home, "kind": "website", "collection_name": KB})
    assert response.status_code == 202, response.text
    assert response.json()["state"] == "pending"
    source_id = response.json()["source_id"]
    first = _settled(ingestion, source_id)
    assert first["state"] == "indexed", first
    assert first["counts"] == {"seen": 3, "added": 3, "changed": 0, "unchanged": 0, "removed": 0, "failed": 0}
    documents = _documents(ingestion)
    assert set(documents) == {home, winter, fares}
    assert all(document["fetched_at"] for document in documents.values())
    text, meta = _top(retrieval, "How often does the ferry sail in winter?")
    assert "twice a day" in text
    assert meta["source_uri"] == winter

    site.pages["/winter"] = _page("Winter", "In winter the ferry sails once a day, at noon.")
    site.pages["/"] = _page("Ferry timetable", "Ferries to the island leave the harbour.", ("/winter",))
    del site.pages["/fares"]
    assert ingestion.post(f"/api/v1/sources/{source_id}/sync").status_code == 202
    second = _settled(ingestion, source_id)
    assert second["state"] == "indexed", second
    assert second["counts"] == {"seen": 2, "added": 0, "changed": 2, "unchanged": 0, "removed": 1, "failed": 0}
    assert set(_documents(ingestion)) == {home, winter}
    text, meta = _top(retrieval, "How often does the ferry sail in winter?")
    assert "once a day, at noon" in text
    assert meta["source_uri"] == winter

    deleted = ingestion.delete(f"/api/v1/sources/{source_id}")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["documents_deleted"] == 2
    assert _documents(ingestion) == {}
    gone = ingestion.get(f"/api/v1/sources/{source_id}")
    assert (gone.status_code, gone.json()["code"]) == (404, "SOURCE_NOT_FOUND")

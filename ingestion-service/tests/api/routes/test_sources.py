"""/api/v1/sources through the real app: a website on 127.0.0.1 (allow-listed) registered, indexed,
changed, re-synced and removed; folder roots; a failing source."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from fastapi.testclient import TestClient

from ingestion_service.runtime import ServiceHooks
from ingestion_service.sources.model import item_file_id

from ...web_site import Page, WebSite  # noqa: TID252

if TYPE_CHECKING:
    from ...conftest import AppFactory  # noqa: TID252

COLLECTION = "kb-site"
POLL_LIMIT_SECONDS = 120.0


def _page(title: str, text: str) -> Page:
    return Page(f"<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{text}</p></body></html>".encode())


def _settled(client: TestClient, source_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + POLL_LIMIT_SECONDS
    while True:
        source: dict[str, Any] = client.get(f"/api/v1/sources/{source_id}").json()
        if source["state"] in ("indexed", "failed"):
            return source
        assert time.monotonic() < deadline, f"the source never settled: {source}"
        time.sleep(0.05)


def _documents(client: TestClient, collection: str = COLLECTION) -> dict[str, dict[str, Any]]:
    listing = client.get("/api/v1/documents", params={"collection_name": collection}).json()
    return {document["file_id"]: document for document in listing["documents"]}


@pytest.fixture
def client(app_client: AppFactory, tmp_path: Path) -> Iterator[TestClient]:
    roots = tmp_path / "roots"
    (roots / "allowed").mkdir(parents=True)
    with app_client(
        url_fetch_allow_networks="127.0.0.1/32",
        ingest_state_dir=tmp_path / "state",
        source_folder_roots=str(roots / "allowed"),
    ) as test_client:
        yield test_client


def test_a_website_source_is_indexed_resynced_and_removed(client: TestClient, web_site: WebSite) -> None:
    web_site.pages["/"] = Page(
        b'<html><body><h1>Home</h1><p>Start here.</p><a href="/guide">guide</a> <a href="/faq">faq</a></body></html>'
    )
    web_site.pages["/guide"] = _page("Guide", "Install the server with the package manager.")
    web_site.pages["/faq"] = _page("FAQ", "Questions people ask about the server.")
    response = client.post(
        "/api/v1/sources", json={"uri": web_site.url("/"), "kind": "website", "collection_name": COLLECTION}
    )
    assert response.status_code == 202, response.text
    registered = response.json()
    assert registered["state"] == "pending"
    source_id = registered["source_id"]

    first = _settled(client, source_id)
    assert first["state"] == "indexed", first
    assert first["counts"] == {"seen": 3, "added": 3, "changed": 0, "unchanged": 0, "removed": 0, "failed": 0}
    assert first["last_synced_at"] is not None
    documents = _documents(client)
    pages = {web_site.url(path): item_file_id(web_site.url(path)) for path in ("/", "/guide", "/faq")}
    assert set(documents) == set(pages.values())
    for url, file_id in pages.items():
        assert documents[file_id]["source_uri"] == url
        assert documents[file_id]["fetched_at"] is not None

    web_site.pages["/guide"] = _page("Guide", "Install the server from the release archive instead.")
    web_site.pages["/"] = Page(b'<html><body><h1>Home</h1><p>Start here.</p><a href="/guide">guide</a></body></html>')
    del web_site.pages["/faq"]
    assert client.post(f"/api/v1/sources/{source_id}/sync").status_code == 202
    second = _settled(client, source_id)
    assert second["state"] == "indexed", second
    # The home page changed too (its link to /faq is gone).
    assert second["counts"] == {"seen": 2, "added": 0, "changed": 2, "unchanged": 0, "removed": 1, "failed": 0}
    assert set(_documents(client)) == {pages[web_site.url("/")], pages[web_site.url("/guide")]}

    assert client.post(f"/api/v1/sources/{source_id}/sync").status_code == 202
    third = _settled(client, source_id)
    assert third["counts"] == {"seen": 2, "added": 0, "changed": 0, "unchanged": 2, "removed": 0, "failed": 0}

    deleted = client.delete(f"/api/v1/sources/{source_id}")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {"source_id": source_id, "documents_deleted": 2}
    assert _documents(client) == {}
    assert client.get(f"/api/v1/sources/{source_id}").json()["code"] == "SOURCE_NOT_FOUND"
    assert client.get("/api/v1/sources").json() == {"sources": []}


def test_a_folder_under_an_allowed_root_is_indexed_and_one_outside_refused(client: TestClient, tmp_path: Path) -> None:
    folder = tmp_path / "roots" / "allowed" / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("# A\n\nThe first note about folders.\n")
    (folder / "sub" / "b.md").write_text("# B\n\nThe second note, in a subfolder.\n")
    (folder / ".hidden.md").write_text("# Hidden\n\nNot synced.\n")
    outside = tmp_path / "roots" / "other"
    outside.mkdir()

    refused = client.post("/api/v1/sources", json={"uri": str(outside), "kind": "folder", "collection_name": "kb-f"})
    assert refused.status_code == 422, refused.text
    assert refused.json()["code"] == "SOURCE_NOT_ALLOWED"

    response = client.post("/api/v1/sources", json={"uri": str(folder), "kind": "folder", "collection_name": "kb-f"})
    assert response.status_code == 202, response.text
    source = _settled(client, response.json()["source_id"])
    assert source["state"] == "indexed", source
    assert source["counts"]["added"] == 2
    root_uri = folder.resolve().as_uri()
    documents = _documents(client, "kb-f")
    assert {document["path"] for document in documents.values()} == {"a.md", "sub/b.md"}
    assert set(documents) == {item_file_id(f"{root_uri}/a.md"), item_file_id(f"{root_uri}/sub/b.md")}


def test_a_source_that_cannot_be_read_shows_failed_with_the_reason(client: TestClient, web_site: WebSite) -> None:
    web_site.pages["/"] = Page(b"down for maintenance", "text/plain", 503)
    response = client.post(
        "/api/v1/sources", json={"uri": web_site.url("/"), "kind": "website", "collection_name": COLLECTION}
    )
    assert response.status_code == 202, response.text
    source = _settled(client, response.json()["source_id"])
    assert source["state"] == "failed"
    assert source["error"] == {"code": "URL_FETCH_FAILED", "error": "The URL answered HTTP 503.", "uri": None}


def test_a_reindex_keeps_where_a_source_document_came_from(client: TestClient, web_site: WebSite) -> None:
    web_site.pages["/"] = _page("Home", "The harbour opens at dawn and closes at dusk.")
    response = client.post(
        "/api/v1/sources", json={"uri": web_site.url("/"), "kind": "website", "collection_name": COLLECTION}
    )
    assert response.status_code == 202, response.text
    assert _settled(client, response.json()["source_id"])["state"] == "indexed"
    before = _documents(client)[item_file_id(web_site.url("/"))]

    job = client.post(f"/api/v1/collections/{COLLECTION}/reindex", json={"force": True})
    assert job.status_code == 202, job.text
    deadline = time.monotonic() + POLL_LIMIT_SECONDS
    while (state := client.get(f"/api/v1/reindex/jobs/{job.json()['job_id']}").json())["state"] not in (
        "succeeded",
        "failed",
    ):
        assert time.monotonic() < deadline, state
        time.sleep(0.05)
    assert state["state"] == "succeeded", state
    assert state["failed"] == 0, state["failures"]
    after = _documents(client)[item_file_id(web_site.url("/"))]
    assert after["ingest_version"] != before["ingest_version"]
    assert (after["source_uri"], after["fetched_at"]) == (before["source_uri"], before["fetched_at"])


class SteppedClock:
    """The wall clock sources are scheduled by, moved on by the test."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_a_scheduled_source_syncs_again_when_it_is_due(
    app_client: AppFactory, tmp_path: Path, web_site: WebSite
) -> None:
    clock = SteppedClock()
    hooks = ServiceHooks(source_clock=clock, source_tick_seconds=0.01)
    web_site.pages["/"] = _page("Tides", "High water is at six in the morning.")
    with app_client(hooks=hooks, url_fetch_allow_networks="127.0.0.1/32", ingest_state_dir=tmp_path) as client:
        response = client.post(
            "/api/v1/sources",
            json={"uri": web_site.url("/"), "kind": "website", "collection_name": COLLECTION, "schedule_minutes": 30},
        )
        assert response.status_code == 202, response.text
        source_id = response.json()["source_id"]
        first = _settled(client, source_id)
        assert first["counts"]["added"] == 1
        assert first["next_sync_at"] == "2026-01-01T00:30:00Z"

        web_site.pages["/"] = _page("Tides", "High water is at seven in the morning.")
        visits = len(web_site.visits)
        clock.now += timedelta(minutes=29)
        # Not due yet: the schedule looks (many ticks) and leaves it alone.
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(web_site.visits) == visits
        clock.now += timedelta(minutes=2)
        deadline = time.monotonic() + POLL_LIMIT_SECONDS
        while (source := client.get(f"/api/v1/sources/{source_id}").json())["counts"]["changed"] != 1:
            assert time.monotonic() < deadline, source
            time.sleep(0.05)
        settled = _settled(client, source_id)
        assert settled["last_synced_at"] == "2026-01-01T00:31:00Z"
        assert settled["next_sync_at"] == "2026-01-01T01:01:00Z"


def test_an_s3_prefix_source_follows_its_objects(app_client: AppFactory, tmp_path: Path, s3_endpoint: str) -> None:
    bucket = f"src-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client(
        "s3", endpoint_url=s3_endpoint, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    )
    s3.create_bucket(Bucket=bucket)
    s3.put_object(
        Bucket=bucket, Key="handbook/canteen.md", Body=b"# Canteen\n\nThe canteen opens at half past eleven.\n"
    )
    s3.put_object(
        Bucket=bucket, Key="handbook/it/vpn.md", Body=b"# VPN\n\nConnect to the VPN before opening the wiki.\n"
    )
    s3.put_object(Bucket=bucket, Key="elsewhere/other.md", Body=b"# Other\n\nNot under the prefix.\n")
    settings: dict[str, Any] = {
        "s3_endpoint_url": s3_endpoint,
        "s3_allowed_buckets": bucket,
        "ingest_state_dir": tmp_path,
    }
    with app_client(**settings) as client:
        uri = f"s3://{bucket}/handbook"
        response = client.post("/api/v1/sources", json={"uri": uri, "kind": "s3", "collection_name": "kb-s3"})
        assert response.status_code == 202, response.text
        source_id = response.json()["source_id"]
        first = _settled(client, source_id)
        assert first["state"] == "indexed", first
        assert first["counts"]["added"] == 2
        documents = _documents(client, "kb-s3")
        assert {document["source_uri"] for document in documents.values()} == {
            f"{uri}/canteen.md",
            f"{uri}/it/vpn.md",
        }

        s3.delete_object(Bucket=bucket, Key="handbook/it/vpn.md")
        assert client.post(f"/api/v1/sources/{source_id}/sync").status_code == 202
        second = _settled(client, source_id)
        assert second["counts"] == {"seen": 1, "added": 0, "changed": 0, "unchanged": 1, "removed": 1, "failed": 0}
        assert {document["source_uri"] for document in _documents(client, "kb-s3").values()} == {f"{uri}/canteen.md"}

        outside = client.post(
            "/api/v1/sources", json={"uri": "s3://another-bucket/x", "kind": "s3", "collection_name": "kb-s3"}
        )
        assert outside.status_code == 422, outside.text
        assert outside.json()["code"] == "SOURCE_NOT_ALLOWED"

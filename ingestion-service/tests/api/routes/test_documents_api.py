"""The documents API (list, text, PATCH) and collection stats, seeded through the real ingest."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ingestion_service.adapters.document_catalog import DocumentCatalog, DocumentChanges
from ingestion_service.error_table import METADATA_HINT
from ingestion_service.runtime import ServiceHooks
from rag_runtime.http import hint_for
from rag_runtime.store import ChunkPoint, ChunkStore, PointRecord
from shared_contract import PENDING_STATE, QdrantUnavailableError

if TYPE_CHECKING:
    from ...conftest import AppFactory, Points, Upload  # noqa: TID252

# Small windows, so a short document gives several chunks that share text.
CHUNKING: dict[str, Any] = {"chunk_size": 40, "chunk_overlap": 12, "chunk_min_size": 10}
HANDBOOK = (
    "# Staff handbook\n\n"
    "New employees receive a laptop on their first day. The IT desk on the second floor sets up accounts "
    "for email, calendar and the document archive. Holiday requests go to your manager at least three weeks "
    "ahead through the HR portal. The canteen opens at eleven thirty and closes at one thirty. Bicycles are "
    "parked in the basement, never in the corridors. Fire drills happen twice a year and everyone leaves by "
    "the nearest stairway, not the lift. Expense reports are filed within thirty days with receipts attached. "
    "The annual staff party is held in December at the harbour hall.\n"
)
DOCUMENTS = "/api/v1/documents"


def words(text: str) -> str:
    """``text`` with every run of whitespace as one space (what the Markdown reader may change)."""
    return " ".join(text.split())


@pytest.fixture
def client(app_client: AppFactory) -> Iterator[TestClient]:
    with app_client(**CHUNKING) as test_client:
        yield test_client


Write = Callable[..., Path]


@pytest.fixture
def write(tmp_path: Path) -> Write:
    """``write(name, text=HANDBOOK)`` -> a document file to upload."""

    def make(name: str, text: str = HANDBOOK) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return make


def ingest(client: TestClient, upload: Upload, path: Path, file_id: str, collection_name: str = "kb-a") -> None:
    response = upload(client, path, file_id=file_id, collection_name=collection_name)
    assert response.status_code == 200, response.text


def listing(client: TestClient, collection_name: str = "kb-a", **params: Any) -> dict[str, Any]:
    response = client.get(DOCUMENTS, params={"collection_name": collection_name, **params})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def committed(records: list[PointRecord]) -> list[PointRecord]:
    return [record for record in records if record.payload["meta"].get("ingest_state") != PENDING_STATE]


def test_text_is_the_document_once_without_the_window_overlap(
    client: TestClient, upload: Upload, write: Write, points: Points
) -> None:
    ingest(client, upload, write("handbook.md"), "h")
    chunks = [record.payload["content"] for record in points(client, file_id="h")]
    assert len(chunks) >= 3
    # The chunks share text: joined as stored they would repeat it.
    assert sum(len(chunk) for chunk in chunks) > len(HANDBOOK) + 40

    response = client.get(f"{DOCUMENTS}/h/text", params={"collection_name": "kb-a"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert words(body["text"]) == words(HANDBOOK)
    assert body["text"].count("Bicycles are parked") == 1
    assert {key: body[key] for key in ("file_id", "collection_name", "name", "chunks")} == {
        "file_id": "h",
        "collection_name": "kb-a",
        "name": "handbook.md",
        "chunks": len(chunks),
    }


def test_an_entry_describes_the_stored_version(
    client: TestClient, upload: Upload, write: Write, points: Points
) -> None:
    path = write("handbook.md")
    ingest(client, upload, path, "h")
    stored = points(client, file_id="h")
    [entry] = listing(client)["documents"]
    assert entry == {
        "file_id": "h",
        "name": "handbook.md",
        "collection_name": "kb-a",
        "content_hash": hashlib.sha256(path.read_bytes()).hexdigest(),
        "source_bytes": len(path.read_bytes()),
        "format": "md",
        "chunks": len(stored),
        "text_bytes": sum(len(record.payload["content"].encode()) for record in stored),
        "languages": ["en"],
        "extractor": "kreuzberg",
        "tags": [],
        "category": None,
        "attributes": {},
        "ingested_at": entry["ingested_at"],
        "ingest_version": stored[0].payload["meta"]["ingest_version"],
        "s3_bucket": None,
        "s3_key": None,
        "s3_etag": None,
        "path": None,
        "source_uri": None,
        "fetched_at": None,
    }
    assert entry["ingested_at"].startswith(stored[0].payload["meta"]["indexed_at"][:19])


def test_the_list_is_paged_and_sorted(client: TestClient, upload: Upload, write: Write) -> None:
    # Ingest order b, a, c: newest first is c, a, b.
    for file_id in ("b", "a", "c"):
        ingest(client, upload, write(f"{file_id}-notes.md"), file_id)

    first = listing(client, limit=2)
    assert ([doc["file_id"] for doc in first["documents"]], first["total"], first["next_offset"]) == (
        ["c", "a"],
        3,
        "2",
    )
    second = listing(client, limit=2, offset=first["next_offset"])
    assert ([doc["file_id"] for doc in second["documents"]], second["next_offset"]) == (["b"], None)

    def order(sort: str) -> list[str]:
        return [doc["file_id"] for doc in listing(client, sort=sort)["documents"]]

    assert order("ingested_at") == ["b", "a", "c"]
    assert order("name") == ["a", "b", "c"]
    assert order("-name") == ["c", "b", "a"]
    assert client.get(DOCUMENTS, params={"collection_name": "kb-a", "sort": "size"}).status_code == 422
    assert client.get(DOCUMENTS, params={"collection_name": "kb-a", "limit": 1001}).status_code == 422


def test_a_reingested_file_is_listed_once_as_its_new_version(client: TestClient, upload: Upload, write: Write) -> None:
    ingest(client, upload, write("v1.md"), "f")
    before = listing(client)["documents"][0]
    ingest(client, upload, write("v2.md", HANDBOOK.replace("harbour hall", "old town hall")), "f")
    listed = listing(client)
    assert listed["total"] == 1
    [after] = listed["documents"]
    assert (after["name"], after["ingest_version"] > before["ingest_version"]) == ("v2.md", True)
    assert "old town hall" in client.get(f"{DOCUMENTS}/f/text", params={"collection_name": "kb-a"}).json()["text"]


def test_tenants_never_see_each_others_documents(
    client: TestClient, upload: Upload, write: Write, points: Points
) -> None:
    ingest(client, upload, write("mine.md"), "mine", "kb-a")
    ingest(client, upload, write("theirs.md"), "theirs", "kb-b")
    theirs = [record.payload for record in points(client, file_id="theirs")]
    assert [doc["file_id"] for doc in listing(client, "kb-a")["documents"]] == ["mine"]
    assert [doc["file_id"] for doc in listing(client, "kb-b")["documents"]] == ["theirs"]

    for response in (
        client.get(f"{DOCUMENTS}/theirs/text", params={"collection_name": "kb-a"}),
        client.patch(f"{DOCUMENTS}/theirs", params={"collection_name": "kb-a"}, json={"tags": ["stolen"]}),
        client.get(f"{DOCUMENTS}/nobody/text", params={"collection_name": "kb-a"}),
    ):
        assert response.status_code == 404, response.text
        assert response.json() == {
            "status": False,
            "error": "No document with this file_id in this collection.",
            "code": "DOCUMENT_NOT_FOUND",
            "hint": hint_for("DOCUMENT_NOT_FOUND"),
            "request_id": response.headers["x-request-id"],
        }
    assert [record.payload for record in points(client, file_id="theirs")] == theirs
    # Reading or changing a file names its tenant.
    assert client.get(f"{DOCUMENTS}/mine/text").status_code == 422
    assert client.get(DOCUMENTS).status_code == 422


def test_patch_changes_metadata_without_touching_vectors_or_chunks(
    client: TestClient, upload: Upload, write: Write, points: Points
) -> None:
    ingest(client, upload, write("handbook.md"), "h")
    before = {record.point_id: record for record in points(client, file_id="h")}

    response = client.patch(
        f"{DOCUMENTS}/h",
        params={"collection_name": "kb-a"},
        json={"tags": [" policy ", "hr", "policy", ""], "category": "handbook", "attributes": {"year": 2025}},
    )
    assert response.status_code == 200, response.text
    entry = response.json()
    assert (entry["tags"], entry["category"], entry["attributes"]) == (["policy", "hr"], "handbook", {"year": 2025})
    assert entry["chunks"] == len(before)
    assert entry == listing(client)["documents"][0]

    after = {record.point_id: record for record in points(client, file_id="h")}
    assert after.keys() == before.keys()
    for point_id, record in after.items():
        assert record.vectors == before[point_id].vectors
        assert record.payload["content"] == before[point_id].payload["content"]
        meta = record.payload["meta"]
        assert (meta["tags"], meta["category"], meta["attributes"]) == (["policy", "hr"], "handbook", {"year": 2025})
        assert meta["ingest_version"] == before[point_id].payload["meta"]["ingest_version"]

    # The new tags select the document; the list filters on them.
    assert [doc["file_id"] for doc in listing(client, tag="hr")["documents"]] == ["h"]
    assert listing(client, tag="finance")["documents"] == []
    assert listing(client, category="handbook")["total"] == 1
    assert listing(client, format="MD")["total"] == 1


def test_patch_semantics_replace_clear_and_keep(
    client: TestClient, upload: Upload, write: Write, points: Points
) -> None:
    ingest(client, upload, write("handbook.md"), "h")
    url, params = f"{DOCUMENTS}/h", {"collection_name": "kb-a"}
    client.patch(url, params=params, json={"tags": ["a"], "category": "c", "attributes": {"x": "1", "y": "2"}})

    # A given field replaces (attributes as a whole object); a missing one is kept.
    entry = client.patch(url, params=params, json={"attributes": {"y": "3"}}).json()
    assert (entry["tags"], entry["category"], entry["attributes"]) == (["a"], "c", {"y": "3"})
    # null clears.
    entry = client.patch(url, params=params, json={"tags": None, "category": None, "attributes": None}).json()
    assert (entry["tags"], entry["category"], entry["attributes"]) == ([], None, {})
    # A new name is also the citation source.
    entry = client.patch(url, params=params, json={"name": "Staff handbook 2026.md"}).json()
    assert entry["name"] == "Staff handbook 2026.md"
    assert {(r.payload["meta"]["name"], r.payload["meta"]["source"]) for r in points(client, file_id="h")} == {
        ("Staff handbook 2026.md", "Staff handbook 2026.md")
    }
    assert listing(client, sort="name")["documents"][0]["name"] == "Staff handbook 2026.md"


def test_patch_reaches_the_pending_points_of_a_running_ingest(
    client: TestClient, upload: Upload, write: Write, points: Points
) -> None:
    ingest(client, upload, write("handbook.md"), "h")
    [head] = [record for record in points(client, file_id="h") if record.payload["meta"]["split_id"] == 0]
    # A newer run of the same file, half written.
    meta = {**head.payload["meta"], "ingest_state": PENDING_STATE, "ingest_seq": head.payload["meta"]["ingest_seq"] + 1}
    dense = head.vectors["text-dense"] if head.vectors else []
    assert isinstance(dense, list)
    pending = ChunkPoint(point_id=str(uuid.uuid4()), dense=dense, sparse=None, payload={**head.payload, "meta": meta})
    assert isinstance(client.app, FastAPI)
    assert client.portal is not None
    client.portal.call(client.app.state.runtime.store.upsert, [pending])

    assert client.patch(f"{DOCUMENTS}/h", params={"collection_name": "kb-a"}, json={"tags": ["new"]}).status_code == 200
    stored = points(client, file_id="h")
    assert len(stored) == len(committed(stored)) + 1
    assert {tuple(record.payload["meta"]["tags"]) for record in stored} == {("new",)}
    # Still pending: neither listed nor counted.
    assert listing(client)["documents"][0]["chunks"] == len(committed(stored))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"tags": ["x"], "owner": "me"}, "owner: Extra inputs are not permitted"),
        ({}, "give at least one of tags, category, attributes, name"),
        ({"name": None}, "name: Value error, cannot be cleared"),
        ({"name": "../secret.md"}, "name: Value error, must be a file name, not a path"),
        ({"category": ""}, "category: String should have at least 1 character"),
        ({"tags": ["t"] * 65}, "tags: List should have at most 64 items"),
        ({"attributes": {"year": "twenty"}}, "attributes: attribute 'year' must be a integer"),
        ({"attributes": {"bad key": 1}}, "attributes: attribute key 'bad key' must match"),
    ],
)
def test_patch_refuses_invalid_bodies_and_changes_nothing(
    app_client: AppFactory, upload: Upload, write: Write, points: Points, body: dict[str, Any], message: str
) -> None:
    with app_client(indexed_attributes="year:integer", **CHUNKING) as client:
        ingest(client, upload, write("handbook.md"), "h")
        before = [record.payload["meta"] for record in points(client, file_id="h")]
        response = client.patch(f"{DOCUMENTS}/h", params={"collection_name": "kb-a"}, json=body)
        assert response.status_code == 422, response.text
        assert response.json()["code"] == "INVALID_REQUEST"
        assert message in response.json()["error"]
        assert [record.payload["meta"] for record in points(client, file_id="h")] == before


def test_stats_sum_up_one_collection(client: TestClient, upload: Upload, write: Write, points: Points) -> None:
    one = write("one.md")
    ingest(client, upload, one, "one")
    two = write("two.txt", "Plain notes about the harbour hall and the canteen hours. " * 12)
    ingest(client, upload, two, "two")
    ingest(client, upload, write("elsewhere.md"), "elsewhere", "kb-b")

    response = client.get("/api/v1/collections/kb-a/stats")
    assert response.status_code == 200, response.text
    stats = response.json()
    stored = points(client, collection_name="kb-a")
    documents = listing(client)["documents"]
    assert stats == {
        "collection_name": "kb-a",
        "documents": 2,
        "chunks": len(stored),
        "text_bytes": sum(len(record.payload["content"].encode()) for record in stored),
        "languages": {"en": 2},
        "formats": {"md": 1, "txt": 1},
        "extractors": {"kreuzberg": 2},
        "last_ingest": max(doc["ingested_at"] for doc in documents),
        "outdated_documents": 0,
        "originals": {"originals": 2, "bytes": one.stat().st_size + two.stat().st_size},
    }
    assert documents[0]["file_id"] == "two"


def test_collections_lists_each_tenant_with_its_documents_and_chunks(
    client: TestClient, upload: Upload, write: Write, points: Points
) -> None:
    ingest(client, upload, write("one.md"), "one")
    ingest(client, upload, write("two.md"), "two")
    ingest(client, upload, write("elsewhere.md"), "elsewhere", "kb-b")
    ingest(client, upload, write("upload.md"), "up", "file-up")

    response = client.get("/api/v1/collections")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "collections": [
            {
                "name": "kb-a",
                "kind": "knowledge_base",
                "documents": 2,
                "chunks": len(points(client, collection_name="kb-a")),
            },
            {
                "name": "kb-b",
                "kind": "knowledge_base",
                "documents": 1,
                "chunks": len(points(client, collection_name="kb-b")),
            },
        ],
        "complete": True,
    }
    everything = client.get("/api/v1/collections", params={"include_all": "true"}).json()
    assert [(entry["name"], entry["kind"]) for entry in everything["collections"]] == [
        ("file-up", "file"),
        ("kb-a", "knowledge_base"),
        ("kb-b", "knowledge_base"),
    ]
    capped = client.get("/api/v1/collections", params={"include_all": "true", "limit": 2}).json()
    assert [entry["name"] for entry in capped["collections"]] == ["file-up", "kb-a"]
    assert capped["complete"] is False


def test_stats_of_an_empty_collection_are_zeros(client: TestClient) -> None:
    response = client.get("/api/v1/collections/kb-empty/stats")
    assert response.status_code == 200
    assert response.json() == {
        "collection_name": "kb-empty",
        "documents": 0,
        "chunks": 0,
        "text_bytes": 0,
        "languages": {},
        "formats": {},
        "extractors": {},
        "last_ingest": None,
        "outdated_documents": 0,
        "originals": {"originals": 0, "bytes": 0},
    }
    assert client.get("/api/v1/collections/kb%20empty/stats").status_code == 422


def test_the_new_routes_need_the_key_and_not_the_inspection_flag(client: TestClient) -> None:
    # ENABLE_INSPECTION_API is off in ``client``; these routes answer anyway.
    assert client.get(DOCUMENTS, params={"collection_name": "kb-a"}).status_code == 200
    for method, url in (
        ("GET", f"{DOCUMENTS}?collection_name=kb-a"),
        ("GET", f"{DOCUMENTS}/h/text?collection_name=kb-a"),
        ("PATCH", f"{DOCUMENTS}/h?collection_name=kb-a"),
        ("GET", "/api/v1/collections/kb-a/stats"),
    ):
        response = client.request(method, url, headers={"Authorization": "Bearer wrong"}, json={"tags": []})
        assert response.status_code == 401, (method, url)


def test_listing_more_documents_than_the_limit_is_422_unless_narrowed(
    app_client: AppFactory, upload: Upload, write: Write
) -> None:
    hooks = ServiceHooks(catalog_factory=lambda store: DocumentCatalog(store, max_documents=1))
    with app_client(hooks=hooks, **CHUNKING) as client:
        ingest(client, upload, write("one.md"), "one")
        ingest(client, upload, write("two.md"), "two")
        for response in (
            client.get(DOCUMENTS, params={"collection_name": "kb-a"}),
            client.get("/api/v1/collections/kb-a/stats"),
        ):
            assert response.status_code == 422
            assert response.json()["code"] == "TOO_MANY_DOCUMENTS"
            assert "more than 1 documents" in response.json()["error"]
        client.patch(f"{DOCUMENTS}/two", params={"collection_name": "kb-a"}, json={"tags": ["keep"]})
        assert [doc["file_id"] for doc in listing(client, tag="keep")["documents"]] == ["two"]


class BrokenCatalog(DocumentCatalog):
    async def update(self, file_id: str, collection_name: str, changes: DocumentChanges) -> bool:
        raise QdrantUnavailableError("qdrant set_payload failed: ConnectError")


def test_a_store_failure_during_patch_is_qdrant_write_failed(app_client: AppFactory) -> None:
    def broken(store: ChunkStore) -> DocumentCatalog:
        return BrokenCatalog(store)

    with app_client(hooks=ServiceHooks(catalog_factory=broken)) as client:
        response = client.patch(f"{DOCUMENTS}/h", params={"collection_name": "kb-a"}, json={"tags": ["x"]})
        assert response.status_code == 500
        assert response.json() == {
            "status": False,
            "error": "Updating the document's metadata failed.",
            "code": "QDRANT_WRITE_FAILED",
            "hint": METADATA_HINT,
            "request_id": response.headers["x-request-id"],
        }


def test_openapi_documents_the_not_found_answers(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "404" in paths["/api/v1/documents/{file_id}/text"]["get"]["responses"]
    assert "404" in paths["/api/v1/documents/{file_id}"]["patch"]["responses"]
    assert "DOCUMENT_NOT_FOUND" in paths["/api/v1/documents/{file_id}"]["patch"]["responses"]["404"]["description"]

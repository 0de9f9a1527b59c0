"""Re-ingesting what is already stored: the unchanged fast path, labels, and vectors reused across tenants."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from fastapi.testclient import TestClient
from haystack import Document

from ingestion_service.documents import SourceFile
from ingestion_service.runtime import ServiceHooks
from shared_contract import DENSE_VECTOR

if TYPE_CHECKING:
    from ...conftest import AppFactory, Points, Upload  # noqa: TID252

WIKI = "md/docling__wiki.md"


def metas_of(points: Points, client: TestClient, file_id: str, collection_name: str) -> list[dict[str, Any]]:
    stored = points(client, file_id=file_id, collection_name=collection_name)
    return sorted((record.payload["meta"] for record in stored), key=lambda meta: meta["split_id"])


def metric(client: TestClient, name: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"metric {name} not exported")


def test_every_chunk_carries_the_documents_identity(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    source = docs / WIKI
    body = upload(client, source, file_id="ident", tags="alpha, beta", category="wiki").json()
    metas = metas_of(points, client, "ident", "file-ident")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    assert body["content_hash"] == digest
    assert body["unchanged"] is False
    for meta in metas:
        assert meta["source_sha256"] == digest
        assert meta["source_bytes"] == source.stat().st_size
        assert meta["format"] == "md"
        assert meta["tags"] == ["alpha", "beta"]
        assert meta["category"] == "wiki"
        assert meta["chunk_count"] == len(metas) == body["chunks_count"]
        assert len(meta["ingest_fingerprint"]) == 32
    stored = points(client, file_id="ident", collection_name="file-ident")
    assert metas[0]["text_bytes"] == sum(len(record.payload["content"].encode()) for record in stored)


def test_same_bytes_again_answer_unchanged_without_writing(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    first = upload(client, docs / WIKI, file_id="same").json()
    before = {record.point_id for record in points(client, file_id="same")}
    unchanged_before = metric(client, "ingest_unchanged_total")
    again = upload(client, docs / WIKI, file_id="same", overwrite="true")
    assert again.status_code == 200, again.text
    body = again.json()
    assert body["unchanged"] is True
    assert body["chunks_count"] == first["chunks_count"]
    # The version readers see is still the first run's.
    assert body["extraction"]["ingest_version"] == first["extraction"]["ingest_version"]
    assert {record.point_id for record in points(client, file_id="same")} == before
    assert metric(client, "ingest_unchanged_total") == unchanged_before + 1


def test_force_re_embeds_the_same_bytes(client: TestClient, upload: Upload, docs: Path, points: Points) -> None:
    first = upload(client, docs / WIKI, file_id="forced").json()
    forced = upload(client, docs / WIKI, file_id="forced", force="true").json()
    assert forced["unchanged"] is False
    assert forced["extraction"]["ingest_version"] != first["extraction"]["ingest_version"]
    versions = {meta["ingest_version"] for meta in metas_of(points, client, "forced", "file-forced")}
    assert versions == {forced["extraction"]["ingest_version"]}


def test_changed_bytes_are_re_ingested_and_keep_the_labels_not_resent(
    client: TestClient, upload: Upload, docs: Path, points: Points, tmp_path: Path
) -> None:
    upload(client, docs / WIKI, file_id="edit", filename="wiki.md", tags="keep-me", category="kept").json()
    edited = tmp_path / "wiki.md"
    edited.write_bytes((docs / WIKI).read_bytes() + b"\n\nA paragraph added later about zebras.\n")
    body = upload(client, edited, file_id="edit", filename="wiki.md").json()
    assert body["unchanged"] is False
    metas = metas_of(points, client, "edit", "file-edit")
    assert {meta["source_sha256"] for meta in metas} == {hashlib.sha256(edited.read_bytes()).hexdigest()}
    # Open WebUI re-sends files without labels: the ones set before survive.
    assert {tuple(meta["tags"]) for meta in metas} == {("keep-me",)}
    assert {meta["category"] for meta in metas} == {"kept"}


def test_unchanged_bytes_with_new_name_and_labels_update_metadata_in_place(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    first = upload(client, docs / WIKI, file_id="relabel", filename="old.md", tags="a").json()
    before = {record.point_id: record.vectors for record in points(client, file_id="relabel")}
    body = upload(
        client, docs / WIKI, file_id="relabel", filename="new.md", tags='["b", "c"]', attributes='{"team": "x"}'
    ).json()
    assert body["unchanged"] is True
    assert body["extraction"]["ingest_version"] == first["extraction"]["ingest_version"]
    after = points(client, file_id="relabel")
    assert {record.point_id: record.vectors for record in after} == before
    for record in after:
        meta = record.payload["meta"]
        assert (meta["name"], meta["source"]) == ("new.md", "new.md")
        assert meta["tags"] == ["b", "c"]
        assert meta["attributes"] == {"team": "x"}


def test_identical_file_in_another_collection_reuses_its_vectors(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    first = upload(client, docs / WIKI, file_id="shared", collection_name="kb-one").json()
    reused_before = metric(client, "ingest_reused_vectors_total")
    second = upload(client, docs / WIKI, file_id="shared", collection_name="kb-two", tags="kb2").json()
    assert second["unchanged"] is False
    assert second["extraction"]["reused_vectors"] is True
    assert second["chunks_count"] == first["chunks_count"]
    assert metric(client, "ingest_reused_vectors_total") == reused_before + 1
    one = points(client, file_id="shared", collection_name="kb-one")
    two = points(client, file_id="shared", collection_name="kb-two")
    assert len(two) == len(one)
    by_split_one = {record.payload["meta"]["split_id"]: record for record in one}
    for record in two:
        meta = record.payload["meta"]
        twin = by_split_one[meta["split_id"]]
        assert record.point_id != twin.point_id
        assert record.payload["content"] == twin.payload["content"]
        assert record.vectors is not None
        assert twin.vectors is not None
        assert record.vectors[DENSE_VECTOR] == twin.vectors[DENSE_VECTOR]
        assert meta["collection_name"] == "kb-two"
        assert meta["ingest_version"] == second["extraction"]["ingest_version"]
        assert meta["ingest_state"] == "live"
        assert meta["tags"] == ["kb2"]
    # The source tenant is untouched.
    assert {record.payload["meta"]["ingest_version"] for record in one} == {first["extraction"]["ingest_version"]}
    assert {tuple(record.payload["meta"].get("tags") or ()) for record in one} == {()}


def test_a_setting_that_changes_the_chunks_makes_the_same_bytes_re_ingest(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points
) -> None:
    index = f"test_{uuid.uuid4().hex[:12]}"
    with app_client(qdrant_index=index) as client:
        first = upload(client, docs / WIKI, file_id="fp").json()
    with app_client(qdrant_index=index, chunk_size=200) as client:
        second = upload(client, docs / WIKI, file_id="fp").json()
        assert second["unchanged"] is False
        assert second["chunks_count"] > first["chunks_count"]
        third = upload(client, docs / WIKI, file_id="fp").json()
        assert third["unchanged"] is True


def test_declared_attributes_are_type_checked(app_client: AppFactory, upload: Upload, docs: Path) -> None:
    with app_client(indexed_attributes="year:integer") as client:
        bad = upload(client, docs / WIKI, file_id="attr", attributes=json.dumps({"year": "twenty"}))
        assert bad.status_code == 422, bad.text
        assert bad.json()["code"] == "INVALID_REQUEST"
        assert "year" in bad.json()["error"]
        good = upload(client, docs / WIKI, file_id="attr", attributes=json.dumps({"year": 2024, "note": "free"}))
        assert good.status_code == 200, good.text


def test_malformed_label_fields_are_422(client: TestClient, upload: Upload, docs: Path) -> None:
    for fields in ({"attributes": "[1, 2]"}, {"attributes": "{not json"}, {"tags": "[1]"}, {"force": "maybe"}):
        response = upload(client, docs / WIKI, file_id="bad", **fields)
        assert response.status_code == 422, (fields, response.text)
        assert response.json()["code"] == "INVALID_REQUEST"


def test_s3_object_metadata_supplies_labels_and_etag(
    app_client: AppFactory, s3_endpoint: str, docs: Path, points: Points
) -> None:
    bucket = f"b-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client(
        "s3", endpoint_url=s3_endpoint, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    )
    s3.create_bucket(Bucket=bucket)
    put = s3.put_object(
        Bucket=bucket,
        Key="kb/wiki.md",
        Body=(docs / WIKI).read_bytes(),
        Metadata={"tags": "from-s3, second", "category": "bucketed"},
    )
    request = {
        "file_id": "s3meta",
        "filename": "wiki.md",
        "collection_name": "kb-s3",
        "user_id": "u1",
        "s3_bucket": bucket,
        "s3_key": "kb/wiki.md",
    }
    with app_client(s3_endpoint_url=s3_endpoint) as client:
        body = client.put("/api/v1/ingest", json=request).json()
        assert body["status"] is True
        metas = metas_of(points, client, "s3meta", "kb-s3")
        assert {tuple(meta["tags"]) for meta in metas} == {("from-s3", "second")}
        assert {meta["category"] for meta in metas} == {"bucketed"}
        assert {(meta["s3_bucket"], meta["s3_key"], meta["s3_etag"]) for meta in metas} == {
            (bucket, "kb/wiki.md", put["ETag"])
        }
        # Fields in the request win over the object's metadata.
        again = client.put("/api/v1/ingest", json={**request, "tags": ["mine"]}).json()
        assert again["unchanged"] is True
        assert {tuple(meta["tags"]) for meta in metas_of(points, client, "s3meta", "kb-s3")} == {("mine",)}


class PatchingConverter:
    """Reads text files; when armed, PATCHes the document's tags first (as a user would mid-ingest)."""

    name = "kreuzberg"
    profiles: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.client: TestClient | None = None
        self.statuses: list[int] = []

    def convert(self, source: SourceFile, *, profile: str | None = None) -> list[Document]:
        if self.client is not None:
            response = self.client.patch(
                "/api/v1/documents/race", params={"collection_name": "file-race"}, json={"tags": ["patched"]}
            )
            self.statuses.append(response.status_code)
        return [Document(content=source.path.read_text(), meta={})]


def test_a_patch_during_a_re_ingest_is_kept_by_the_new_version(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points, tmp_path: Path
) -> None:
    converter = PatchingConverter()
    hooks = ServiceHooks(converter_factories={"kreuzberg": lambda _settings: converter})
    with app_client(hooks=hooks) as client:
        upload(client, docs / WIKI, file_id="race", filename="wiki.md", tags="first")
        edited = tmp_path / "wiki.md"
        edited.write_bytes((docs / WIKI).read_bytes() + b"\n\nOne more paragraph about herons.\n")
        # The run starts with tags ["first"]; while it extracts, before it writes a chunk, a PATCH changes them.
        converter.client = client
        body = upload(client, edited, file_id="race", filename="wiki.md").json()
        assert converter.statuses == [200]
        metas = metas_of(points, client, "race", "file-race")
        assert {meta["ingest_version"] for meta in metas} == {body["extraction"]["ingest_version"]}
        # Every chunk of the new version carries the tags set mid-run, none the ones it started with.
        assert {tuple(meta["tags"]) for meta in metas} == {("patched",)}

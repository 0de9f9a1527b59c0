"""PUT /api/v1/ingest through the HTTP API: both modes, every gate, the stored payload."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import numpy as np
import pytest
from fastapi.testclient import TestClient

from rag_runtime.http import hint_for
from shared_contract import DENSE_VECTOR, MULTILINGUAL_VECTOR, SPARSE_VECTOR

from ...conftest import bootstrap_with  # noqa: TID252

if TYPE_CHECKING:
    from ...conftest import AppFactory, MakeSettings, Points, Upload  # noqa: TID252

WIKI = "md/docling__wiki.md"


def test_multipart_ingest_stores_named_vectors_and_full_metadata(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    response = upload(client, docs / WIKI, file_id="abc", user_id="u1")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] is True
    assert body["collection_name"] == "file-abc"
    assert body["extraction"]["engine"] == "kreuzberg"
    stored = points(client, file_id="abc")
    assert len(stored) == body["chunks_count"] > 1
    metas = sorted((record.payload["meta"] for record in stored), key=lambda meta: meta["split_id"])
    assert [meta["split_id"] for meta in metas] == list(range(len(metas)))
    first = metas[0]
    assert first["file_id"] == "abc"
    assert first["collection_name"] == "file-abc"
    assert first["collection_type"] == "file"
    assert first["user_id"] == "u1"
    assert first["name"] == first["source"] == "docling__wiki.md"
    assert first["title"] == "IBM"
    assert first["languages"] == ["en"]
    assert first["extractor"] == "kreuzberg"
    assert first["ingest_version"] == body["extraction"]["ingest_version"]
    assert isinstance(first["ingest_seq"], int)
    assert len(first["content_hash"]) == 64
    assert first["indexed_at"].endswith("+00:00")
    assert any(meta["headers"] for meta in metas)
    assert "overwrite" not in first
    assert {meta["ingest_state"] for meta in metas} == {"live"}
    assert {meta["lexical_language"] for meta in metas} == {"en"}
    for record in stored:
        assert record.vectors is not None
        assert set(record.vectors) == {DENSE_VECTOR, SPARSE_VECTOR}
        dense = record.vectors[DENSE_VECTOR]
        assert isinstance(dense, list)
        assert len(dense) == 384
        assert record.payload["content"].strip()
        # Its language's stemmed BM25 field, and only that one, holds what was indexed: the context
        # lines (the document's title first), a blank line, and the chunk's text.
        context, _, text = record.payload["lexical_en"].partition("\n\n")
        assert context.split("\n")[0] == "IBM"
        assert text == record.payload["content"]
        assert not [key for key in record.payload if key.startswith("lexical_") and key != "lexical_en"]


NORWEGIAN = (
    "Familien kjøpte en ny elbil i fjor. Bilen er rød, og den står parkert i garasjen ved siden av "
    "syklene. De lader den hver natt, og om sommeren kjører de den til hytta ved fjorden."
)


def test_chunks_outside_the_dense_models_languages_also_get_the_multilingual_vector(
    client: TestClient, upload: Upload, tmp_path: Path, points: Points
) -> None:
    path = tmp_path / "elbil.txt"
    path.write_text(NORWEGIAN, encoding="utf-8")
    response = upload(client, path, file_id="no-1")
    assert response.status_code == 200, response.text
    stored = points(client, file_id="no-1")
    assert stored
    multilingual = client.app.state.runtime.embedder.multilingual  # type: ignore[attr-defined]
    for record in stored:
        assert record.payload["meta"]["lexical_language"] == "no"
        assert record.vectors is not None
        assert set(record.vectors) == {DENSE_VECTOR, SPARSE_VECTOR, MULTILINGUAL_VECTOR}
        # multilingual-e5-small's passage vector of the indexed text (the lexical field holds it).
        [expected] = multilingual.embed_documents([record.payload["lexical_no"]])
        vector = record.vectors[MULTILINGUAL_VECTOR]
        assert isinstance(vector, list)
        assert float(np.dot(vector, expected)) == pytest.approx(1.0, abs=1e-4)


def test_a_collection_built_without_the_multilingual_vector_is_written_without_it(
    app_client: AppFactory, make_test_settings: MakeSettings, upload: Upload, tmp_path: Path, points: Points
) -> None:
    # As a collection of contract 2.2 or one created with MULTILINGUAL_EMBEDDING_PROVIDER=none.
    index = f"test_{uuid.uuid4().hex[:12]}"
    bootstrap_with(make_test_settings(qdrant_index=index, multilingual_embedding_provider="none"))
    path = tmp_path / "elbil.txt"
    path.write_text(NORWEGIAN, encoding="utf-8")
    with app_client(qdrant_index=index) as client:
        response = upload(client, path, file_id="no-old")
        assert response.status_code == 200, response.text
        stored = points(client, file_id="no-old")
    assert stored
    for record in stored:
        assert record.vectors is not None
        assert set(record.vectors) == {DENSE_VECTOR, SPARSE_VECTOR}


def test_reingest_replaces_the_previous_version(client: TestClient, upload: Upload, docs: Path, points: Points) -> None:
    first = upload(client, docs / WIKI, file_id="re").json()
    second = upload(client, docs / WIKI, file_id="re", force="true").json()
    assert second["extraction"]["ingest_version"] != first["extraction"]["ingest_version"]
    stored = points(client, file_id="re")
    assert {record.payload["meta"]["ingest_version"] for record in stored} == {second["extraction"]["ingest_version"]}
    assert len(stored) == second["chunks_count"] == first["chunks_count"]


def _contents(records: list[Any]) -> list[str]:
    return [r.payload["content"] for r in sorted(records, key=lambda r: r.payload["meta"]["split_id"])]


def test_same_file_in_two_collections_is_versioned_per_collection(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    first = upload(client, docs / WIKI, file_id="kbfile", collection_name="kb-1").json()
    other = upload(client, docs / WIKI, file_id="kbfile", collection_name="kb-2").json()
    again = upload(client, docs / WIKI, file_id="kbfile", collection_name="kb-1", force="true").json()
    kb1 = points(client, file_id="kbfile", collection_name="kb-1")
    kb2 = points(client, file_id="kbfile", collection_name="kb-2")
    # Re-ingesting into kb-1 replaced only kb-1's version; kb-2 keeps the one it was given.
    assert {r.payload["meta"]["ingest_version"] for r in kb1} == {again["extraction"]["ingest_version"]}
    assert {r.payload["meta"]["ingest_version"] for r in kb2} == {other["extraction"]["ingest_version"]}
    assert first["extraction"]["ingest_version"] != again["extraction"]["ingest_version"]
    assert len(kb1) == again["chunks_count"]
    assert len(kb2) == other["chunks_count"]
    assert {r.payload["meta"]["collection_name"] for r in kb1} == {"kb-1"}
    assert {r.payload["meta"]["collection_name"] for r in kb2} == {"kb-2"}
    assert {r.payload["meta"]["ingest_state"] for r in kb1 + kb2} == {"live"}
    # The same file, so the same chunks, in each tenant.
    assert _contents(kb1) == _contents(kb2)
    assert "IBM" in _contents(kb1)[0]


def test_overwrite_false_keeps_an_existing_version(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    first = upload(client, docs / WIKI, file_id="keep").json()
    kept = upload(client, docs / "md/unstructured__simple-table.md", file_id="keep", overwrite="false").json()
    assert kept["extraction"]["kept_existing"] is True
    assert kept["chunks_count"] == first["chunks_count"]
    # The answer describes the version that stays, not the file that was turned away.
    assert kept["content_hash"] == first["content_hash"]
    assert kept["extraction"]["ingest_version"] == first["extraction"]["ingest_version"]
    assert kept["extraction"]["engine"] == first["extraction"]["engine"]
    assert {r.payload["meta"]["ingest_version"] for r in points(client, file_id="keep")} == {
        first["extraction"]["ingest_version"]
    }


@pytest.mark.parametrize(("value", "expected"), [("TRUE", 200), ("y", 200), ("0", 200), ("No", 200), ("maybe", 422)])
def test_form_booleans_are_strict(client: TestClient, upload: Upload, docs: Path, value: str, expected: int) -> None:
    response = upload(client, docs / "md/unstructured__simple-table.md", overwrite=value)
    assert response.status_code == expected
    if expected == 422:
        assert response.json() == {
            "status": False,
            "code": "INVALID_REQUEST",
            "hint": hint_for("INVALID_REQUEST"),
            "error": "Form field 'overwrite' must be a boolean (true/false/1/0/yes/no).",
            "request_id": response.headers["x-request-id"],
        }


def test_multipart_field_rules(client: TestClient, docs: Path) -> None:
    path = docs / "md/unstructured__simple-table.md"
    base = {"file_id": "x", "filename": "t.md", "collection_name": "file-x", "user_id": "u"}
    cases = [
        ({**base, "user_id": "   "}, "'user_id' is required"),
        ({k: v for k, v in base.items() if k != "file_id"}, "'file_id' is required"),
        ({**base, "surprise": "1"}, "unknown form field(s) 'surprise'"),
    ]
    for data, fragment in cases:
        response = client.put("/api/v1/ingest", data=data, files={"file": ("t.md", path.read_bytes())})
        assert response.status_code == 422, response.text
        assert response.json()["code"] == "INVALID_REQUEST"
        assert fragment in response.json()["error"]
    # Only text parts, no file part at all.
    response = client.put("/api/v1/ingest", files={name: (None, value) for name, value in base.items()})
    assert response.status_code == 422
    assert "'file' part is required" in response.json()["error"]
    # A second file field is refused, not silently ignored.
    response = client.put("/api/v1/ingest", data=base, files=[("file", ("t.md", b"# a")), ("file", ("u.md", b"# b"))])
    assert response.status_code == 422


def test_other_content_types_are_415(client: TestClient) -> None:
    response = client.put("/api/v1/ingest", content=b"hello", headers={"Content-Type": "text/x-secret-token"})
    assert response.status_code == 415
    assert response.json()["code"] == "INVALID_REQUEST"
    # The field and what it takes, never what was sent.
    assert response.json()["error"] == "Content-Type must be application/json or multipart/form-data."


def _json(**overrides: Any) -> dict[str, Any]:
    body = {
        "s3_bucket": "openwebui",
        "s3_key": "k",
        "file_id": "j1",
        "filename": "a.md",
        "collection_name": "file-j1",
        "user_id": "u1",
    }
    body.update(overrides)
    return body


@pytest.mark.parametrize(
    "body",
    [
        _json(metadata={"x": 1}),  # unknown field
        _json(file_id="  "),  # whitespace-only
        {k: v for k, v in _json().items() if k != "s3_key"},  # missing
        _json(overwrite="yes"),  # JSON booleans are real booleans
    ],
)
def test_json_validation_is_422(client: TestClient, body: dict[str, Any]) -> None:
    response = client.put("/api/v1/ingest", json=body)
    assert response.status_code == 422
    assert response.json()["code"] == "INVALID_REQUEST"
    assert response.json()["status"] is False


def test_malformed_json_is_422(client: TestClient) -> None:
    response = client.put("/api/v1/ingest", content=b"{nope", headers={"Content-Type": "application/json"})
    assert response.status_code == 422


@pytest.mark.parametrize(
    ("collection", "file_id", "user_id", "status"),
    [
        ("file-other", "f1", "u1", 403),
        ("user-memory-someone", "f1", "u1", 403),
        ("memory-u1", "f1", "u1", 403),  # long-term memory's tenant: written by the retrieval agent only
        ("user-memory-u1", "f1", "u1", 200),
        ("a-knowledge-base-id", "f1", "u1", 200),
    ],
)
def test_collection_binding(
    client: TestClient, upload: Upload, docs: Path, collection: str, file_id: str, user_id: str, status: int
) -> None:
    response = upload(
        client, docs / "md/unstructured__simple-table.md", file_id=file_id, user_id=user_id, collection_name=collection
    )
    assert response.status_code == status, response.text


# Names search refuses (shared_contract.names): ingestion must refuse them too, not store them unfindable.
BAD_COLLECTION_NAMES = [
    "tenant-ü",
    "../tenantB",
    "tenant*",
    '{"tenant": 1}',
    "tenant\x00B",
    "tenant\nB",
    "tenant B",
    "  tenantB  ",  # refused, never trimmed into another tenant's name
    "t" * 129,
    "t" * 256,
]


@pytest.mark.parametrize("collection", BAD_COLLECTION_NAMES)
def test_multipart_collection_name_outside_the_contract_rule_is_422(
    client: TestClient, upload: Upload, docs: Path, points: Points, collection: str
) -> None:
    response = upload(client, docs / "md/unstructured__simple-table.md", file_id="badname", collection_name=collection)
    assert response.status_code == 422, response.text
    assert response.json() == {
        "status": False,
        "code": "INVALID_REQUEST",
        "hint": hint_for("INVALID_REQUEST"),
        "error": "Invalid request: collection_name: Value error, "
        "must be 1-128 characters, each an ASCII letter, digit, '_' or '-'",
        "request_id": response.headers["x-request-id"],
    }
    assert points(client, file_id="badname") == []


@pytest.mark.parametrize("collection", BAD_COLLECTION_NAMES)
def test_json_collection_name_outside_the_contract_rule_is_422(client: TestClient, collection: str) -> None:
    response = client.put("/api/v1/ingest", json=_json(collection_name=collection))
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "INVALID_REQUEST"
    assert response.json()["error"].startswith("Invalid request: collection_name: ")


def test_longest_allowed_collection_name_is_stored_as_sent(
    client: TestClient, upload: Upload, docs: Path, points: Points
) -> None:
    collection = "k" * 128
    response = upload(client, docs / "md/unstructured__simple-table.md", file_id="longname", collection_name=collection)
    assert response.status_code == 200, response.text
    assert response.json()["collection_name"] == collection
    assert {r.payload["meta"]["collection_name"] for r in points(client, file_id="longname")} == {collection}


def test_multipart_upload_over_the_cap_is_413(
    app_client: AppFactory, upload: Upload, docs: Path, points: Points
) -> None:
    with app_client(max_upload_bytes=1000) as client:
        response = upload(client, docs / WIKI, file_id="big")
        assert response.status_code == 413
        assert response.json()["code"] == "DOCUMENT_TOO_LARGE"
        assert points(client, file_id="big") == []


# --- S3 / MinIO ---------------------------------------------------------------------------


@pytest.fixture
def bucket(s3_endpoint: str) -> str:
    name = f"b-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client(
        "s3", endpoint_url=s3_endpoint, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    )
    s3.create_bucket(Bucket=name)
    return name


def put_object(endpoint: str, bucket: str, key: str, path: Path) -> None:
    s3 = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    )
    s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())


def test_json_mode_reads_the_object_from_s3(
    app_client: AppFactory, s3_endpoint: str, bucket: str, docs: Path, points: Points
) -> None:
    put_object(s3_endpoint, bucket, "uploads/wiki.md", docs / WIKI)
    with app_client(s3_endpoint_url=s3_endpoint, s3_allowed_buckets=bucket) as client:
        response = client.put(
            "/api/v1/ingest",
            json=_json(
                s3_bucket=bucket,
                s3_key="uploads/wiki.md",
                filename="wiki.md",
                file_id="s3f",
                collection_name="file-s3f",
            ),
        )
        assert response.status_code == 200, response.text
        body = response.json()
        stored = points(client, file_id="s3f")
        assert len(stored) == body["chunks_count"] > 1
        metas = sorted((record.payload["meta"] for record in stored), key=lambda meta: meta["split_id"])
        assert [meta["split_id"] for meta in metas] == list(range(len(metas)))
        assert {(m["file_id"], m["collection_name"], m["user_id"], m["name"]) for m in metas} == {
            ("s3f", "file-s3f", "u1", "wiki.md")
        }
        assert {m["ingest_version"] for m in metas} == {body["extraction"]["ingest_version"]}
        assert {m["extractor"] for m in metas} == {body["extraction"]["engine"]}
        assert metas[0]["title"] == "IBM"
        # The object's text, as the multipart path would have stored it.
        text = " ".join(_contents(stored))
        assert "International Business Machines" in text


def test_bucket_outside_the_allow_list_is_403(app_client: AppFactory, s3_endpoint: str, bucket: str) -> None:
    with app_client(s3_endpoint_url=s3_endpoint, s3_allowed_buckets="openwebui") as client:
        response = client.put("/api/v1/ingest", json=_json(s3_bucket=bucket))
        assert response.status_code == 403
        assert response.json()["code"] == "INVALID_REQUEST"
        assert response.json()["error"] == "s3_bucket is not in S3_ALLOWED_BUCKETS."
        assert response.json()["hint"] == (
            "Use a bucket S3_ALLOWED_BUCKETS lists, or add this one to it on the ingestion service."
        )


def test_s3_object_over_the_cap_is_413_before_download(
    app_client: AppFactory, s3_endpoint: str, bucket: str, docs: Path
) -> None:
    put_object(s3_endpoint, bucket, "big.md", docs / WIKI)
    with app_client(s3_endpoint_url=s3_endpoint, max_upload_bytes=100) as client:
        response = client.put("/api/v1/ingest", json=_json(s3_bucket=bucket, s3_key="big.md"))
        assert response.status_code == 413
        assert response.json()["code"] == "DOCUMENT_TOO_LARGE"


def test_missing_object_is_s3_fetch_failed_without_details(
    app_client: AppFactory, s3_endpoint: str, bucket: str
) -> None:
    with app_client(s3_endpoint_url=s3_endpoint, s3_secret_access_key="super-secret-value") as client:
        response = client.put("/api/v1/ingest", json=_json(s3_bucket=bucket, s3_key="absent"))
        assert response.status_code == 502
        assert response.json() == {
            "status": False,
            "error": "S3 object fetch failed.",
            "code": "S3_FETCH_FAILED",
            "hint": hint_for("S3_FETCH_FAILED"),
            "request_id": response.headers["x-request-id"],
        }
    with app_client(s3_endpoint_url=s3_endpoint, s3_secret_access_key="super-secret-value", debug=True) as client:
        body = client.put("/api/v1/ingest", json=_json(s3_bucket=bucket, s3_key="absent")).json()
        assert "404" in body["error"] or "NoSuchKey" in body["error"] or "Not Found" in body["error"]
        assert "super-secret-value" not in body["error"]
        assert "Traceback" not in body["error"]

"""JSON the store cannot hold or the parser cannot read: NaN, infinities, integers past 64 bits and deep
nesting in a JSON ingest body, the multipart ``attributes`` field and a PATCH are each a 422 naming
what is wrong, and nothing is written (they were 500 QDRANT_WRITE_FAILED / PIPELINE_FAILED)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from fastapi.testclient import TestClient

from rag_runtime.store import PointRecord

if TYPE_CHECKING:
    from ...conftest import Points, Upload  # noqa: TID252
    from ..conftest import AssertKept, IngestBytes  # noqa: TID252

WIKI = "md/docling__wiki.md"
# 10 KB, far below the JSON body cap, far past the parser's recursion limit.
DEEP = '{"a":' * 5000 + "1" + "}" * 5000


@pytest.fixture
def previous(client: TestClient, upload: Upload, docs: Path, points: Points) -> list[PointRecord]:
    """A committed version of file 'v' (attributes {"a": 1}) that every refused request must leave intact."""
    assert upload(client, docs / WIKI, file_id="v", attributes='{"a": 1}').status_code == 200
    return points(client, file_id="v")


def _invalid(response: Any, fragment: str) -> None:
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "INVALID_REQUEST"
    assert fragment in response.json()["error"]


def _json_ingest(client: TestClient, raw: str) -> Any:
    return client.put("/api/v1/ingest", content=raw.encode(), headers={"Content-Type": "application/json"})


NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400", str(2**70), str(-(2**63) - 1), f"[1, {2**64}]"]


@pytest.mark.parametrize("number", NUMBERS)
def test_a_number_the_store_cannot_hold_in_the_attributes_field_is_422(
    client: TestClient,
    ingest_bytes: IngestBytes,
    assert_kept: AssertKept,
    docs: Path,
    previous: list[PointRecord],
    number: str,
) -> None:
    # New bytes, so the run would reach the store; the unchanged path would too (it sets the labels).
    data = (docs / WIKI).read_bytes() + b"\nOne more line.\n"
    response = ingest_bytes(client, data, "wiki.md", "v", attributes=f'{{"a": {number}}}')
    _invalid(response, "attributes")
    assert_kept(client, "v", previous)
    assert {record.payload["meta"]["attributes"]["a"] for record in previous} == {1}


@pytest.mark.parametrize(
    ("number", "fragment"),
    [
        ("NaN", "NaN and Infinity are not JSON numbers"),
        ("-Infinity", "NaN and Infinity are not JSON numbers"),
        ("1e400", "a number is beyond float range"),
    ],
)
def test_a_json_body_with_a_non_finite_number_is_422_before_anything_is_fetched(
    client: TestClient, number: str, fragment: str
) -> None:
    body = (
        '{"s3_bucket": "openwebui", "s3_key": "k", "file_id": "j1", "filename": "a.md", '
        f'"collection_name": "file-j1", "user_id": "u1", "attributes": {{"a": {number}}}}}'
    )
    _invalid(_json_ingest(client, body), f"body is not valid JSON ({fragment})")


def test_a_json_ingest_with_attributes_the_store_cannot_hold_is_422_before_anything_is_fetched(
    client: TestClient,
) -> None:
    # No S3 answers here: a download would be a 502 S3_FETCH_FAILED, not the request's own 422.
    body = (
        '{"s3_bucket": "openwebui", "s3_key": "k", "file_id": "j2", "filename": "a.md", '
        f'"collection_name": "file-j2", "user_id": "u1", "attributes": {{"a": {2**70}}}}}'
    )
    _invalid(_json_ingest(client, body), "attributes")


def test_deep_nesting_is_422_as_the_json_body_and_as_the_attributes_field(
    client: TestClient, ingest_bytes: IngestBytes, assert_kept: AssertKept, docs: Path, previous: list[PointRecord]
) -> None:
    _invalid(_json_ingest(client, '{"attributes": ' + DEEP + "}"), "body is not valid JSON (nested too deeply)")
    response = ingest_bytes(client, (docs / WIKI).read_bytes(), "wiki.md", "v", attributes=DEEP)
    _invalid(response, "form field 'attributes' is not valid JSON (nested too deeply)")
    response = ingest_bytes(client, (docs / WIKI).read_bytes(), "wiki.md", "v", tags="[" * 20_000)
    _invalid(response, "form field 'tags' is not valid JSON (nested too deeply)")
    assert_kept(client, "v", previous)


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1e400", str(2**70)])
def test_a_patch_with_a_number_the_store_cannot_hold_is_422_and_changes_nothing(
    client: TestClient, assert_kept: AssertKept, previous: list[PointRecord], points: Points, number: str
) -> None:
    response = client.patch(
        "/api/v1/documents/v",
        params={"collection_name": "file-v"},
        content=f'{{"attributes": {{"a": {number}}}}}'.encode(),
        headers={"Content-Type": "application/json"},
    )
    _invalid(response, "attribute 'a' must be a finite number, an integer within 64 bits")
    assert_kept(client, "v", previous)
    assert {record.payload["meta"]["attributes"]["a"] for record in points(client, file_id="v")} == {1}

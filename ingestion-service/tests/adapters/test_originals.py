"""The store of originals: a local directory and an S3 bucket behave alike (``adapters.originals``)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from ingestion_service.adapters.originals import LocalOriginals, OriginalKey, OriginalStore, S3Originals, Usage


def _file(tmp_path: Path, name: str, data: bytes) -> tuple[Path, str]:
    path = tmp_path / name
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OriginalStore]:
    if request.param == "local":
        yield LocalOriginals(tmp_path / "originals")
        return
    endpoint: str = request.getfixturevalue("s3_endpoint")
    client: Any = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    )
    bucket = f"originals-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    yield S3Originals(client, bucket, "originals/")
    client.close()


def test_an_original_is_kept_read_back_and_counted(store: OriginalStore, tmp_path: Path) -> None:
    path, sha256 = _file(tmp_path, "a.pdf", b"%PDF-1.7 first")
    key = OriginalKey("kb", "docs/a.pdf", sha256)
    assert not store.exists(key)
    assert store.put(key, path) == path.stat().st_size
    assert store.exists(key)
    copy = tmp_path / "copy"
    assert store.fetch(key, copy)
    assert copy.read_bytes() == path.read_bytes()
    assert store.versions("kb", "docs/a.pdf") == {sha256: path.stat().st_size}
    assert store.usage("kb") == Usage(originals=1, bytes=path.stat().st_size)
    assert store.usage("other") == Usage(originals=0, bytes=0)


def test_an_original_not_kept_reads_as_missing(store: OriginalStore, tmp_path: Path) -> None:
    assert not store.fetch(OriginalKey("kb", "nothing", "0" * 64), tmp_path / "copy")
    assert not (tmp_path / "copy").exists()
    assert store.versions("kb", "nothing") == {}
    assert store.remove("kb", "nothing", "0" * 64) == 0


def test_versions_of_one_file_are_removed_one_by_one(store: OriginalStore, tmp_path: Path) -> None:
    first, first_sha = _file(tmp_path, "v1", b"version one")
    second, second_sha = _file(tmp_path, "v2", b"version two, longer")
    store.put(OriginalKey("kb", "f", first_sha), first)
    store.put(OriginalKey("kb", "f", second_sha), second)
    assert set(store.versions("kb", "f")) == {first_sha, second_sha}
    assert store.remove("kb", "f", first_sha) == first.stat().st_size
    assert store.versions("kb", "f") == {second_sha: second.stat().st_size}


def test_removing_a_file_everywhere_leaves_other_files_and_tenants_alone(store: OriginalStore, tmp_path: Path) -> None:
    doomed, doomed_sha = _file(tmp_path, "doomed", b"the file to delete")
    kept, kept_sha = _file(tmp_path, "kept", b"another file")
    for tenant in ("kb-a", "kb-b"):
        store.put(OriginalKey(tenant, "doomed", doomed_sha), doomed)
    store.put(OriginalKey("kb-a", "kept", kept_sha), kept)
    assert store.remove_everywhere("doomed") == 2 * doomed.stat().st_size
    assert store.versions("kb-a", "doomed") == store.versions("kb-b", "doomed") == {}
    assert store.versions("kb-a", "kept") == {kept_sha: kept.stat().st_size}
    assert store.usage() == Usage(originals=1, bytes=kept.stat().st_size)


def test_names_of_any_shape_are_kept_apart(store: OriginalStore, tmp_path: Path) -> None:
    path, sha256 = _file(tmp_path, "x", b"bytes")
    names = ["../../etc/passwd", "a/b", "a", "Ü ñ 文件.pdf"]
    for name in names:
        store.put(OriginalKey("kb", name, sha256), path)
    for name in names:
        assert store.versions("kb", name) == {sha256: 5}
    store.remove("kb", "a", sha256)
    assert store.versions("kb", "a/b") == {sha256: 5}

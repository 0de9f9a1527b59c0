"""Reading local-mode files directly: each point once, its latest write, the old files untouched."""

from __future__ import annotations

import json
import pickle
import sqlite3
from pathlib import Path

import pytest
from qdrant_client import models

from rag_cli.legacy_store import LegacyStoreReadError, read_collection


def _store(root: Path, rows: list[models.PointStruct]) -> None:
    (root / "collection" / "kb").mkdir(parents=True)
    (root / "meta.json").write_text(json.dumps({"collections": {"kb": {"metadata": {"k": "v"}}}, "aliases": {}}))
    with sqlite3.connect(root / "collection" / "kb" / "storage.sqlite") as connection:
        connection.execute("CREATE TABLE points (id TEXT PRIMARY KEY, point BLOB)")
        for index, point in enumerate(rows):
            # Distinct keys for one id: how older clients left a point written twice.
            connection.execute("INSERT INTO points VALUES (?, ?)", (f"key-{index}", pickle.dumps(point)))


def test_a_point_written_twice_is_read_once_as_its_latest_write(tmp_path: Path) -> None:
    point_id = "00000000-0000-0000-0000-000000000001"
    _store(
        tmp_path,
        [
            models.PointStruct(id=point_id, vector={"d": [0.0]}, payload={"content": "old"}),
            models.PointStruct(id="00000000-0000-0000-0000-000000000002", vector={"d": [1.0]}, payload={}),
            models.PointStruct(id=point_id, vector={"d": [0.5]}, payload={"content": "new"}),
        ],
    )
    before = (tmp_path / "collection" / "kb" / "storage.sqlite").read_bytes()
    collection = read_collection(tmp_path, "kb")
    assert collection.metadata == {"k": "v"}
    pages = list(collection.points(page=1))
    assert [len(page) for page in pages] == [1, 1]
    by_id = {str(page[0].id): page[0] for page in pages}
    assert by_id[point_id].payload == {"content": "new"}
    assert (tmp_path / "collection" / "kb" / "storage.sqlite").read_bytes() == before


def test_a_missing_collection_is_a_typed_error(tmp_path: Path) -> None:
    _store(tmp_path, [])
    with pytest.raises(LegacyStoreReadError, match="no collection 'other'"):
        read_collection(tmp_path, "other")

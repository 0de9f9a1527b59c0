"""``rag migrate`` on a contract 2.x embedded store: a 3.x collection in its place, nothing committed lost."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import models

from rag_cli import upgrade as upgrade_module
from rag_cli.__main__ import main
from rag_cli.upgrade import CONTRACT_2_FOLDER, STAGING_FOLDER
from rag_runtime.embedding import SparseVectorData
from rag_runtime.store import (
    PointRecord,
    chunk_point,
    close_store,
    collection_spec,
    committed_filter,
    open_store,
    tenant_filter,
)
from rag_runtime.store.edge import MANIFEST_FILE, SHARD_DIR, collection_dir
from shared_contract import ContractSettings, load_settings
from shared_contract.manifest import MANIFEST_METADATA_KEY

DIM = 384


def _settings(root: Path) -> ContractSettings:
    return load_settings(ContractSettings, qdrant_uri=None, qdrant_path=root)


def _unit(index: int) -> list[float]:
    return [1.0 if position == index else 0.0 for position in range(DIM)]


def _meta(tenant: str, file_id: str, **extra: Any) -> dict[str, Any]:
    return {"file_id": file_id, "collection_name": tenant, "languages": ["en"], "ingest_seq": 5, **extra}


def _contract_2_store(root: Path, settings: ContractSettings) -> None:
    """A store as 2.x services left it: manifest 2.4.1, committed points without ``meta.live_in``,
    a run still pending, a memory fact (no state)."""
    spec = collection_spec(settings)
    manifest = {**spec.metadata[MANIFEST_METADATA_KEY], "contract_version": "2.4.1"}
    spec = dataclasses.replace(spec, metadata={**spec.metadata, MANIFEST_METADATA_KEY: manifest})
    rows = [
        ("kb-a/0", "Hounds ran over the bridges", _meta("kb-a", "f0", ingest_state="live"), 7),
        ("kb-a/1", "Cats slept on warm roofs", _meta("kb-a", "f1", ingest_state="live"), 8),
        ("kb-b/0", "Owls hunt at night", _meta("kb-b", "f2", ingest_state="live"), 9),
        ("kb-a/2", "A run still writing", _meta("kb-a", "f3", ingest_state="pending"), None),
        ("memory-ann/0", "Ann prefers tea", _meta("memory-ann", "fact-1"), None),
    ]
    points = [
        chunk_point(
            chunk,
            text,
            meta,
            dense=_unit(index),
            sparse=None if term is None else SparseVectorData(indices=[term], values=[1.0]),
        )
        for index, (chunk, text, meta, term) in enumerate(rows)
    ]

    async def write() -> None:
        store = open_store(settings)
        try:
            await store.create_collection(spec)
            await store.ensure_indexes(spec)
            await store.upsert(points)
        finally:
            await close_store(store)

    asyncio.run(write())


def _read(root: Path) -> tuple[dict[str, PointRecord], dict[str, int]]:
    """Every point of the store by chunk id, and what each filter counts."""

    async def read() -> tuple[dict[str, PointRecord], dict[str, int]]:
        store = open_store(_settings(root))
        try:
            records, _ = await store.scroll(None, limit=100, with_vectors=True)
            counts = {
                "live_in kb-a": await store.count(committed_filter(["kb-a"], live_key=True)),
                "tenant kb-a": await store.count(tenant_filter(["kb-a"])),
                "live_in all": await store.count(committed_filter(["kb-a", "kb-b", "memory-ann"], live_key=True)),
            }
        finally:
            await close_store(store)
        return {str(record.payload["id"]): record for record in records}, counts

    return asyncio.run(read())


def _manifest(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def test_a_contract_2_store_becomes_a_3x_collection_with_every_committed_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "qdrant"
    settings = _settings(root)
    _contract_2_store(root, settings)
    before, _ = _read(root)

    monkeypatch.setenv("QDRANT_PATH", str(root))
    assert main(["migrate"]) == 0

    place = collection_dir(root, settings.qdrant_index)
    assert _manifest(place / MANIFEST_FILE)["contract_version"] == "3.3.0"
    old = root / CONTRACT_2_FOLDER / settings.qdrant_index
    assert _manifest(old / MANIFEST_FILE)["contract_version"] == "2.4.1"  # the old store is kept
    assert (old / SHARD_DIR).is_dir()
    assert not (root / STAGING_FOLDER).exists()

    after, counts = _read(root)
    # The pending run is left out (start-up recovery would delete it); every committed point is copied.
    assert sorted(after) == ["kb-a/0", "kb-a/1", "kb-b/0", "memory-ann/0"]
    assert counts == {"live_in kb-a": 2, "tenant kb-a": 2, "live_in all": 4}
    for chunk, record in after.items():
        meta = record.payload["meta"]
        assert meta.pop("live_in") == meta["collection_name"]
        assert record.payload == before[chunk].payload  # nothing else changes
        assert record.vectors == before[chunk].vectors
        assert record.point_id == before[chunk].point_id


def test_a_3x_store_and_other_models_are_refused_and_left_as_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "qdrant"
    _contract_2_store(root, _settings(root))
    monkeypatch.setenv("QDRANT_PATH", str(root))
    monkeypatch.setenv("EMBEDDING_MODEL", "BAAI/bge-small-en-v1.5")
    assert main(["migrate"]) == 1
    assert "EMBEDDING_MODEL" in capsys.readouterr().err
    assert not (root / CONTRACT_2_FOLDER).exists()
    assert not (root / STAGING_FOLDER).exists()

    monkeypatch.delenv("EMBEDDING_MODEL")
    assert main(["migrate"]) == 0
    capsys.readouterr()
    assert main(["migrate"]) == 1  # already a contract 3 collection
    assert "only 2.x ones are upgraded" in capsys.readouterr().err


def test_a_crash_during_the_swap_is_finished_by_the_next_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "qdrant"
    settings = _settings(root)
    _contract_2_store(root, settings)
    monkeypatch.setenv("QDRANT_PATH", str(root))
    moves: list[str] = []
    real_move = shutil.move

    def crash_on_second_move(source: str, destination: str) -> Any:
        moves.append(source)
        if len(moves) == 2:
            raise KeyboardInterrupt  # killed after the old shard went aside, before the new one came in
        return real_move(source, destination)

    monkeypatch.setattr(shutil, "move", crash_on_second_move)
    with pytest.raises(KeyboardInterrupt):
        main(["migrate"])
    monkeypatch.setattr(shutil, "move", real_move)
    # The store refuses to open rather than serve an empty collection.
    place = collection_dir(root, settings.qdrant_index)
    assert not (place / SHARD_DIR).exists()
    assert _manifest(place / MANIFEST_FILE)["contract_version"] == "2.4.1"

    assert main(["migrate"]) == 0
    after, counts = _read(root)
    assert len(after) == 4
    assert counts["live_in all"] == 4
    assert _manifest(place / MANIFEST_FILE)["contract_version"] == "3.3.0"


def test_search_after_the_upgrade_filters_on_the_live_key(tmp_path: Path) -> None:
    root = tmp_path / "qdrant"
    settings = _settings(root)
    _contract_2_store(root, settings)
    upgrade_module.upgrade(root, settings)

    async def nearest() -> list[str]:
        store = open_store(settings)
        try:
            hits = await store.query(
                models.QueryRequest(
                    query=_unit(0), using="text-dense", filter=committed_filter(["kb-a"], live_key=True), limit=5
                )
            )
        finally:
            await close_store(store)
        return [str(hit.payload["id"]) for hit in hits]

    assert asyncio.run(nearest())[0] == "kb-a/0"
    assert sorted(asyncio.run(nearest())) == ["kb-a/0", "kb-a/1"]

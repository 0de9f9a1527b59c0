"""Opening the configured store: which adapter, one embedded instance per directory and process,
and the refusal of a directory in qdrant-client's old local-mode format."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from qdrant_client import QdrantClient, models

from rag_runtime.store import (
    EdgeStore,
    ServerStore,
    close_store,
    collection_spec,
    is_legacy_store,
    open_store,
)
from shared_contract import ContractSettings, LegacyStoreError, load_settings

pytestmark = pytest.mark.anyio


def directory_settings(path: Path | str, index: str = "factory_tests") -> ContractSettings:
    return load_settings(ContractSettings, qdrant_path=path, qdrant_index=index)


async def test_a_server_uri_opens_the_server_adapter_without_touching_the_network() -> None:
    settings = load_settings(ContractSettings, qdrant_uri="http://127.0.0.1:9", qdrant_index="docs")
    store = open_store(settings)
    try:
        assert isinstance(store, ServerStore)
        assert store.kind == "server"
        assert store.collection == "docs"
    finally:
        await close_store(store)


async def test_memory_opens_a_private_embedded_store_per_call() -> None:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:")
    first, second = open_store(settings), open_store(settings)
    try:
        assert isinstance(first, EdgeStore)
        assert first.kind == "embedded"
        assert first is not second
    finally:
        await close_store(first)
        await close_store(second)


async def test_a_directory_is_shared_within_the_process_and_closed_by_its_last_user(tmp_path: Path) -> None:
    settings = directory_settings(tmp_path / "store")
    first = open_store(settings)
    second = open_store(directory_settings("store"))  # the same directory, relative to the cwd
    assert isinstance(first, EdgeStore)
    assert second is first

    spec = dataclasses.replace(collection_spec(settings), payload_indexes=[])
    await first.create_collection(spec)
    await close_store(first)
    # One user is left: the instance is still the registered one and still serves.
    third = open_store(settings)
    assert third is first
    assert await second.count(None) == 0
    await close_store(third)
    await close_store(second)

    # The last close released the directory: the next open is a new instance that can load it.
    reopened = open_store(settings)
    try:
        assert reopened is not first
        assert await reopened.count(None) == 0
        assert (await reopened.read_manifest()).dense_dim == settings.dense_dim
    finally:
        await close_store(reopened)


async def test_each_collection_of_a_directory_is_its_own_store(tmp_path: Path) -> None:
    one = open_store(directory_settings(tmp_path, index="one"))
    two = open_store(directory_settings(tmp_path, index="two"))
    try:
        assert one is not two
        assert one.collection == "one"
        assert two.collection == "two"
    finally:
        await close_store(one)
        await close_store(two)


def _write_local_mode_store(path: Path) -> None:
    """What qdrant-client's local mode (the embedded store before qdrant-edge) leaves on disk."""
    client = QdrantClient(path=str(path))
    try:
        client.create_collection(
            "ingestion_files", vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE)
        )
    finally:
        client.close()


def test_a_local_mode_directory_is_refused_with_the_way_out(tmp_path: Path) -> None:
    legacy = tmp_path / "old-store"
    _write_local_mode_store(legacy)
    assert is_legacy_store(legacy) is True

    with pytest.raises(LegacyStoreError) as caught:
        open_store(directory_settings(legacy))
    message = str(caught.value)
    assert "rag migrate" in message
    assert str(legacy.resolve()) in message
    assert caught.value.path == str(legacy.resolve())
    assert (legacy / "meta.json").is_file()  # the old files are left alone


async def test_a_new_format_directory_is_not_legacy(tmp_path: Path) -> None:
    settings = directory_settings(tmp_path)
    store = open_store(settings)
    try:
        await store.create_collection(dataclasses.replace(collection_spec(settings), payload_indexes=[]))
    finally:
        await close_store(store)
    assert is_legacy_store(tmp_path) is False
    assert is_legacy_store(tmp_path / "missing") is False
    (tmp_path / "meta.json").write_text("{}", encoding="utf-8")  # meta.json alone is not local mode
    assert is_legacy_store(tmp_path) is False

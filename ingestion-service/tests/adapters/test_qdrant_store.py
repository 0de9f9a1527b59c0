"""ChunkIndex: the embedded fast path selects exactly what the Qdrant filters select."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from qdrant_client import QdrantClient, models

from ingestion_service.adapters.qdrant_store import ChunkIndex
from shared_contract import (
    DENSE_VECTOR,
    ContractSettings,
    bootstrap_collection,
    close_qdrant,
    embedded_backend,
    load_settings,
    open_qdrant,
)


def _points() -> list[models.PointStruct]:
    points: list[models.PointStruct] = []
    for number in range(60):
        meta: dict[str, Any] = {
            "file_id": f"file-{number % 4}",
            "collection_name": f"kb-{number % 3}",
            "ingest_version": f"v{number % 5}",
        }
        if number % 7:  # some points without a seq, as older tooling wrote them
            meta["ingest_seq"] = 1000 + (number % 5) * 10
        points.append(
            models.PointStruct(
                id=number + 1, vector={DENSE_VECTOR: [1.0, 0.5, float(number)]}, payload={"content": "x", "meta": meta}
            )
        )
    return points


@pytest.fixture
def stores(tmp_path: Any) -> Iterator[tuple[ChunkIndex, ChunkIndex, Callable[[], tuple[set[Any], set[Any]]]]]:
    settings = load_settings(
        ContractSettings,
        qdrant_path=tmp_path / "fast",
        embedding_dim=3,
        embedding_model="acme/x",
        embedding_provider="tei",
        embedding_api_base_url="http://tei",
        enable_sparse_embeddings=False,
    )
    fast_client = open_qdrant(settings)
    bootstrap_collection(fast_client, settings)
    filtered_client = QdrantClient(location=":memory:")  # not from open_qdrant: Qdrant evaluates the filters
    filtered_client.create_collection(
        settings.qdrant_index,
        vectors_config={DENSE_VECTOR: models.VectorParams(size=3, distance=models.Distance.COSINE)},
    )
    for client in (fast_client, filtered_client):
        client.upsert(settings.qdrant_index, points=_points())

    def remaining() -> tuple[set[Any], set[Any]]:
        def ids(client: QdrantClient) -> set[Any]:
            records, _ = client.scroll(settings.qdrant_index, limit=1000)
            return {record.id for record in records}

        return ids(fast_client), ids(filtered_client)

    with embedded_backend(fast_client) as embedded:
        assert embedded is not None
    yield ChunkIndex(fast_client, settings.qdrant_index), ChunkIndex(filtered_client, settings.qdrant_index), remaining
    close_qdrant(fast_client)
    filtered_client.close()


def test_counts_agree_with_the_filters(stores: tuple[ChunkIndex, ChunkIndex, Any]) -> None:
    fast, filtered, _ = stores
    for file_id in ("file-0", "file-3", "file-9"):
        assert fast.count(file_id) == filtered.count(file_id)
        for kb in ("kb-0", "kb-2"):
            assert fast.count(file_id, kb) == filtered.count(file_id, kb)
            for seq in (999, 1010, 1040):
                assert fast.count_newer(file_id, kb, seq) == filtered.count_newer(file_id, kb, seq)
            assert fast.count_version(file_id, kb, "v1") == filtered.count_version(file_id, kb, "v1")
    assert fast.count("file-1") > 0


def test_deletes_agree_with_the_filters(stores: tuple[ChunkIndex, ChunkIndex, Any]) -> None:
    fast, filtered, remaining = stores
    fast.delete_older("file-1", "kb-1", 1020)
    filtered.delete_older("file-1", "kb-1", 1020)
    fast_ids, filtered_ids = remaining()
    assert fast_ids == filtered_ids
    assert len(fast_ids) < 60

    fast.delete_version("file-2", "kb-0", "v2")
    filtered.delete_version("file-2", "kb-0", "v2")
    assert remaining()[0] == remaining()[1]

    assert fast.delete_file("file-0", "kb-0") == filtered.delete_file("file-0", "kb-0") > 0
    assert fast.delete_file("file-3") == filtered.delete_file("file-3") > 0
    assert fast.delete_file("file-3") == filtered.delete_file("file-3") == 0
    assert remaining()[0] == remaining()[1]

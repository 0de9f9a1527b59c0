"""``rag migrate``: an old local-mode store becomes an embedded-engine store, nothing lost."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import QdrantClient, models

from rag_cli.__main__ import main
from rag_cli.dev import DevOptions, serve
from rag_cli.migrate import LEGACY_FOLDER
from rag_runtime.store import close_store, committed_filter, open_store, tenant_filter
from shared_contract import ContractSettings, LegacyStoreError, load_settings, manifest_for
from shared_contract.manifest import MANIFEST_METADATA_KEY

DIM = 384


def _legacy_store(root: Path, settings: ContractSettings, *, manifest: dict[str, Any] | None) -> None:
    """A directory exactly as the 1.x embedded default (qdrant-client local mode) left it."""
    client = QdrantClient(path=str(root))
    client.create_collection(
        settings.qdrant_index,
        vectors_config={"text-dense": models.VectorParams(size=DIM, distance=models.Distance.COSINE)},
        sparse_vectors_config={"text-sparse": models.SparseVectorParams(modifier=models.Modifier.IDF)},
        metadata={MANIFEST_METADATA_KEY: manifest} if manifest is not None else None,
    )
    points = [
        models.PointStruct(
            id=f"00000000-0000-0000-0000-00000000000{i}",
            vector={
                "text-dense": [1.0 if j == i else 0.0 for j in range(DIM)],
                "text-sparse": models.SparseVector(indices=[i], values=[1.0]),
            },
            payload={
                "id": f"chunk-{i}",
                "content": text,
                "meta": {"file_id": f"f{i}", "collection_name": "kb", "languages": languages, "ingest_seq": 5},
            },
        )
        for i, (text, languages) in enumerate(
            [("Hundene løp over broene i byen", ["nb"]), ("The cats slept on warm roofs", ["en"])]
        )
    ]
    client.upsert(settings.qdrant_index, points=points)
    client.close()


def _settings(root: Path) -> ContractSettings:
    return load_settings(ContractSettings, qdrant_uri=None, qdrant_path=root)


def test_migrate_copies_every_point_into_the_new_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "qdrant"
    settings = _settings(root)
    _legacy_store(root, settings, manifest=manifest_for(settings).model_dump(mode="json"))
    with pytest.raises(LegacyStoreError, match="rag migrate"):
        open_store(settings)

    monkeypatch.setenv("QDRANT_PATH", str(root))
    assert main(["migrate"]) == 0

    assert (root / LEGACY_FOLDER / "meta.json").is_file()  # the old files are kept
    assert (root / LEGACY_FOLDER / "collection").is_dir()

    async def read() -> tuple[int, list[Any], list[Any]]:
        store = open_store(settings)
        try:
            visible = await store.count(tenant_filter(["kb"]))
            # The new store is a contract 3.x one: search selects the same points by meta.live_in.
            assert await store.count(committed_filter(["kb"], live_key=True)) == visible
            records, _ = await store.scroll(None, limit=10, with_vectors=True)
            stemmed = await store.query(
                models.QueryRequest(
                    query=models.TextQuery(text="hund bro"), using="lexical_no", filter=tenant_filter(["kb"]), limit=5
                )
            )
            return visible, records, stemmed
        finally:
            await close_store(store)

    visible, records, stemmed = asyncio.run(read())
    assert visible == 2
    by_file = {record.payload["meta"]["file_id"]: record for record in records}
    assert by_file["f0"].payload["lexical_no"] == "Hundene løp over broene i byen"
    assert by_file["f0"].payload["meta"]["lexical_language"] == "no"
    assert by_file["f1"].payload["lexical_en"] == "The cats slept on warm roofs"
    assert by_file["f1"].payload["meta"]["ingest_state"] == "live"
    assert by_file["f1"].payload["meta"]["live_in"] == "kb"
    assert by_file["f0"].payload["id"] == "chunk-0"
    assert by_file["f0"].vectors is not None
    assert by_file["f0"].vectors["text-dense"][0] == 1.0  # vectors copied unchanged
    assert [hit.payload["meta"]["file_id"] for hit in stemmed] == ["f0"]


def test_migrate_refuses_vectors_from_other_models_and_keeps_the_old_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "qdrant"
    settings = _settings(root)
    other = manifest_for(settings).model_dump(mode="json") | {"dense_model": "intfloat/multilingual-e5-small"}
    _legacy_store(root, settings, manifest=other)
    monkeypatch.setenv("QDRANT_PATH", str(root))
    assert main(["migrate"]) == 1
    assert "EMBEDDING_MODEL" in capsys.readouterr().err
    assert (root / "meta.json").is_file()  # untouched: still the old store
    assert not (root / LEGACY_FOLDER).exists()


def test_migrate_of_a_directory_without_an_old_store_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("QDRANT_PATH", str(tmp_path))
    assert main(["migrate"]) == 1
    assert "no qdrant-client local-mode store" in capsys.readouterr().err


def test_rag_dev_refuses_an_old_store_and_names_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "qdrant"
    settings = _settings(root)
    _legacy_store(root, settings, manifest=manifest_for(settings).model_dump(mode="json"))
    options = DevOptions(
        host="127.0.0.1", ingestion_port=1, retrieval_port=2, qdrant_path=root, ready_timeout=1, log_level="warning"
    )
    assert asyncio.run(serve(options)) == 1
    assert f"rag migrate --from {root}" in capsys.readouterr().err
    assert (root / "meta.json").is_file()  # nothing opened or changed


def test_optimize_builds_the_engine_indexes_and_keeps_every_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "qdrant"
    settings = _settings(root)
    _legacy_store(root, settings, manifest=manifest_for(settings).model_dump(mode="json"))
    monkeypatch.setenv("QDRANT_PATH", str(root))
    assert main(["migrate"]) == 0
    assert main(["optimize"]) == 0
    assert "rag optimize:" in capsys.readouterr().out

    async def count() -> int:
        store = open_store(settings)
        try:
            return await store.count(tenant_filter(["kb"]))
        finally:
            await close_store(store)

    assert asyncio.run(count()) == 2


def test_optimize_without_a_store_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QDRANT_PATH", str(tmp_path))
    assert main(["optimize"]) == 1

"""``rag migrate``: copy a store written by qdrant-client's local mode into the embedded engine.

Before contract 2.0 the embedded default was qdrant-client's local mode (``meta.json`` and
``collection/<name>/storage.sqlite`` under QDRANT_PATH). The services now refuse to open such a
directory (``LegacyStoreError``) rather than start half-way on it. This command reads every point
from those files (``rag_cli.legacy_store``; local mode itself is never started), rewrites the payload to the 2.0 layout (the
chunk's text in its language's BM25 field, ``meta.lexical_language``, published state) and writes
it with the vectors unchanged into a qdrant-edge shard in the same directory. The old files are
kept, moved into ``legacy-local-mode/``.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qdrant_client import models

from rag_cli.errors import MigrationError
from rag_cli.legacy_store import LegacyCollection, LegacyStoreReadError, read_collection
from rag_runtime.embedding import SparseVectorData
from rag_runtime.store import (
    ChunkPoint,
    bootstrap_collection,
    chunk_payload,
    close_store,
    is_legacy_store,
    open_store,
)
from shared_contract import (
    DENSE_VECTOR,
    LIVE_STATE,
    PAYLOAD_CONTENT,
    PAYLOAD_META,
    SPARSE_VECTOR,
    CollectionManifest,
    ContractMismatchError,
    ContractSettings,
    MetaKey,
)
from shared_contract.manifest import MANIFEST_METADATA_KEY

LEGACY_FOLDER = "legacy-local-mode"
_PAGE = 256


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What was copied."""

    collection: str
    points: int
    legacy_folder: Path


def _check_models(stored: dict[str, Any] | None, settings: ContractSettings) -> None:
    """The vectors are copied as they are, so they must come from the models the settings name."""
    if stored is None:
        raise MigrationError(
            f"collection {settings.qdrant_index!r} has no contract manifest; it was not written by these services"
        )
    old = CollectionManifest.model_validate(stored)
    checks = [
        ("EMBEDDING_MODEL", old.dense_model, settings.embedding_model),
        ("EMBEDDING_DIM", old.dense_dim, settings.dense_dim),
        ("EMBEDDING_PREFIX_DOC", old.prefix_doc, settings.embedding_prefix_doc),
        ("EMBEDDING_PREFIX_QUERY", old.prefix_query, settings.embedding_prefix_query),
        (
            "SPARSE_EMBEDDING_MODEL",
            old.sparse_model,
            settings.sparse_embedding_model if settings.enable_sparse_embeddings else None,
        ),
    ]
    for field, old_value, new_value in checks:
        if old_value != new_value:
            raise ContractMismatchError(settings.qdrant_index, field, old_value, new_value)


def _to_point(record: models.PointStruct) -> ChunkPoint:
    payload = dict(record.payload or {})
    vectors = record.vector if isinstance(record.vector, dict) else {}
    dense = vectors.get(DENSE_VECTOR)
    if not isinstance(dense, list) or not all(isinstance(value, float | int) for value in dense):
        raise MigrationError(f"point {record.id} has no {DENSE_VECTOR!r} vector")
    sparse_raw = vectors.get(SPARSE_VECTOR)
    sparse = None
    if isinstance(sparse_raw, models.SparseVector):
        sparse = SparseVectorData(indices=list(sparse_raw.indices), values=list(sparse_raw.values))
    meta = dict(payload.get(PAYLOAD_META) or {})
    meta[MetaKey.INGEST_STATE] = LIVE_STATE
    tenant = meta.get(MetaKey.COLLECTION_NAME)
    if isinstance(tenant, str):
        meta[MetaKey.LIVE_IN] = tenant
    content = str(payload.get(PAYLOAD_CONTENT) or "")
    chunk_id = str(payload.get("id") or record.id)
    new_payload = {**payload, **chunk_payload(chunk_id, content, meta)}
    values: list[Any] = dense
    return ChunkPoint(point_id=str(record.id), dense=[float(x) for x in values], sparse=sparse, payload=new_payload)


async def _copy(legacy: LegacyCollection, settings: ContractSettings, progress: Callable[[int], None]) -> int:
    store = open_store(settings)
    copied = 0
    try:
        # The copied points have no multilingual vector, so the new collection is built without one
        # (as a collection of an older contract is); a reindex into a new index adds it.
        await bootstrap_collection(store, settings.model_copy(update={"multilingual_embedding_provider": "none"}))
        # sqlite reads are blocking file I/O: each page is read in a worker thread.
        pages = legacy.points(_PAGE)
        while (records := await asyncio.to_thread(next, pages, None)) is not None:
            await store.upsert([_to_point(record) for record in records])
            copied += len(records)
            progress(copied)
    finally:
        await close_store(store)
    return copied


def migrate(
    root: Path, settings: ContractSettings, progress: Callable[[int], None] = lambda _: None
) -> MigrationReport:
    """Copy the QDRANT_INDEX collection of the local-mode store at ``root`` into the embedded engine."""
    if not is_legacy_store(root):
        raise MigrationError(f"{root} holds no qdrant-client local-mode store (no meta.json and collection/)")
    try:
        collection = read_collection(root, settings.qdrant_index)
    except LegacyStoreReadError as exc:
        raise MigrationError(f"{exc} (QDRANT_INDEX={settings.qdrant_index!r})") from exc
    _check_models((collection.metadata or {}).get(MANIFEST_METADATA_KEY), settings)
    # Moved aside first: the new engine refuses to open a directory that still looks legacy.
    legacy = root / LEGACY_FOLDER
    legacy.mkdir(exist_ok=False)
    for name in ("meta.json", "collection"):
        shutil.move(str(root / name), str(legacy / name))
    try:
        moved = read_collection(legacy, settings.qdrant_index)
        copied = asyncio.run(_copy(moved, settings, progress))
    except BaseException:
        # Put the old store back so nothing is lost and the command can be retried.
        for name in ("meta.json", "collection"):
            shutil.move(str(legacy / name), str(root / name))
        legacy.rmdir()
        shutil.rmtree(root / "collections" / settings.qdrant_index, ignore_errors=True)
        raise
    return MigrationReport(collection=settings.qdrant_index, points=copied, legacy_folder=legacy)


def _show_progress(copied: int) -> None:
    sys.stdout.write(f"\rcopied {copied} points")
    sys.stdout.flush()


def run_migrate(root: Path) -> int:
    """Entry point of ``rag migrate``: a local-mode store into the embedded engine, or a contract 2.x
    embedded store into a 3.x collection (``rag_cli.upgrade``). 0 on success, 1 with a message on failure."""
    from rag_cli.upgrade import holds_embedded_collection, upgrade
    from shared_contract import ContractError, load_settings

    try:
        settings = load_settings(ContractSettings, qdrant_uri=None, qdrant_path=root)
        if not is_legacy_store(root) and holds_embedded_collection(root, settings):
            upgraded = upgrade(root, settings, progress=_show_progress)
            copied = (
                "the copy made earlier swapped in" if upgraded.points is None else f"{upgraded.points} points copied"
            )
            sys.stdout.write(
                f"\nrag migrate: {upgraded.collection!r} is a contract 3 collection now ({copied}); "
                f"the old one is kept in {upgraded.old_store}\n"
            )
            return 0
        report = migrate(root, settings, progress=_show_progress)
    except (MigrationError, ContractError, OSError) as exc:
        sys.stderr.write(f"\nrag migrate: {exc}\n")
        return 1
    sys.stdout.write(
        f"\nrag migrate: {report.points} points of {report.collection!r} copied; old files kept in {report.legacy_folder}\n"
    )
    return 0


def run_optimize(root: Path) -> int:
    """Entry point of ``rag optimize``: build the engine's HNSW graphs and merge segments (maintenance)."""
    from rag_runtime.store import EdgeStore
    from shared_contract import ContractError, load_settings

    async def optimize() -> bool:
        settings = load_settings(ContractSettings, qdrant_uri=None, qdrant_path=root)
        store = open_store(settings)
        try:
            assert isinstance(store, EdgeStore)
            await store.count(None)  # opens the shard; raises CollectionMissingError if there is none
            return store.optimize()
        finally:
            await close_store(store)

    try:
        changed = asyncio.run(optimize())
    except (ContractError, OSError) as exc:
        sys.stderr.write(f"rag optimize: {exc}\n")
        return 1
    sys.stdout.write(f"rag optimize: {'segments optimized' if changed else 'already optimal'} in {root}\n")
    return 0

"""``rag migrate`` on a contract 2.x embedded store: copy it into a contract 3.x collection.

A 2.x collection's committed points lack ``meta.live_in``, so search serves it with the tenant and
"not pending" conditions (docs/contract.md, "The live key"). Setting the key in place would move every
point out of the optimized segments (docs/benchmarks.md), so this copies the committed points, with
the key, into a new shard, optimizes it and swaps it in:

1. the new collection is built under ``<root>/.upgrade-3/`` (pending points are left out: start-up
   recovery would delete them anyway);
2. the old shard moves to ``<root>/contract-2/<collection>/`` (with a copy of its manifest), the new
   shard takes its place, and last the 3.0 manifest replaces the 2.x one (``os.replace``).

After a crash between those moves the store either refuses to open (its shard is missing) or holds
the new points under the old manifest, which search reads with the two conditions, correctly. Running
the command again finishes the swap. The old store is kept.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from qdrant_client import models

from rag_cli.errors import MigrationError
from rag_runtime.embedding import SparseVectorData
from rag_runtime.store import (
    ChunkPoint,
    EdgeStore,
    PointRecord,
    bootstrap_collection,
    close_store,
    open_store,
    pending_condition,
    scroll_pages,
)
from rag_runtime.store.edge import MANIFEST_FILE, SHARD_DIR, collection_dir
from shared_contract import (
    DENSE_VECTOR,
    MULTILINGUAL_VECTOR,
    PAYLOAD_META,
    SPARSE_VECTOR,
    CollectionManifest,
    CollectionMissingError,
    ContractSettings,
    MetaKey,
    verify_manifest,
)
from shared_contract.version import major_version

CONTRACT_2_FOLDER = "contract-2"
STAGING_FOLDER = ".upgrade-3"
_PAGE = 256


@dataclass(frozen=True, slots=True)
class UpgradeReport:
    """What was copied, and where the old store is."""

    collection: str
    # None when an earlier run had copied them and this one finished its swap.
    points: int | None
    old_store: Path


def stored_manifest(settings: ContractSettings) -> CollectionManifest | None:
    """The manifest of the embedded QDRANT_INDEX collection at QDRANT_PATH, or None when there is none."""

    async def read() -> CollectionManifest | None:
        store = open_store(settings)
        try:
            return await store.read_manifest()
        except CollectionMissingError:
            return None
        finally:
            await close_store(store)

    return asyncio.run(read())


def unfinished_swap(root: Path, collection: str) -> bool:
    """Whether an earlier run was stopped after moving the old shard aside (the copy is complete then:
    it was optimized before the swap began) and before it removed its staging folder."""
    return (root / STAGING_FOLDER).is_dir() and (root / CONTRACT_2_FOLDER / collection / SHARD_DIR).is_dir()


def holds_embedded_collection(root: Path, settings: ContractSettings) -> bool:
    """Whether ``root`` (QDRANT_PATH) holds the embedded QDRANT_INDEX collection, whatever its contract,
    or an unfinished upgrade of it."""
    at_root = settings.model_copy(update={"qdrant_path": root})
    return unfinished_swap(root, settings.qdrant_index) or stored_manifest(at_root) is not None


def _copy_settings(manifest: CollectionManifest, settings: ContractSettings) -> ContractSettings:
    """``settings`` with the old collection's vectors: a new collection built from them holds the same."""
    updates: dict[str, object] = {"enable_sparse_embeddings": manifest.sparse_model is not None}
    if manifest.multilingual_model is None:
        updates["multilingual_embedding_provider"] = "none"
    return settings.model_copy(update=updates)


def _live(record: PointRecord) -> ChunkPoint:
    """A committed point of the old store as the new one holds it: ``meta.live_in`` set, vectors unchanged."""
    meta = dict(record.payload.get(PAYLOAD_META) or {})
    tenant = meta.get(MetaKey.COLLECTION_NAME)
    if not isinstance(tenant, str):
        raise MigrationError(f"point {record.point_id} has no meta.collection_name, so no tenant to make it live in")
    meta[MetaKey.LIVE_IN] = tenant
    vectors = record.vectors or {}
    dense = vectors.get(DENSE_VECTOR)
    if not isinstance(dense, list):
        raise MigrationError(f"point {record.point_id} has no {DENSE_VECTOR!r} vector")
    sparse = vectors.get(SPARSE_VECTOR)
    multilingual = vectors.get(MULTILINGUAL_VECTOR)
    return ChunkPoint(
        point_id=record.point_id,
        dense=dense,
        sparse=sparse if isinstance(sparse, SparseVectorData) else None,
        payload={**record.payload, PAYLOAD_META: meta},
        multilingual=multilingual if isinstance(multilingual, list) else None,
    )


async def _copy_committed(
    root: Path,
    staging: Path,
    old_settings: ContractSettings,
    new_settings: ContractSettings,
    progress: Callable[[int], None],
) -> int:
    """Every committed point of the store at ``root`` into a new, optimized 3.x collection at ``staging``."""
    old = open_store(old_settings.model_copy(update={"qdrant_path": root}))
    new = open_store(new_settings.model_copy(update={"qdrant_path": staging}))
    copied = 0
    try:
        await bootstrap_collection(new, new_settings)
        committed = models.Filter(must_not=[pending_condition()])
        async for page in scroll_pages(old, committed, page_size=_PAGE, with_vectors=True):
            await new.upsert([_live(record) for record in page])
            copied += len(page)
            progress(copied)
        stored = await new.count(None)
        if stored != copied:
            raise MigrationError(f"the new collection holds {stored} points after {copied} were copied")
        assert isinstance(new, EdgeStore)  # open_store on a path is the embedded engine
        # Blocks for seconds: this is a maintenance command, run with the services stopped.
        new.optimize()
    finally:
        await close_store(new)
        await close_store(old)
    return copied


def _swap(root: Path, collection: str) -> None:
    """Put the staged collection in place of the old one (each step idempotent: a rerun resumes)."""
    place = collection_dir(root, collection)
    aside = root / CONTRACT_2_FOLDER / collection
    staged = collection_dir(root / STAGING_FOLDER, collection)
    aside.mkdir(parents=True, exist_ok=True)
    if not (aside / MANIFEST_FILE).is_file():
        shutil.copy2(place / MANIFEST_FILE, aside / MANIFEST_FILE)
    if not (aside / SHARD_DIR).exists():
        shutil.move(str(place / SHARD_DIR), str(aside / SHARD_DIR))
    if not (place / SHARD_DIR).exists():
        shutil.move(str(staged / SHARD_DIR), str(place / SHARD_DIR))
    if (staged / MANIFEST_FILE).is_file():
        os.replace(staged / MANIFEST_FILE, place / MANIFEST_FILE)
    shutil.rmtree(root / STAGING_FOLDER)


def upgrade(root: Path, settings: ContractSettings, progress: Callable[[int], None] = lambda _: None) -> UpgradeReport:
    """Copy the QDRANT_INDEX collection of the 2.x embedded store at ``root`` into a 3.x collection in its place."""
    collection = settings.qdrant_index
    aside = root / CONTRACT_2_FOLDER / collection
    staged = collection_dir(root / STAGING_FOLDER, collection)
    if unfinished_swap(root, collection):
        if not (collection_dir(root, collection) / SHARD_DIR).exists() and not (staged / SHARD_DIR).is_dir():
            raise MigrationError(f"{aside} holds the old store but neither {root} nor {staged} holds the new one")
        _swap(root, collection)
        return UpgradeReport(collection=collection, points=None, old_store=aside)
    manifest = stored_manifest(settings.model_copy(update={"qdrant_path": root}))
    if manifest is None:
        raise MigrationError(f"{root} holds no collection {collection!r} (QDRANT_INDEX)")
    if major_version(manifest.contract_version) != 2:
        raise MigrationError(
            f"collection {collection!r} is a contract {manifest.contract_version} collection; only 2.x ones are upgraded"
        )
    new_settings = _copy_settings(manifest, settings)
    # The vectors are copied as they are, so the settings must name the models that made them.
    verify_manifest(collection, manifest, new_settings, require_sparse=manifest.sparse_model is not None)
    shutil.rmtree(root / STAGING_FOLDER, ignore_errors=True)  # an earlier copy that did not finish
    copied = asyncio.run(_copy_committed(root, root / STAGING_FOLDER, settings, new_settings, progress))
    _swap(root, collection)
    return UpgradeReport(collection=collection, points=copied, old_store=aside)

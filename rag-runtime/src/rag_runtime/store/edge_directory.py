"""The embedded store's directory: where a collection lives, who holds it, what a write needs free.

Layout under QDRANT_PATH: ``collections/<QDRANT_INDEX>/shard/`` (the engine's WAL and segments)
and ``collections/<QDRANT_INDEX>/manifest.json`` (the contract manifest; a shard has no metadata).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any, BinaryIO

from shared_contract.errors import CollectionMissingError, ManifestMissingError, QdrantUnavailableError
from shared_contract.manifest import CollectionManifest

logger = logging.getLogger(__name__)

MANIFEST_FILE = "manifest.json"
SHARD_DIR = "shard"
# What a store another process holds says (one process per directory); callers may look for it.
STORE_IN_USE = "is in use by another process"
# Held (flock) by the process that has the directory open. The engine's own lock is its WAL's, which
# a load takes only after it has opened the segments, and opening them applies and empties their
# journals: a second process refused at the WAL had already emptied the first one's, whose next
# flush then failed ("tracker_journal.dat is shorter than expected").
LOCK_FILE = ".lock"
# The engine grows its WAL (32 MiB segments) and its segment files through memory mappings; a write
# into a full disk through a mapping kills the whole process (SIGBUS) instead of failing the call.
# So writes stop, with a typed error, while less than this is free on the store's disk.
MIN_FREE_BYTES = 256 * 1024 * 1024
# Where the engine builds an optimize's new segments; it does not clear what a killed optimize left.
TEMP_SEGMENTS = "temp_segments"
MIB = 1024 * 1024


def collection_dir(root: Path, collection: str) -> Path:
    """Where one collection lives under QDRANT_PATH."""
    return root / "collections" / collection


def search_threads(configured: int) -> int:
    """The engine's search pool size: ``configured``, or for 0 one thread fewer than the CPUs this
    process may run on (at least one), leaving a CPU for the query model and the event loop."""
    if configured > 0:
        return configured
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cpus - 1)


def store_in_use(collection_directory: Path) -> bool:
    """Whether a process, this one included, holds the collection at ``collection_directory`` open.

    An open :class:`EdgeStore` holds an flock on the directory's lock file; flock locks belong to
    one open file, so a second open in the same process sees them too.
    """
    lock = collection_directory / LOCK_FILE
    if not lock.is_file():
        return False
    with lock.open("ab") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return False


def tree_bytes(directory: Path) -> int:
    """Bytes of the files under ``directory``."""
    return sum((Path(parent) / name).stat().st_size for parent, _, names in os.walk(directory) for name in names)


def hold_lock(directory: Path) -> BinaryIO:
    """Take the directory's lock before the engine opens a file (STORE_IN_USE when another process has it).
    Closing the returned file releases it."""
    directory.mkdir(parents=True, exist_ok=True)
    handle = (directory / LOCK_FILE).open("ab")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise QdrantUnavailableError(
            f"embedded store at {directory} {STORE_IN_USE}: one process per directory (it holds {LOCK_FILE})"
        ) from None
    return handle


def drop_unfinished_builds(directory: Path) -> None:
    """Remove the half-built segments of an optimize that was killed (they would stay forever).
    The caller holds the shard's WAL lock and no optimize runs during a load, so whatever is in
    the engine's build directory now is dead."""
    temp = directory / SHARD_DIR / TEMP_SEGMENTS
    leftovers = list(temp.iterdir()) if temp.is_dir() else []
    if not leftovers:
        return
    freed = tree_bytes(temp)
    for entry in leftovers:
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    logger.warning(
        "embedded store at %s: removed %d MiB of segments an interrupted optimize left", directory, freed // MIB
    )


def check_free_space(directory: Path, operation: str, needed: int) -> None:
    """QdrantUnavailableError while the disk of ``directory`` has less than ``needed`` bytes free."""
    free = shutil.disk_usage(directory).free
    if free < needed:
        raise QdrantUnavailableError(
            f"embedded store {operation} refused: {free // MIB} MiB free on the disk of {directory}, "
            f"under the {needed // MIB} MiB it needs (writing into a full disk would crash the process); "
            "free space there and retry"
        )


def load_manifest(directory: Path, collection: str) -> CollectionManifest:
    """The collection's manifest file (CollectionMissingError without one, ManifestMissingError when unreadable)."""
    path = directory / MANIFEST_FILE
    if not path.is_file():
        raise CollectionMissingError(collection)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ManifestMissingError(collection) from exc
    if not isinstance(raw, dict):
        raise ManifestMissingError(collection)
    return CollectionManifest.model_validate(raw)


def write_manifest(directory: Path, manifest: Any) -> None:
    """Write the manifest last and atomically: its presence means the collection exists."""
    staging = directory / f".{MANIFEST_FILE}.tmp"
    staging.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(staging, directory / MANIFEST_FILE)

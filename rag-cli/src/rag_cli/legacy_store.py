"""Read-only access to a store qdrant-client's local mode wrote (contract 1.x), without opening it.

Local mode is never started here: it loads every point into Python and locks the directory. Its
files are read directly instead, and this module is the only place that knows their layout
(checked against qdrant-client 1.x; ``rag-cli/tests/test_migrate.py`` writes a real store with
local mode and migrates it, so a change of layout fails loudly there):

- ``meta.json``: ``{"collections": {<name>: <CreateCollection config, with "metadata">}, ...}``
- ``collection/<name>/storage.sqlite``: table ``points(id TEXT PRIMARY KEY, point BLOB)``, each
  row a pickled ``PointStruct``. Older clients could leave several rows for one point id; the
  highest rowid is the latest write.
"""

from __future__ import annotations

import json
import pickle
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qdrant_client import models

META_FILE = "meta.json"
COLLECTIONS_FOLDER = "collection"
STORAGE_FILE = "storage.sqlite"


class LegacyStoreReadError(RuntimeError):
    """The local-mode files are missing, of an unknown layout, or hold no such collection."""


@dataclass(frozen=True, slots=True)
class LegacyCollection:
    """One collection of a local-mode store: its metadata and its points file."""

    name: str
    metadata: dict[str, Any] | None
    storage: Path

    def points(self, page: int) -> Iterator[list[models.PointStruct]]:
        """Every point once (its latest write), in pages of ``page``."""
        # Read-only: the old store is kept as it is, whatever happens to the copy.
        # Pages are read one at a time from worker threads in turn, never concurrently.
        connection = sqlite3.connect(f"{self.storage.as_uri()}?mode=ro", uri=True, check_same_thread=False)
        try:
            rows = connection.execute("SELECT point FROM points ORDER BY rowid DESC")
            seen: set[str] = set()
            batch: list[models.PointStruct] = []
            for (blob,) in rows:
                # The user's own store, pickled by qdrant-client itself: there is no other encoding.
                point = pickle.loads(blob)  # noqa: S301
                if not isinstance(point, models.PointStruct):
                    raise LegacyStoreReadError(f"{self.storage} holds a {type(point).__name__}, not a point")
                key = str(point.id)
                if key in seen:
                    continue
                seen.add(key)
                batch.append(point)
                if len(batch) == page:
                    yield batch
                    batch = []
            if batch:
                yield batch
        except sqlite3.Error as exc:
            raise LegacyStoreReadError(f"{self.storage}: {exc}") from exc
        finally:
            connection.close()


def read_collection(root: Path, name: str) -> LegacyCollection:
    """The collection ``name`` of the local-mode store at ``root``."""
    try:
        meta = json.loads((root / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LegacyStoreReadError(f"{root / META_FILE} cannot be read: {exc}") from exc
    collections = meta.get("collections") if isinstance(meta, dict) else None
    if not isinstance(collections, dict):
        raise LegacyStoreReadError(f"{root / META_FILE} has no collections table")
    config = collections.get(name)
    if not isinstance(config, dict):
        raise LegacyStoreReadError(f"{root} has no collection {name!r}")
    storage = root / COLLECTIONS_FOLDER / name / STORAGE_FILE
    if not storage.is_file():
        raise LegacyStoreReadError(f"{storage} is missing (stores from qdrant-client < 1.1.7 are not supported)")
    metadata = config.get("metadata")
    return LegacyCollection(name=name, metadata=metadata if isinstance(metadata, dict) else None, storage=storage)

"""A source as its state file holds it: what it is, its state, the counts of its last sync and the items
that sync found (the documents it owns)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from ingestion_service.jobs.reindex_state import StateRecord

SourceKind = Literal["file", "url", "website", "folder", "s3"]
SourceState = Literal["pending", "indexing", "indexed", "failed"]
ItemOutcome = Literal["added", "changed", "unchanged", "failed"]
STATE_FORMAT = 1
# Failed items listed by URI in a source (all are counted).
MAX_LISTED_FAILURES = 50


def item_file_id(item_uri: str) -> str:
    """The document id of one item: ``rag sync``'s ``uuid5(NAMESPACE_URL, f"{root_uri}/{relative}")`` for a
    folder's or prefix's file, ``rag ingest``'s ``uuid5(NAMESPACE_URL, url)`` for a page."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, item_uri))


class SourceFailure(BaseModel):
    """Why a source, or one of its items, failed: the error code and the message a caller may see."""

    code: str
    error: str
    uri: str | None = None


class SourceCounts(BaseModel):
    """What the last sync did: ``seen`` = added + changed + unchanged + failed."""

    seen: int = 0
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    removed: int = 0
    failed: int = 0

    def count(self, outcome: ItemOutcome) -> None:
        """Record one item's outcome."""
        self.seen += 1
        setattr(self, outcome, getattr(self, outcome) + 1)


class SourceItem(BaseModel):
    """One document of the source: its URI and the file_id it is stored under."""

    uri: str
    file_id: str


class SourceRecord(StateRecord):
    """A registered source; readers get copies."""

    format: int = STATE_FORMAT
    source_id: str
    uri: str
    kind: SourceKind
    collection_name: str
    # The QDRANT_INDEX its documents live in: a state file of another index is not loaded here.
    target_index: str
    schedule_minutes: int | None = None
    max_pages: int
    max_depth: int
    include: list[str] = Field(default_factory=lambda: list[str]())
    exclude: list[str] = Field(default_factory=lambda: list[str]())
    state: SourceState = "pending"
    error: SourceFailure | None = None
    counts: SourceCounts = Field(default_factory=SourceCounts)
    failures: list[SourceFailure] = Field(default_factory=lambda: list[SourceFailure]())
    created_at: datetime
    last_synced_at: datetime | None = None
    next_sync_at: datetime | None = None
    # The items the last listing found (failed ones too: an unreadable item is never taken for removed).
    items: list[SourceItem] = Field(default_factory=lambda: list[SourceItem]())

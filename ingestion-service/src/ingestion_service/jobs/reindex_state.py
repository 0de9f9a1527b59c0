"""A reindex job as it is kept: its record (state, counts, failures, the cursor it resumes after) and the
state files in INGEST_STATE_DIR that let it resume after a shutdown or a crash.

A job is one JSON file, replaced atomically (temp file, fsync, rename): a reader, or a restart after a
crash, sees the old file or the new one, never a torn write.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError

logger = logging.getLogger(__name__)

ReindexState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
DocumentOutcome = Literal["reingested", "unchanged", "failed", "skipped"]
# Failed documents listed by file_id in a job (all are counted in ``failed``).
MAX_LISTED_FAILURES = 100
FINAL_STATES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
STATE_FORMAT = 1
STATE_SUBDIR = "reindex"


class DocumentFailure(BaseModel):
    """One document a job could not re-ingest (it keeps its previous version)."""

    file_id: str
    name: str | None
    code: str
    error: str


class CurrentDocument(BaseModel):
    """The document a running job is indexing."""

    file_id: str
    name: str | None


class JobFailure(BaseModel):
    """Why a job ended ``failed``."""

    code: str
    error: str


class StateRecord(BaseModel):
    """What a state file holds (a reindex job, a source): a record of the QDRANT_INDEX it writes into."""

    target_index: str


RecordT = TypeVar("RecordT", bound=StateRecord)


class ReindexRecord(StateRecord):
    """A reindex job, as its state file holds it; readers get copies."""

    format: int = STATE_FORMAT
    job_id: str
    collection_name: str
    # The QDRANT_INDEX the job writes into: a state file of another index is never resumed here.
    target_index: str
    source_index: str | None
    force: bool
    state: ReindexState
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    # None until the documents are listed; done = reingested + unchanged + failed + skipped.
    total: int | None = None
    done: int = 0
    reingested: int = 0
    unchanged: int = 0
    failed: int = 0
    # Listed, then deleted before their turn.
    skipped: int = 0
    failures: list[DocumentFailure] = Field(default_factory=lambda: list[DocumentFailure]())
    current: CurrentDocument | None = None
    # The last file_id finished (documents go in file_id order): a resumed job starts after it.
    cursor: str | None = None
    error: JobFailure | None = None
    # Since when, and from which ``done``, this process has been working through the listing: the
    # pace of its ETA. Never written to the state file: a resumed job's time before the restart,
    # and the restart, do not count.
    pace_since: datetime | None = Field(default=None, exclude=True)
    pace_done: int = Field(default=0, exclude=True)

    @property
    def finished(self) -> bool:
        """Whether the job reached a final state."""
        return self.state in FINAL_STATES

    @property
    def progress(self) -> float | None:
        """The share of the listed documents processed; None until they are listed."""
        if self.total is None:
            return None
        return 1.0 if self.total == 0 else self.done / self.total

    def eta_seconds(self, now: datetime) -> float | None:
        """Seconds until the last listed document is done, at the pace of those done since the listing
        in this process; None until one is done, and once the job ended."""
        paced = self.done - self.pace_done
        if self.finished or self.total is None or self.pace_since is None or paced <= 0:
            return None
        per_document = max(0.0, (now - self.pace_since).total_seconds()) / paced
        return round(per_document * (self.total - self.done), 1)

    def count(self, file_id: str, outcome: DocumentOutcome, failure: DocumentFailure | None) -> None:
        """Record a finished document: the cursor moves past it and its outcome is counted."""
        self.done += 1
        self.cursor = file_id
        self.current = None
        if outcome == "reingested":
            self.reingested += 1
        elif outcome == "unchanged":
            self.unchanged += 1
        elif outcome == "skipped":
            self.skipped += 1
        else:
            self.failed += 1
            if failure is not None and len(self.failures) < MAX_LISTED_FAILURES:
                self.failures.append(failure)


class StateFiles(Generic[RecordT]):
    """One state file per job (a reindex job, a source) under ``directory``, each a ``record_type``
    (private: the files name collections and documents). Blocking file I/O: the managers call these in
    worker threads."""

    def __init__(self, directory: Path, record_type: type[RecordT]) -> None:
        self.directory = directory
        self.record_type = record_type

    def path(self, job_id: str) -> Path:
        """The job's state file."""
        return self.directory / f"{job_id}.json"

    def write(self, job_id: str, text: str) -> None:
        """Replace the job's file with ``text`` atomically."""
        path = self.path(job_id)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        staging = path.with_name(f".{path.name}.tmp")
        with staging.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(staging, path)

    def remove(self, job_ids: Sequence[str]) -> None:
        """Remove the jobs' files (absent ones are no error)."""
        for job_id in job_ids:
            self.path(job_id).unlink(missing_ok=True)

    def load(self, target_index: str) -> list[RecordT]:
        """The records that write into ``target_index`` (a state file of another QDRANT_INDEX is never
        resumed here); an unreadable file is skipped with a warning."""
        try:
            paths = sorted(self.directory.iterdir()) if self.directory.is_dir() else []
        except OSError as exc:
            # The service still starts; only earlier jobs are neither shown nor resumed.
            logger.error("reading the state directory %s failed (check INGEST_STATE_DIR): %s", self.directory, exc)
            return []
        records: list[RecordT] = []
        for path in paths:
            if path.name.startswith(".") and path.name.endswith(".tmp"):
                with suppress(OSError):
                    path.unlink(missing_ok=True)  # a write a crash interrupted; the file before it is whole
                continue
            if path.suffix != ".json":
                continue
            try:
                record = self.record_type.model_validate_json(path.read_bytes())
            except (OSError, ValidationError) as exc:
                logger.warning("state file %s is unreadable and was skipped: %s", path, exc)
                continue
            if record.target_index == target_index:
                records.append(record)
        return records

"""Blue/green versions of a file's chunks, safe across processes and replicas.

Protocol (one *run* = one ingest request for a (file_id, collection_name) pair):

1. At request start the run takes ``ingest_seq = epoch_milliseconds * 1000 + random(0..999)``
   (wall-clock ordered, ties within a millisecond broken at random) and
   ``ingest_version = f"{ingest_seq:020d}"``. Both go into every chunk's meta.

   Why milliseconds, not nanoseconds: Qdrant's ``Range`` filter takes float64 bounds (server
   and embedded alike), so integers above 2**53 compare inexactly; a nanosecond-based seq
   (~1.8e18) made ``gte=mine`` miss the run's own points. Milliseconds * 1000 stay below 2**53
   until the year 2255 (a test pins this).
2. The run writes all its points next to the existing ones. The old version stays searchable.
3. Commit:
   a. If any point of (file_id, collection_name) has ``ingest_seq > mine``, a newer run exists:
      delete MY points and report success as *superseded* (no sweep).
   b. Otherwise delete every point of (file_id, collection_name) whose ``ingest_seq`` is not
      ``>= mine`` (older versions, and points without a seq written by older tooling).
4. On any failure before or during commit, the run deletes the points with its own
   ``ingest_version``. A failing clean-up is logged loudly, counted, and reported next to the
   original error code; it is never swallowed.

Why no second check after 3b is needed. Let N be the newest run (largest seq) that completes
its write. Points are only ever deleted by (i) a run deleting its own points, or (ii) a run
R sweeping points with seq < seq(R). N's points can therefore only be removed by N itself,
which happens only if N fails (then N is not the newest *successful* run and the argument
applies to the next one). Every other run R has seq(R) < seq(N):

* If R commits after N's write finished, R's check 3a sees N's points and R deletes itself.
* If R commits before N's write finished, R may sweep and keep its own points, but N commits
  after its own write, so N's sweep (3b) then removes R's points and everything older.
  N cannot have been superseded (3a) by R because seq(R) < seq(N).

So once all runs have finished, exactly N's version remains, whatever the interleaving and
whichever process each run lives in; a check repeated after 3b could only see runs older than
N, which N's own sweep already covers. Two caveats, both documented: (1) ordering is by the
replicas' wall clocks, so "latest request wins" is as accurate as their clock sync (NTP);
(2) if R saw N's points in 3a and N *then* fails, R has already removed itself and the file
keeps the version that preceded both (consistent, never duplicated, merely not R's content;
N's caller got an error and retries).

A process-local lock is not needed for correctness; none is used.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass

from ingestion_service.adapters.qdrant_store import ChunkIndex

logger = logging.getLogger(__name__)

_RANDOM_SPAN = 1000
# Largest integer float64 represents exactly; Qdrant range bounds are float64.
MAX_EXACT_SEQ = 2**53


@dataclass(frozen=True)
class RunVersion:
    """The version stamp of one ingest run."""

    seq: int
    version: str

    @classmethod
    def new(cls, now_ns: int | None = None) -> RunVersion:
        """A stamp ordered by the wall clock at request start."""
        now = time.time_ns() if now_ns is None else now_ns
        seq = now // 1_000_000 * _RANDOM_SPAN + random.randrange(_RANDOM_SPAN)  # noqa: S311 - a tie-breaker, not a secret
        if seq >= MAX_EXACT_SEQ:
            raise OverflowError("ingest_seq no longer fits float64 exactly; widen the scheme")
        return cls(seq=seq, version=f"{seq:020d}")


@dataclass(frozen=True)
class CommitResult:
    """What the commit did: kept this run's version, or found a newer run and stepped aside."""

    superseded: bool


def commit(index: ChunkIndex, file_id: str, collection_name: str, run: RunVersion) -> CommitResult:
    """Step 3 of the protocol. Qdrant errors propagate (the caller then cleans up its points)."""
    if index.count_newer(file_id, collection_name, run.seq) > 0:
        index.delete_version(file_id, collection_name, run.version)
        logger.info(
            "ingest superseded by a newer run; own points removed",
            extra={"file_id": file_id, "collection_name": collection_name, "ingest_version": run.version},
        )
        return CommitResult(superseded=True)
    index.delete_older(file_id, collection_name, run.seq)
    return CommitResult(superseded=False)


def discard(index: ChunkIndex, file_id: str, collection_name: str, run: RunVersion) -> None:
    """Step 4: remove this run's own points. Errors propagate to the caller, which reports them."""
    index.delete_version(file_id, collection_name, run.version)

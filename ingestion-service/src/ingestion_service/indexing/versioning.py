"""Blue/green versions of a file's chunks: atomic to readers, safe across replicas and kill -9.

Protocol (one *run* = one ingest request for a (file_id, collection_name) pair):

1. At request start the run takes ``ingest_seq = epoch_milliseconds * 1000 + random(0..999)``
   (wall-clock ordered, ties within a millisecond broken at random) and
   ``ingest_version = f"{ingest_seq:020d}"``. Both go into every chunk's meta.

   Why milliseconds, not nanoseconds: Qdrant's ``Range`` filter takes float64 bounds (server
   and embedded alike), so integers above 2**53 compare inexactly; a nanosecond-based seq
   (~1.8e18) made ``gte=mine`` miss the run's own points. Milliseconds * 1000 stay below 2**53
   until the year 2255 (a test pins this).
2. The run writes all its points with ``meta.ingest_state = "pending"``, in batches, next to the
   existing version. Readers (search, counts, inspection) filter pending points out, so a run
   killed half-way is invisible: the old version stays whole and searchable meanwhile.
3. Commit:
   a. If any point of (file_id, collection_name) has ``ingest_seq > mine``, a newer run exists:
      delete MY points and report success as *superseded*.
   b. Otherwise **publish**: one ``set_payload`` by filter flips every point of my version to
      ``"live"``. It is a single store operation (all or nothing on the embedded engine, which
      applies one update atomically; one request on a server).
   c. Then delete every point of (file_id, collection_name) whose ``ingest_seq`` is not
      ``>= mine`` (older versions, other runs' leftovers, points without a seq from older tooling).
   Between b and c both complete versions are live for the length of one store call; search
   keeps only the newest version of a file among its hits, so it never mixes them.
   d. A run whose bytes and settings equal the live version's (*unchanged*) writes no points: it
      **adopts** the live version instead. One ``set_payload`` raises that version's
      ``ingest_seq`` to the run's (never lowering it) and sets the run's metadata; then the run
      sweeps as in c. For the protocol the adopted points are the run's own, written and
      published at once, so an older run still extracting steps aside at its commit (3a), as it
      would for any newer run. When the version is gone by then (a concurrent run swept it), the
      run ingests as usual.
4. On any failure before or during commit, the run deletes the points with its own
   ``ingest_version``. A failing clean-up is logged loudly, counted, and reported next to the
   original error code; it is never swallowed.
5. Start-up recovery (``recover``): pending points are unfinished runs. The embedded engine is
   opened by one process, so at start-up every pending point is dead and is removed; on a
   server other replicas may be writing, so only pending points older than
   INGEST_PENDING_TIMEOUT_SECONDS are. Files left with two live versions (killed between b and
   c) keep only the newest. After recovery a file has exactly one complete version, or none.

Why no second check after 3c is needed. Let N be the newest run (largest seq) that completes
its write. Points are only ever deleted by (i) a run deleting its own points, or (ii) a run
R sweeping points with seq < seq(R), or (iii) recovery, which removes only unfinished or
superseded runs; a DELETE of the file removes committed points only, never a run's pending ones.
Before publishing, a run also counts its stored points against the number it wrote (3b refuses
a version that lost any). N's points can therefore only be removed by N itself, which happens only if N
fails (then N is not the newest *successful* run and the argument applies to the next one).
Every other run R has seq(R) < seq(N):

* If R commits after N's write started, R's check 3a sees N's points and R deletes itself.
* If R commits before that, R may publish and sweep, but N commits after its own write, so N's
  sweep (3c) then removes R's points and everything older. N cannot have been superseded (3a)
  by R because seq(R) < seq(N).

So once all runs have finished, exactly N's version remains, whatever the interleaving and
whichever process each run lives in. Two caveats, both documented: (1) ordering is by the
replicas' wall clocks, so "latest request wins" is as accurate as their clock sync (NTP);
(2) if R saw N's points in 3a and N *then* fails, R has already removed itself and the file
keeps the version that preceded both (consistent, never mixed, merely not R's content; N's
caller got an error and retries).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ingestion_service.adapters.chunk_index import ChunkIndex, RecoveryReport
from ingestion_service.errors import QdrantWriteError

logger = logging.getLogger(__name__)

_RANDOM_SPAN = 1000
# Largest integer float64 represents exactly; Qdrant range bounds are float64.
MAX_EXACT_SEQ = 2**53


def seq_at(now_ns: int) -> int:
    """The smallest ingest_seq a run starting at ``now_ns`` can take."""
    return now_ns // 1_000_000 * _RANDOM_SPAN


@dataclass(frozen=True)
class RunVersion:
    """The version stamp of one ingest run."""

    seq: int
    version: str

    @classmethod
    def new(cls, now_ns: int | None = None) -> RunVersion:
        """A stamp ordered by the wall clock at request start."""
        now = time.time_ns() if now_ns is None else now_ns
        seq = seq_at(now) + random.randrange(_RANDOM_SPAN)  # noqa: S311 - a tie-breaker, not a secret
        if seq >= MAX_EXACT_SEQ:
            raise OverflowError("ingest_seq no longer fits float64 exactly; widen the scheme")
        return cls(seq=seq, version=f"{seq:020d}")


@dataclass(frozen=True)
class CommitResult:
    """What the commit did: published this run's version, or found a newer run and stepped aside."""

    superseded: bool


async def commit(
    index: ChunkIndex,
    file_id: str,
    collection_name: str,
    run: RunVersion,
    *,
    meta: Mapping[str, Any] | None = None,
    written: int | None = None,
) -> CommitResult:
    """Step 3 of the protocol; ``meta`` is set by the publish itself. Store errors propagate (the caller then removes its points).

    ``written``: how many points the run wrote. Fewer still stored means something removed some of
    them meanwhile (on a server, another replica's recovery of a run slower than
    INGEST_PENDING_TIMEOUT_SECONDS): QdrantWriteError, and nothing is published.
    """
    if await index.count_newer(file_id, collection_name, run.seq) > 0:
        await index.delete_version(file_id, collection_name, run.version)
        logger.info(
            "ingest superseded by a newer run; own points removed",
            extra={"file_id": file_id, "collection_name": collection_name, "ingest_version": run.version},
        )
        return CommitResult(superseded=True)
    if written is not None:
        stored = await index.count_version(file_id, collection_name, run.version)
        if stored < written:
            raise QdrantWriteError(
                f"commit refused: {stored} of the {written} points this run wrote are still stored; "
                "publishing would make a partial version live"
            )
    await index.publish(file_id, collection_name, run.version, meta=meta)
    await index.delete_older(file_id, collection_name, run.seq)
    return CommitResult(superseded=False)


async def adopt(
    index: ChunkIndex,
    file_id: str,
    collection_name: str,
    run: RunVersion,
    *,
    live_version: str,
    meta: Mapping[str, Any],
) -> bool:
    """Step 3d: the live version ``live_version`` becomes this run's in place; False when it is gone.

    Store errors propagate; nothing is left half-done (the claim is one operation, the sweep only
    removes what a commit of this run would).
    """
    if not await index.claim(file_id, collection_name, live_version, run.seq, meta):
        return False
    await index.delete_older(file_id, collection_name, run.seq)
    return True


async def discard(index: ChunkIndex, file_id: str, collection_name: str, run: RunVersion) -> None:
    """Step 4: remove this run's own points. Errors propagate to the caller, which reports them."""
    await index.delete_version(file_id, collection_name, run.version)


async def recover(index: ChunkIndex, *, pending_timeout_seconds: float | None) -> RecoveryReport:
    """Step 5. ``pending_timeout_seconds=None``: every pending point is dead (embedded engine)."""
    cutoff = None
    if pending_timeout_seconds is not None:
        cutoff = seq_at(time.time_ns() - int(pending_timeout_seconds * 1e9))
    report = await index.recover(pending_before_seq=cutoff)
    if report.pending_runs_removed or report.stale_versions_removed:
        logger.warning(
            "start-up recovery removed %d points of unfinished ingests and %d points of superseded versions",
            report.pending_runs_removed,
            report.stale_versions_removed,
        )
    return report

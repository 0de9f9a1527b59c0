"""The versioning protocol under every interleaving of two runs, failures and start-up recovery.

Points are written directly to the embedded engine (no models): each run writes N pending points
stamped with its seq, then commits or discards in the order a scenario dictates.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ingestion_service.adapters.chunk_index import ChunkIndex
from ingestion_service.errors import QdrantWriteError
from ingestion_service.indexing import versioning
from ingestion_service.indexing.versioning import RunVersion
from ingestion_service.settings import Settings
from rag_runtime.store import (
    bootstrap_collection,
    chunk_point,
    close_store,
    committed_filter,
    open_store,
    tenant_filter,
)
from shared_contract import LIVE_STATE, PENDING_STATE, load_settings

pytestmark = pytest.mark.anyio

FILE = "f1"
TENANT = "file-f1"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[ChunkIndex]:
    settings = load_settings(
        Settings, api_key="k" * 40, qdrant_uri=None, qdrant_path=tmp_path, qdrant_index=f"v_{uuid.uuid4().hex[:8]}"
    )
    store = open_store(settings)
    await bootstrap_collection(store, settings)
    try:
        yield ChunkIndex(store)
    finally:
        await close_store(store)


async def write(
    index: ChunkIndex, run: RunVersion | None, count: int, *, tenant: str = TENANT, state: str | None = PENDING_STATE
) -> None:
    """``count`` points of one run (``run=None``: written by older tooling, without a seq)."""
    meta: dict[str, object] = {"file_id": FILE, "collection_name": tenant, "languages": ["en"]}
    if run is not None:
        meta |= {"ingest_seq": run.seq, "ingest_version": run.version}
    if state is not None:
        meta["ingest_state"] = state
    await index.write(
        [chunk_point(uuid.uuid4().hex, "text", meta, dense=[1.0] + [0.0] * 383, sparse=None) for _ in range(count)]
    )


async def versions(index: ChunkIndex, tenant: str = TENANT) -> dict[tuple[str | None, str | None], int]:
    """(ingest_version, ingest_state) -> number of points of FILE in ``tenant``."""
    records, _ = await index.store.scroll(None, limit=1000)
    found: dict[tuple[str | None, str | None], int] = {}
    for record in records:
        meta = record.payload["meta"]
        if meta["collection_name"] == tenant:
            key = (meta.get("ingest_version"), meta.get("ingest_state"))
            found[key] = found.get(key, 0) + 1
    return found


def test_run_version_is_ordered_padded_and_exact_in_float64() -> None:
    first = RunVersion.new(now_ns=1_700_000_000_000_000_000)
    later = RunVersion.new(now_ns=1_700_000_000_001_000_000)  # one millisecond later
    assert first.seq < later.seq
    assert len(first.version) == 20
    assert int(first.version) == first.seq
    year_2200_ns = 7_258_118_400 * 10**9
    late = RunVersion.new(now_ns=year_2200_ns).seq
    assert late < versioning.MAX_EXACT_SEQ
    assert int(float(late)) == late


async def test_range_filters_see_a_real_seq_exactly(index: ChunkIndex) -> None:
    run = RunVersion.new()
    await write(index, run, 2)
    assert await index.count_newer(FILE, TENANT, run.seq) == 0
    assert await index.count_newer(FILE, TENANT, run.seq - 1) == 2
    await versioning.commit(index, FILE, TENANT, run)
    assert await versions(index) == {(run.version, LIVE_STATE): 2}


async def test_pending_points_are_invisible_until_the_commit_publishes_them(index: ChunkIndex) -> None:
    old = RunVersion.new(now_ns=1_000_000_000)
    new = RunVersion.new(now_ns=2_000_000_000)
    await write(index, old, 3)
    await versioning.commit(index, FILE, TENANT, old)
    await write(index, new, 5)  # the new version, half-way through a re-ingest
    assert await index.count(FILE, TENANT) == 3
    assert await index.store.count(tenant_filter([TENANT])) == 3
    chunks, _ = await index.scroll(FILE, TENANT, limit=100, offset=None)
    assert {chunk.meta["ingest_version"] for chunk in chunks} == {old.version}
    await versioning.commit(index, FILE, TENANT, new)
    assert await index.count(FILE, TENANT) == 5
    assert await versions(index) == {(new.version, LIVE_STATE): 5}


async def live_in(index: ChunkIndex) -> dict[str | None, int]:
    """``meta.live_in`` -> number of points of FILE (None: points without the key)."""
    records, _ = await index.store.scroll(None, limit=1000)
    found: dict[str | None, int] = {}
    for record in records:
        value = record.payload["meta"].get("live_in")
        found[value] = found.get(value, 0) + 1
    return found


async def test_the_commit_sets_the_live_key_that_alone_selects_the_committed_version(index: ChunkIndex) -> None:
    old = RunVersion.new(now_ns=1_000_000_000)
    new = RunVersion.new(now_ns=2_000_000_000)
    await write(index, old, 3)
    assert await live_in(index) == {None: 3}  # pending: not searchable yet
    await versioning.commit(index, FILE, TENANT, old)
    await write(index, new, 5)
    assert await live_in(index) == {TENANT: 3, None: 5}
    one_condition = committed_filter([TENANT], live_key=True)
    assert await index.store.count(one_condition) == await index.store.count(tenant_filter([TENANT])) == 3
    await versioning.commit(index, FILE, TENANT, new)
    assert await live_in(index) == {TENANT: 5}
    page, _ = await index.store.scroll(one_condition, limit=100)
    assert {record.payload["meta"]["ingest_version"] for record in page} == {new.version}


async def test_a_pending_point_never_carries_the_live_key_it_was_given(index: ChunkIndex) -> None:
    # A copy of another tenant's committed point, or a document whose own metadata names the key.
    run = RunVersion.new()
    meta = {
        "file_id": FILE,
        "collection_name": TENANT,
        "ingest_seq": run.seq,
        "ingest_version": run.version,
        "ingest_state": PENDING_STATE,
        "live_in": "kb-elsewhere",
    }
    await index.write([chunk_point("copied", "text", meta, dense=[1.0] + [0.0] * 383, sparse=None)])
    assert await live_in(index) == {None: 1}
    assert await index.store.count(committed_filter(["kb-elsewhere"], live_key=True)) == 0
    await versioning.commit(index, FILE, TENANT, run)
    assert await live_in(index) == {TENANT: 1}


async def test_commit_sweeps_older_versions_and_legacy_points(index: ChunkIndex) -> None:
    old = RunVersion.new(now_ns=1_000_000_000)
    new = RunVersion.new(now_ns=2_000_000_000)
    await write(index, None, 2, state=None)  # written by older tooling: no seq, no state
    await write(index, old, 3, state=LIVE_STATE)
    await write(index, new, 4)
    await write(index, old, 5, tenant="kb-other", state=LIVE_STATE)  # another tenant is never touched
    result = await versioning.commit(index, FILE, TENANT, new)
    assert not result.superseded
    assert await versions(index) == {(new.version, LIVE_STATE): 4}
    assert await versions(index, "kb-other") == {(old.version, LIVE_STATE): 5}


# Every order of the four steps (A write, A commit, B write, B commit) that keeps each run's
# write before its commit. B is the newer run; the end state must always be B's version only.
_STEPS = ["a_write", "a_commit", "b_write", "b_commit"]
_ORDERS = [
    order
    for order in itertools.permutations(_STEPS)
    if order.index("a_write") < order.index("a_commit") and order.index("b_write") < order.index("b_commit")
]


@pytest.mark.parametrize("order", _ORDERS, ids=["-".join(order) for order in _ORDERS])
async def test_two_runs_converge_to_the_newest(index: ChunkIndex, order: tuple[str, ...]) -> None:
    previous = RunVersion.new(now_ns=1_000_000_000)
    run_a = RunVersion.new(now_ns=2_000_000_000)
    run_b = RunVersion.new(now_ns=3_000_000_000)
    await write(index, previous, 2, state=LIVE_STATE)
    outcomes = {}
    for step in order:
        run = run_a if step.startswith("a") else run_b
        if step.endswith("write"):
            await write(index, run, 3 if run is run_a else 4)
        else:
            outcomes[step] = await versioning.commit(index, FILE, TENANT, run)
        # Readers only ever see one complete version: the previous one, A's or B's.
        assert await index.count(FILE, TENANT) in {2, 3, 4}
    assert await versions(index) == {(run_b.version, LIVE_STATE): 4}
    assert not outcomes["b_commit"].superseded
    # A stepped aside exactly when it could see B's points at its commit.
    assert outcomes["a_commit"].superseded == (order.index("b_write") < order.index("a_commit"))


async def test_failed_run_removes_only_its_own_points(index: ChunkIndex) -> None:
    previous = RunVersion.new(now_ns=1_000_000_000)
    failing = RunVersion.new(now_ns=2_000_000_000)
    await write(index, previous, 2, state=LIVE_STATE)
    await write(index, failing, 3)
    await versioning.discard(index, FILE, TENANT, failing)
    assert await versions(index) == {(previous.version, LIVE_STATE): 2}


async def test_newest_run_failing_leaves_the_prior_version(index: ChunkIndex) -> None:
    """Documented caveat: A saw B and stepped aside, then B failed: the file keeps the version before both."""
    previous = RunVersion.new(now_ns=1_000_000_000)
    run_a = RunVersion.new(now_ns=2_000_000_000)
    run_b = RunVersion.new(now_ns=3_000_000_000)
    await write(index, previous, 2, state=LIVE_STATE)
    await write(index, run_a, 3)
    await write(index, run_b, 1)  # B fails mid-write
    assert (await versioning.commit(index, FILE, TENANT, run_a)).superseded
    await versioning.discard(index, FILE, TENANT, run_b)
    assert await versions(index) == {(previous.version, LIVE_STATE): 2}


async def test_recovery_on_the_embedded_engine_removes_every_unfinished_run(index: ChunkIndex) -> None:
    previous = RunVersion.new(now_ns=1_000_000_000)
    killed = RunVersion.new()  # a run killed mid-write a moment ago
    await write(index, previous, 2, state=LIVE_STATE)
    await write(index, killed, 7)
    report = await versioning.recover(index, pending_timeout_seconds=None)
    assert report.pending_runs_removed == 7
    assert await versions(index) == {(previous.version, LIVE_STATE): 2}


async def test_recovery_on_a_server_spares_runs_other_replicas_may_still_be_writing(index: ChunkIndex) -> None:
    stale = RunVersion.new(now_ns=1_000_000_000)  # pending since 1970: long dead
    in_flight = RunVersion.new()  # pending for a moment: maybe another replica's live run
    await write(index, stale, 3, tenant="kb-stale")
    await write(index, in_flight, 4)
    report = await versioning.recover(index, pending_timeout_seconds=3600)
    assert report.pending_runs_removed == 3
    assert await versions(index, "kb-stale") == {}
    assert await versions(index) == {(in_flight.version, PENDING_STATE): 4}


async def test_recovery_keeps_only_the_newest_of_two_published_versions(index: ChunkIndex) -> None:
    """A kill between the publish and the sweep leaves two live versions; recovery finishes the sweep."""
    old = RunVersion.new(now_ns=1_000_000_000)
    new = RunVersion.new(now_ns=2_000_000_000)
    other = RunVersion.new(now_ns=1_500_000_000)
    await write(index, old, 3, state=LIVE_STATE)
    await write(index, new, 4, state=LIVE_STATE)
    await write(index, other, 2, tenant="kb-other", state=LIVE_STATE)
    report = await versioning.recover(index, pending_timeout_seconds=None)
    assert report.stale_versions_removed == 3
    assert await versions(index) == {(new.version, LIVE_STATE): 4}
    assert await versions(index, "kb-other") == {(other.version, LIVE_STATE): 2}


async def seqs(index: ChunkIndex) -> set[int]:
    records, _ = await index.store.scroll(None, limit=1000)
    return {record.payload["meta"]["ingest_seq"] for record in records}


async def test_an_unchanged_run_adopting_the_live_version_makes_an_older_run_in_flight_step_aside(
    index: ChunkIndex,
) -> None:
    """The newest request sends the stored bytes again while an older re-ingest is still writing."""
    stored = RunVersion.new(now_ns=1_000_000_000)
    older = RunVersion.new(now_ns=2_000_000_000)  # the re-ingest with other bytes, still extracting
    newer = RunVersion.new(now_ns=3_000_000_000)  # the same bytes as stored: unchanged
    await write(index, stored, 3)
    await versioning.commit(index, FILE, TENANT, stored)
    await write(index, older, 5)
    assert await versioning.adopt(index, FILE, TENANT, newer, live_version=stored.version, meta={"tags": ["b"]})
    assert await versions(index) == {(stored.version, LIVE_STATE): 3}  # the older run's pending points swept
    await write(index, older, 2)  # its last batch, written after the sweep
    assert (await versioning.commit(index, FILE, TENANT, older)).superseded
    assert await versions(index) == {(stored.version, LIVE_STATE): 3}
    assert await seqs(index) == {newer.seq}
    records, _ = await index.store.scroll(None, limit=10)
    assert {tuple(record.payload["meta"]["tags"]) for record in records} == {("b",)}


async def test_an_older_claim_never_lowers_a_newer_one(index: ChunkIndex) -> None:
    stored = RunVersion.new(now_ns=1_000_000_000)
    first = RunVersion.new(now_ns=2_000_000_000)
    second = RunVersion.new(now_ns=3_000_000_000)
    await write(index, stored, 2)
    await versioning.commit(index, FILE, TENANT, stored)
    assert await versioning.adopt(index, FILE, TENANT, second, live_version=stored.version, meta={"tags": ["new"]})
    # The older request arrives last: the version stays claimed by the newer one, with its labels.
    assert await versioning.adopt(index, FILE, TENANT, first, live_version=stored.version, meta={"tags": ["old"]})
    assert await seqs(index) == {second.seq}
    records, _ = await index.store.scroll(None, limit=10)
    assert {tuple(record.payload["meta"]["tags"]) for record in records} == {("new",)}


async def test_adopting_a_version_a_newer_run_replaced_fails_so_the_run_ingests(index: ChunkIndex) -> None:
    stored = RunVersion.new(now_ns=1_000_000_000)
    unchanged = RunVersion.new(now_ns=2_000_000_000)
    newest = RunVersion.new(now_ns=3_000_000_000)
    await write(index, stored, 2)
    await versioning.commit(index, FILE, TENANT, stored)
    await write(index, newest, 4)
    await versioning.commit(index, FILE, TENANT, newest)  # swept the version the unchanged run read
    assert not await versioning.adopt(index, FILE, TENANT, unchanged, live_version=stored.version, meta={})
    assert await versions(index) == {(newest.version, LIVE_STATE): 4}


@pytest.mark.parametrize("tenant", [TENANT, None], ids=["one-tenant", "every-tenant"])
async def test_deleting_the_file_during_a_run_keeps_the_runs_pending_points_so_it_commits_whole(
    index: ChunkIndex, tenant: str | None
) -> None:
    """A DELETE that lands while a re-ingest writes is undone by that ingest's commit, never half of it."""
    previous = RunVersion.new(now_ns=1_000_000_000)
    writing = RunVersion.new(now_ns=2_000_000_000)
    await write(index, previous, 2)
    await versioning.commit(index, FILE, TENANT, previous, written=2)
    await write(index, writing, 5)
    assert await index.delete_file(FILE, tenant) == 2
    assert await versions(index) == {(writing.version, PENDING_STATE): 5}
    await versioning.commit(index, FILE, TENANT, writing, written=5)
    assert await versions(index) == {(writing.version, LIVE_STATE): 5}


async def test_a_run_that_lost_points_while_it_wrote_is_refused_and_publishes_nothing(index: ChunkIndex) -> None:
    previous = RunVersion.new(now_ns=1_000_000_000)
    writing = RunVersion.new()
    await write(index, previous, 2, state=LIVE_STATE)
    await write(index, writing, 3)
    # Another replica's recovery took the run for dead after INGEST_PENDING_TIMEOUT_SECONDS; it wrote 2 more.
    await versioning.recover(index, pending_timeout_seconds=0)
    await write(index, writing, 2)
    with pytest.raises(QdrantWriteError, match="2 of the 5 points"):
        await versioning.commit(index, FILE, TENANT, writing, written=5)
    assert await versions(index) == {(previous.version, LIVE_STATE): 2, (writing.version, PENDING_STATE): 2}

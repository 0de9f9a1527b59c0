"""The versioning protocol under every interleaving of two runs (and a few failures).

Points are written directly (no models): each run writes N points stamped with its seq, then
commits or discards in the order a scenario dictates.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator

import pytest
from qdrant_client import QdrantClient, models

from ingestion_service.adapters.qdrant_store import ChunkIndex
from ingestion_service.pipeline import versioning
from ingestion_service.pipeline.versioning import RunVersion
from ingestion_service.settings import Settings
from shared_contract import close_qdrant, load_settings, open_qdrant

FILE = "f1"
TENANT = "file-f1"


@pytest.fixture
def index() -> Iterator[tuple[ChunkIndex, QdrantClient]]:
    settings = load_settings(
        Settings, api_key="k" * 40, qdrant_uri=":memory:", qdrant_index=f"v_{uuid.uuid4().hex[:8]}"
    )
    client = open_qdrant(settings)
    client.create_collection(
        settings.qdrant_index,
        vectors_config={"text-dense": models.VectorParams(size=2, distance=models.Distance.COSINE)},
    )
    try:
        yield ChunkIndex(client, settings.qdrant_index), client
    finally:
        client.delete_collection(settings.qdrant_index)
        close_qdrant(client)


def write(client: QdrantClient, collection: str, run: RunVersion | None, count: int, tenant: str = TENANT) -> None:
    meta: dict[str, object] = {"file_id": FILE, "collection_name": tenant}
    if run is not None:
        meta |= {"ingest_seq": run.seq, "ingest_version": run.version}
    client.upsert(
        collection,
        points=[
            models.PointStruct(id=str(uuid.uuid4()), vector={"text-dense": [1.0, 0.0]}, payload={"meta": meta})
            for _ in range(count)
        ],
    )


def versions(client: QdrantClient, collection: str, tenant: str = TENANT) -> dict[str | None, int]:
    records, _ = client.scroll(collection, limit=1000, with_payload=True)
    found: dict[str | None, int] = {}
    for record in records:
        meta = (record.payload or {})["meta"]
        if meta["collection_name"] == tenant:
            found[meta.get("ingest_version")] = found.get(meta.get("ingest_version"), 0) + 1
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


def test_range_filters_see_a_real_seq_exactly(index: tuple[ChunkIndex, QdrantClient]) -> None:
    chunk_index, client = index
    run = RunVersion.new()
    write(client, chunk_index._collection, run, 2)
    assert chunk_index.count_newer(FILE, TENANT, run.seq) == 0
    assert chunk_index.count_newer(FILE, TENANT, run.seq - 1) == 2
    versioning.commit(chunk_index, FILE, TENANT, run)
    assert versions(client, chunk_index._collection) == {run.version: 2}


def test_commit_sweeps_older_versions_and_legacy_points(index: tuple[ChunkIndex, QdrantClient]) -> None:
    chunk_index, client = index
    collection = chunk_index._collection
    old = RunVersion.new(now_ns=1_000_000_000)
    new = RunVersion.new(now_ns=2_000_000_000)
    write(client, collection, None, 2)  # written by older tooling: no seq at all
    write(client, collection, old, 3)
    write(client, collection, new, 4)
    write(client, collection, old, 5, tenant="kb-other")  # another tenant is never touched
    result = versioning.commit(chunk_index, FILE, TENANT, new)
    assert not result.superseded
    assert versions(client, collection) == {new.version: 4}
    assert versions(client, collection, "kb-other") == {old.version: 5}


# Every order of the four steps (A write, A commit, B write, B commit) that keeps each run's
# write before its commit. B is the newer run; the end state must always be B's version only.
_STEPS = ["a_write", "a_commit", "b_write", "b_commit"]
_ORDERS = [
    order
    for order in itertools.permutations(_STEPS)
    if order.index("a_write") < order.index("a_commit") and order.index("b_write") < order.index("b_commit")
]


@pytest.mark.parametrize("order", _ORDERS, ids=["-".join(order) for order in _ORDERS])
def test_two_runs_converge_to_the_newest(index: tuple[ChunkIndex, QdrantClient], order: tuple[str, ...]) -> None:
    chunk_index, client = index
    collection = chunk_index._collection
    previous = RunVersion.new(now_ns=1_000_000_000)
    run_a = RunVersion.new(now_ns=2_000_000_000)
    run_b = RunVersion.new(now_ns=3_000_000_000)
    write(client, collection, previous, 2)
    outcomes = {}
    for step in order:
        run = run_a if step.startswith("a") else run_b
        if step.endswith("write"):
            write(client, collection, run, 3 if run is run_a else 4)
        else:
            outcomes[step] = versioning.commit(chunk_index, FILE, TENANT, run)
    assert versions(client, collection) == {run_b.version: 4}
    assert not outcomes["b_commit"].superseded
    # A stepped aside exactly when it could see B's points at its commit.
    assert outcomes["a_commit"].superseded == (order.index("b_write") < order.index("a_commit"))


def test_failed_run_removes_only_its_own_points(index: tuple[ChunkIndex, QdrantClient]) -> None:
    chunk_index, client = index
    collection = chunk_index._collection
    previous = RunVersion.new(now_ns=1_000_000_000)
    failing = RunVersion.new(now_ns=2_000_000_000)
    write(client, collection, previous, 2)
    write(client, collection, failing, 3)
    versioning.discard(chunk_index, FILE, TENANT, failing)
    assert versions(client, collection) == {previous.version: 2}


def test_newest_run_failing_leaves_the_prior_version(index: tuple[ChunkIndex, QdrantClient]) -> None:
    """Documented caveat: A saw B and stepped aside, then B failed: the file keeps the version before both."""
    chunk_index, client = index
    collection = chunk_index._collection
    previous = RunVersion.new(now_ns=1_000_000_000)
    run_a = RunVersion.new(now_ns=2_000_000_000)
    run_b = RunVersion.new(now_ns=3_000_000_000)
    write(client, collection, previous, 2)
    write(client, collection, run_a, 3)
    write(client, collection, run_b, 1)  # B fails mid-write
    assert versioning.commit(chunk_index, FILE, TENANT, run_a).superseded
    versioning.discard(chunk_index, FILE, TENANT, run_b)
    assert versions(client, collection) == {previous.version: 2}

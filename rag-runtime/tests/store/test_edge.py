"""The embedded adapter (qdrant-edge): what only a store in a directory of this process does.

Files on disk, persistence across close and reopen, durability of acknowledged writes across
kill -9, and the temporary store behind ``QDRANT_URI=':memory:'``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import qdrant_edge as edge
from qdrant_client import models

from rag_runtime.store import (
    STORE_IN_USE,
    ChunkPoint,
    EdgeStore,
    PointRecord,
    chunk_point,
    close_store,
    collection_spec,
    open_store,
    store_in_use,
    tenant_filter,
)
from rag_runtime.store import edge as edge_module
from rag_runtime.store.edge import search_threads
from rag_runtime.store.layout import CollectionSpec
from shared_contract import (
    CollectionMissingError,
    ContractSettings,
    ManifestMissingError,
    QdrantUnavailableError,
    load_settings,
)
from shared_contract.manifest import MANIFEST_METADATA_KEY

pytestmark = pytest.mark.anyio

DIM = 4


def directory_settings(root: Path, index: str = "edge_tests") -> ContractSettings:
    return load_settings(
        ContractSettings, qdrant_path=root, qdrant_index=index, embedding_model="contract-tests/tiny", embedding_dim=DIM
    )


def bare_spec(settings: ContractSettings) -> CollectionSpec:
    """The collection without its payload indexes: creating those takes seconds, and these tests
    are about the engine's files, not the indexes."""
    return dataclasses.replace(collection_spec(settings), payload_indexes=[])


def chunk(name: str, *, tenant: str = "tenant-a", text: str = "", dense: list[float] | None = None) -> ChunkPoint:
    return chunk_point(
        f"{tenant}/{name}",
        text,
        {"collection_name": tenant, "languages": ["nb"]},
        dense=dense or [1.0, 0.0, 0.0, 0.0],
        sparse=None,
    )


def open_edge(settings: ContractSettings) -> EdgeStore:
    store = open_store(settings)
    assert isinstance(store, EdgeStore)
    return store


async def test_a_directory_store_keeps_the_shard_and_the_manifest_under_collections(tmp_path: Path) -> None:
    settings = directory_settings(tmp_path / "qdrant", index="docs")
    store = open_edge(settings)
    try:
        assert store.kind == "embedded"
        assert store.collection == "docs"
        assert await store.create_collection(bare_spec(settings)) is True
        assert store.path == (tmp_path / "qdrant" / "collections" / "docs").resolve()
        manifest = json.loads((store.path / "manifest.json").read_text(encoding="utf-8"))
        assert manifest == collection_spec(settings).metadata[MANIFEST_METADATA_KEY] | {
            "created_at": manifest["created_at"]
        }
        assert (store.path / "shard").is_dir()
        assert await store.create_collection(bare_spec(settings)) is False
    finally:
        await close_store(store)


async def test_data_and_indexes_persist_across_close_and_reopen(tmp_path: Path) -> None:
    settings = directory_settings(tmp_path / "qdrant")
    store = open_edge(settings)
    kept = {"meta.collection_name", "meta.ingest_state", "lexical_no"}
    spec = collection_spec(settings)
    spec = dataclasses.replace(spec, payload_indexes=[i for i in spec.payload_indexes if i.field_name in kept])
    await store.create_collection(spec)
    await store.ensure_indexes(spec)
    manifest = await store.read_manifest()
    written = [chunk(f"c{i}", text="Hundene løp over broene" if i == 0 else f"Katt nummer {i}") for i in range(5)]
    await store.upsert(written)
    info = await store.info()
    await close_store(store)

    reopened = open_edge(settings)
    try:
        assert reopened is not store
        assert await reopened.read_manifest() == manifest
        assert await reopened.info() == info
        assert info.text_index_fields == {"lexical_no"}
        assert await reopened.count(None) == 5
        hits = await reopened.query(
            models.QueryRequest(
                query=models.TextQuery(text="hund bro"), using="lexical_no", filter=tenant_filter(["tenant-a"])
            )
        )
        assert [hit.point_id for hit in hits] == [written[0].point_id]
        assert hits[0].payload == dict(written[0].payload)
    finally:
        await close_store(reopened)


POOL_SIZES = textwrap.dedent(
    """
    import dataclasses, json, sys, time
    from pathlib import Path

    import anyio

    from shared_contract import ContractSettings, load_settings
    from rag_runtime.store import chunk_point, close_store, collection_spec, open_store


    def pool_threads():
        count = 0
        for task in Path("/proc/self/task").iterdir():
            try:
                name = (task / "comm").read_text()
            except FileNotFoundError:  # the thread ended while the tasks were listed
                continue
            count += name.startswith("edge-search")
        return count


    def settings(size):
        return load_settings(
            ContractSettings, qdrant_path=Path(sys.argv[1]), qdrant_index="pool",
            embedding_model="contract-tests/tiny", embedding_dim=4, qdrant_search_threads=size,
        )


    async def main():
        seen = []
        for size in (3, 1, 2):
            deadline = time.monotonic() + 5
            while pool_threads() and time.monotonic() < deadline:  # a dropped pool's threads wind down
                time.sleep(0.01)
            store = open_store(settings(size))
            if size == 3:
                await store.create_collection(
                    dataclasses.replace(collection_spec(settings(size)), payload_indexes=[])
                )
                await store.upsert(
                    [
                        chunk_point(f"t/{name}", "", {"collection_name": "t"}, dense=[1.0, 0.0, 0.0, 0.0], sparse=None)
                        for name in "ab"
                    ]
                )
            points = await store.count(None)
            deadline = time.monotonic() + 5
            while pool_threads() < size and time.monotonic() < deadline:  # the pool starts its threads
                time.sleep(0.01)
            seen.append([points, pool_threads()])
            await close_store(store)
        print(json.dumps(seen))


    anyio.run(main)
    """
)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads through /proc")
def test_the_search_pool_has_the_configured_size_on_create_and_on_every_load(tmp_path: Path) -> None:
    """In a process of its own, so no other test's store adds threads: the engine names its search
    threads ``edge-search-N``, and a shard is created with 3 then loaded with 1 and with 2."""
    result = subprocess.run(
        [sys.executable, "-c", POOL_SIZES, str(tmp_path / "qdrant")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    # [points, search threads] after each open: the data stays, the pool takes each size.
    assert json.loads(result.stdout) == [[2, 3], [2, 1], [2, 2]]


def test_zero_search_threads_leaves_one_cpu_to_the_rest_of_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    assert search_threads(0) == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    assert search_threads(0) == 1
    assert search_threads(5) == 5


KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    import qdrant_edge as edge

    shard = edge.EdgeShard.load(sys.argv[1])
    points = [
        edge.Point(f"00000000-0000-4000-8000-{i:012d}", {"text-dense": [1.0, float(i), 0.0, 0.0]}, {"n": i})
        for i in range(int(sys.argv[2]))
    ]
    shard.update(edge.UpdateOperation.upsert_points(points))
    print("ok", flush=True)
    time.sleep(60)
    """
)


async def test_acknowledged_writes_survive_kill_9(tmp_path: Path) -> None:
    """The engine itself: a process that acknowledged a batch and is then SIGKILLed (no flush, no
    close) leaves every point of that batch in the directory (its write-ahead log)."""
    settings = directory_settings(tmp_path / "qdrant")
    store = open_edge(settings)
    await store.create_collection(bare_spec(settings))
    shard_dir = store.path / "shard"
    await close_store(store)

    batch = 64
    writer = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(shard_dir), str(batch)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None
        line = writer.stdout.readline()
        assert line.strip() == "ok", writer.stderr.read() if writer.stderr else line
        writer.send_signal(signal.SIGKILL)
        assert writer.wait(timeout=10) == -signal.SIGKILL
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()

    reopened = open_edge(settings)
    try:
        assert await reopened.count(None) == batch
        page, _ = await reopened.scroll(None, limit=batch + 1)
        assert sorted(record.payload["n"] for record in page) == list(range(batch))
    finally:
        await close_store(reopened)


async def test_a_memory_store_is_private_and_removed_on_close() -> None:
    settings = load_settings(
        ContractSettings, qdrant_uri=":memory:", embedding_model="contract-tests/tiny", embedding_dim=DIM
    )
    first, second = open_edge(settings), open_edge(settings)
    try:
        assert first is not second
        await first.create_collection(bare_spec(settings))
        await first.upsert([chunk("c0")])
        assert await first.count(None) == 1
        assert await second.collection_exists() is False  # a store of its own
        directory = first.path
        assert directory.is_dir()
    finally:
        await close_store(first)
        await close_store(second)
    assert not directory.exists()


async def test_a_create_that_died_before_the_manifest_is_started_afresh(tmp_path: Path) -> None:
    settings = directory_settings(tmp_path / "qdrant")
    store = open_edge(settings)
    try:
        leftover = store.path / "shard"
        leftover.mkdir(parents=True)
        (leftover / "half-written").write_text("x", encoding="utf-8")
        assert await store.collection_exists() is False
        with pytest.raises(CollectionMissingError):
            await store.read_manifest()

        assert await store.create_collection(bare_spec(settings)) is True
        assert not (leftover / "half-written").exists()
        await store.upsert([chunk("c0")])
        assert await store.count(None) == 1
    finally:
        await close_store(store)


async def test_an_unreadable_manifest_is_a_missing_manifest(tmp_path: Path) -> None:
    settings = directory_settings(tmp_path / "qdrant")
    store = open_edge(settings)
    try:
        await store.create_collection(bare_spec(settings))
    finally:
        await close_store(store)
    (store.path / "manifest.json").write_text("{not json", encoding="utf-8")

    reopened = open_edge(settings)
    try:
        with pytest.raises(ManifestMissingError):
            await reopened.read_manifest()
    finally:
        await close_store(reopened)


async def test_a_shard_the_engine_cannot_open_is_unavailable(tmp_path: Path) -> None:
    settings = directory_settings(tmp_path / "qdrant")
    store = open_edge(settings)
    try:
        await store.create_collection(bare_spec(settings))
    finally:
        await close_store(store)
    for entry in sorted((store.path / "shard").rglob("*"), reverse=True):
        if entry.is_file():
            entry.unlink()
        else:
            entry.rmdir()
    (store.path / "shard" / "segments").write_text("not a directory", encoding="utf-8")

    reopened = open_edge(settings)
    try:
        with pytest.raises(QdrantUnavailableError):
            await reopened.count(None)
    finally:
        await close_store(reopened)


async def test_a_store_another_opener_holds_is_unavailable_and_says_it_is_in_use(tmp_path: Path) -> None:
    settings = directory_settings(tmp_path / "qdrant")
    holder = open_edge(settings)
    try:
        await holder.create_collection(bare_spec(settings))
        # A second opener of the directory (another process, as the factory shares one per process).
        second = EdgeStore(holder.path.parent.parent, settings.qdrant_index)
        with pytest.raises(QdrantUnavailableError, match=re.escape(f"embedded store at {holder.path} {STORE_IN_USE}")):
            await second.count(None)
        assert await holder.count(None) == 0
    finally:
        await close_store(holder)


async def test_a_store_is_in_use_while_open_and_free_once_closed(tmp_path: Path) -> None:
    settings = directory_settings(tmp_path / "qdrant")
    holder = open_edge(settings)
    assert not store_in_use(holder.path)  # nothing opened yet: no lock file
    await holder.create_collection(bare_spec(settings))

    assert store_in_use(holder.path)
    await close_store(holder)
    assert not store_in_use(holder.path)
    # Asking took no lock: the next opener gets the store.
    reopened = open_edge(settings)
    try:
        assert await reopened.count(None) == 0
    finally:
        await close_store(reopened)


async def test_a_refused_opener_never_reaches_the_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The engine's load opens the segments, applying and emptying their journals, before it finds the
    # WAL locked: a second process refused only there had emptied the first one's journals, whose next
    # flush failed ("tracker_journal.dat is shorter than expected").
    settings = directory_settings(tmp_path / "qdrant")
    holder = open_edge(settings)
    try:
        await holder.create_collection(bare_spec(settings))
        await holder.upsert([chunk("c1")])
        opened: list[str] = []

        class RecordingShard:
            @staticmethod
            def load(path: str, config: edge.EdgeConfig | None) -> edge.EdgeShard:
                opened.append(path)
                return edge.EdgeShard.load(path, config)

        engine = SimpleNamespace(**{**vars(edge), "EdgeShard": RecordingShard})
        monkeypatch.setattr(edge_module, "edge", engine)
        second = EdgeStore(holder.path.parent.parent, settings.qdrant_index)
        with pytest.raises(QdrantUnavailableError, match=re.escape(f"embedded store at {holder.path} {STORE_IN_USE}")):
            await second.count(None)
        await second.close()
        monkeypatch.undo()
        assert opened == []
        assert await holder.count(None) == 1
    finally:
        await close_store(holder)
    reopened = open_edge(settings)  # the lock went with the holder
    try:
        assert await reopened.count(None) == 1
    finally:
        await close_store(reopened)


async def test_optimize_keeps_every_point_and_the_ranking(tmp_path: Path) -> None:
    settings = directory_settings(tmp_path / "qdrant")
    store = open_edge(settings)
    try:
        await store.create_collection(bare_spec(settings))
        await store.upsert([chunk(f"c{i}", dense=[1.0, i / 10, 0.0, 0.0]) for i in range(20)])
        query = models.QueryRequest(query=[1.0, 0.0, 0.0, 0.0], using="text-dense", limit=3)
        before = [hit.point_id for hit in await store.query(query)]
        store.optimize()
        assert store.points_count() == 20
        assert [hit.point_id for hit in await store.query(query)] == before
    finally:
        await close_store(store)


async def test_writes_and_optimize_stop_with_a_typed_error_while_the_disk_is_short_of_room(tmp_path: Path) -> None:
    # A write into a full disk through the engine's memory mappings kills the process (SIGBUS); the
    # store refuses instead. "Short of room" is a floor above what the test disk has free.
    settings = directory_settings(tmp_path / "qdrant")
    store = open_edge(settings)
    await store.create_collection(bare_spec(settings))
    await store.upsert([chunk("kept")])
    await close_store(store)
    unreachable = shutil.disk_usage(tmp_path).free + 1024**4
    cramped = EdgeStore(settings.qdrant_path, settings.qdrant_index, min_free_bytes=unreachable)
    try:
        with pytest.raises(QdrantUnavailableError, match=r"upsert refused: \d+ MiB free on the disk of .*free space"):
            await cramped.upsert([chunk("new")])
        with pytest.raises(QdrantUnavailableError, match="optimize refused"):
            cramped.optimize()
        # Reads go on, and nothing of the refused write landed.
        assert await cramped.count(None) == 1
        [hit] = await cramped.query(models.QueryRequest(query=[1.0, 0.0, 0.0, 0.0], using="text-dense"))
        assert hit.payload["id"] == "tenant-a/kept"
    finally:
        await close_store(cramped)


async def test_opening_a_store_removes_the_half_built_segments_of_a_killed_optimize(tmp_path: Path) -> None:
    # An optimize killed mid-way (SIGTERM on `rag optimize`) leaves its segment builder in the
    # shard's temp_segments, which the engine never clears: here a copy of a real segment stands in.
    settings = directory_settings(tmp_path / "qdrant")
    store = open_edge(settings)
    await store.create_collection(bare_spec(settings))
    await store.upsert([chunk(f"c{i}") for i in range(3)])
    shard = store.path / "shard"
    await close_store(store)
    [segment, *_] = sorted(path for path in (shard / "segments").iterdir() if path.is_dir())
    leftover = shard / "temp_segments" / "segment_builder_killed"
    shutil.copytree(segment, leftover)

    reopened = open_edge(settings)
    try:
        assert await reopened.count(None) == 3
        assert not leftover.exists()
        assert list((shard / "temp_segments").iterdir()) == []
    finally:
        await close_store(reopened)


@dataclasses.dataclass(frozen=True)
class Int8Case:
    """7,000 random vectors of 384 floats: past the engine's indexing threshold, so optimize builds
    the graph and the int8 copies (3,493 of them were not). The query is near c0 and then c1."""

    vectors: np.ndarray
    query: np.ndarray
    cosines: dict[str, float]  # point id -> exact cosine to the query

    @classmethod
    def make(cls) -> Int8Case:
        vectors = np.random.default_rng(7).standard_normal((7000, 384)).astype(np.float32)
        query = vectors[0] + 0.5 * vectors[1]
        cosines = vectors @ query / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(query))
        return cls(vectors, query, {chunk(f"c{i}").point_id: float(cosine) for i, cosine in enumerate(cosines)})

    @staticmethod
    def settings(root: Path) -> ContractSettings:
        return load_settings(
            ContractSettings, qdrant_path=root, qdrant_index="quantized", embedding_model="t/384", embedding_dim=384
        )

    async def fill(self, store: EdgeStore, spec: CollectionSpec) -> None:
        await store.create_collection(spec)
        await store.ensure_indexes(spec)  # the tenant key's graphs: what a filtered search walks
        for start in range(0, len(self.vectors), 1000):
            await store.upsert([chunk(f"c{i}", dense=self.vectors[i].tolist()) for i in range(start, start + 1000)])

    async def search(self, store: EdgeStore, *, rescore: bool) -> list[PointRecord]:
        quantization = models.QuantizationSearchParams(rescore=rescore, oversampling=2.0 if rescore else None)
        request = models.QueryRequest(
            query=self.query.tolist(),
            using="text-dense",
            filter=tenant_filter(["tenant-a"]),
            params=models.SearchParams(quantization=quantization),
            limit=10,
        )
        return await store.query(request)

    def largest_error(self, hits: list[PointRecord]) -> float:
        """How far the hits' scores are from their exact cosines."""
        return max(abs((hit.score or 0.0) - self.cosines[hit.point_id]) for hit in hits)


async def test_an_optimized_store_searches_int8_copies_and_rescores_to_exact_cosines(tmp_path: Path) -> None:
    case = Int8Case.make()
    settings = Int8Case.settings(tmp_path / "qdrant")
    store = open_edge(settings)
    try:
        await case.fill(store, collection_spec(settings))
        store.optimize()

        approximate = await case.search(store, rescore=False)
        rescored = await case.search(store, rescore=True)

        # The layout gives text-dense int8 copies, which the graph search scores on: without
        # rescoring the scores are theirs, not the cosines.
        assert case.largest_error(approximate) > 1e-4
        # Rescored with the originals: the exact cosines, best first. The rest of random vectors sit
        # level (cosines ~0.15), where any graph search may order them otherwise than an exact scan.
        assert case.largest_error(rescored) < 1e-5
        assert [hit.score for hit in rescored] == sorted((hit.score for hit in rescored), reverse=True)
        assert [hit.point_id for hit in rescored[:2]] == [chunk("c0").point_id, chunk("c1").point_id]
    finally:
        await close_store(store)


async def test_optimize_gives_a_store_created_before_the_int8_copies_its_copies(tmp_path: Path) -> None:
    case = Int8Case.make()
    settings = Int8Case.settings(tmp_path / "qdrant")
    earlier_layout = dataclasses.replace(collection_spec(settings), dense_int8_copies=False)
    store = open_edge(settings)
    try:
        await case.fill(store, earlier_layout)
    finally:
        await close_store(store)
    # Optimized as such stores were: graphs and no copies (the engine's own call, nothing restated).
    shard = edge.EdgeShard.load(str(store.path / "shard"))
    try:
        assert shard.optimize() is True
    finally:
        shard.close()

    old = open_edge(settings)
    try:
        assert case.largest_error(await case.search(old, rescore=False)) < 1e-5  # the originals: no copies
        assert old.optimize() is True
    finally:
        await close_store(old)

    upgraded = open_edge(settings)  # the copies were written, not just held by the process that built them
    try:
        assert case.largest_error(await case.search(upgraded, rescore=False)) > 1e-4
        rescored = await case.search(upgraded, rescore=True)
        assert case.largest_error(rescored) < 1e-5
        assert [hit.point_id for hit in rescored[:2]] == [chunk("c0").point_id, chunk("c1").point_id]
        assert await upgraded.count(None) == len(case.vectors)
        assert upgraded.optimize() is False  # already the layout: nothing rebuilt
    finally:
        await close_store(upgraded)


async def test_optimize_refuses_a_shard_without_the_vectors_its_manifest_names_and_keeps_it(tmp_path: Path) -> None:
    settings = directory_settings(tmp_path / "qdrant")
    store = open_edge(settings)
    try:
        await store.create_collection(bare_spec(settings))
        await store.upsert([chunk(f"c{i}", dense=[1.0, i / 10, 0.0, 0.0]) for i in range(3)])
    finally:
        await close_store(store)
    manifest_path = store.path / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest_path.write_text(
        json.dumps(manifest | {"multilingual_model": "intfloat/multilingual-e5-small", "multilingual_dim": DIM}),
        encoding="utf-8",
    )

    mislabelled = open_edge(settings)
    try:
        with pytest.raises(QdrantUnavailableError, match="could not be reloaded with the vectors its manifest names"):
            mislabelled.optimize()
        assert await mislabelled.count(None) == 3
    finally:
        await close_store(mislabelled)

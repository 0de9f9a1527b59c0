"""Scale row: /search on a 50k-chunk tenant in the embedded engine, plus store load time and RSS.

    python -m benchmarks.scale                      # needs the SciFact store built by benchmarks.speed/quality

The SciFact chunks the ingest stored (10.4k, real vectors and payloads) are copied N times into a
fresh store under one tenant, each copy with new point ids and file ids and its content marked (a
search would drop repeated texts and fetch again), until the tenant holds ``--chunks`` points. Then `rag dev` starts on that store: time to ready, the engine's own open
time, idle RSS with the models loaded, and /search latency (dense and hybrid, k=10, SciFact test
queries) at concurrency 1 and 4. No ingestion runs here: the copies skip the models on purpose
(ingest throughput is measured by benchmarks.speed).

    python -m benchmarks.scale --optimize           # the same after `rag optimize` (graphs, int8 copies)

With ``--optimize`` the built store is optimized before `rag dev` starts on it, as an operator runs
`rag optimize`: the report gives the seconds it took. Without it the legs scan the appendable segment.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import shlex
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from benchmarks.beir import DEFAULT_DATA_DIR, load_dataset
from benchmarks.configs import CONFIG_ENV
from benchmarks.quality import RESULTS_DIR, WORK_DIR, machine, workspace
from benchmarks.speed import contract_settings, load_test
from benchmarks.stack import running_stack

if TYPE_CHECKING:
    from rag_runtime.store import ChunkStore, PointRecord

TENANT = "bench-scale"
_BATCH = 256


async def read_points(source: Path) -> list[PointRecord]:
    """Every point of the store at ``source``, with its vectors."""
    from rag_runtime.store import close_store, open_store

    store = open_store(contract_settings(source))
    points: list[PointRecord] = []
    try:
        offset: str | None = None
        while True:
            page, offset = await store.scroll(None, limit=1024, offset=offset, with_vectors=True)
            points.extend(page)
            if offset is None:
                break
    finally:
        await close_store(store)
    return points


def content_of(record: PointRecord, copy: int) -> str:
    """The chunk's text, in copy ``copy``: the first copy keeps it, later ones end in a copy mark."""
    content = str(record.payload.get("content", ""))
    return content if copy == 0 else f"{content}\n[copy {copy}]"


async def copy_points(
    store: ChunkStore,
    originals: Sequence[PointRecord],
    chunks: int,
    *,
    tenant_of: Callable[[int], str],
    dense_of: Callable[[list[float]], list[float]] = lambda dense: dense,
) -> int:
    """Write copies of ``originals`` into ``store`` until it holds ``chunks``; returns how many were written.

    Copy ``n`` gets new point ids, file ids ``<file_id>-copy<n>``, the tenant ``tenant_of(n)`` and
    each dense vector through ``dense_of``. From the second copy on the content ends in a copy mark:
    search drops hits whose content repeats an earlier hit's and fetches again, so copies with equal
    content would make every search run three times (a store of 50,000 distinct chunks does not).
    """
    from rag_runtime.store import ChunkPoint

    written = 0
    copy = 0
    while written < chunks:
        batch: list[ChunkPoint] = []
        for record in originals:
            if written + len(batch) >= chunks:
                break
            assert record.vectors is not None
            dense = record.vectors["text-dense"]
            assert isinstance(dense, list)
            meta = {
                **record.payload["meta"],
                "collection_name": tenant_of(copy),
                # Written committed, as a publish leaves them (contract 3.0).
                "live_in": tenant_of(copy),
                "file_id": f"{record.payload['meta']['file_id']}-copy{copy}",
            }
            sparse = record.vectors.get("text-sparse")
            batch.append(
                ChunkPoint(
                    point_id=str(uuid.uuid4()),
                    dense=dense_of(dense),
                    sparse=None if isinstance(sparse, list) else sparse,
                    payload={**record.payload, "content": content_of(record, copy), "meta": meta},
                )
            )
            if len(batch) == _BATCH:
                await store.upsert(batch)
                written += len(batch)
                batch = []
        if batch:
            await store.upsert(batch)
            written += len(batch)
        copy += 1
    return written


async def build(source: Path, target: Path, chunks: int) -> dict[str, Any]:
    """Copy the source store's points into ``target`` under one tenant until it holds ``chunks``."""
    from rag_runtime.store import bootstrap_collection, close_store, open_store

    originals = await read_points(source)
    settings = contract_settings(target)
    store = open_store(settings)
    started = time.perf_counter()
    try:
        await bootstrap_collection(store, settings)
        written = await copy_points(store, originals, chunks, tenant_of=lambda _copy: TENANT)
    finally:
        await close_store(store)
    return {"source_chunks": len(originals), "chunks": written, "build_s": round(time.perf_counter() - started, 1)}


def optimize(path: Path) -> dict[str, Any]:
    """What `rag optimize` does to the store at ``path``, timed: graphs, int8 copies, merged segments."""
    from rag_runtime.store import EdgeStore, close_store, open_store

    async def optimized() -> dict[str, Any]:
        store = open_store(contract_settings(path))
        try:
            assert isinstance(store, EdgeStore)
            await store.count(None)  # opens the shard, so the time below is the optimization alone
            started = time.perf_counter()
            changed = store.optimize()
            return {"changed": changed, "optimize_s": round(time.perf_counter() - started, 1)}
        finally:
            await close_store(store)

    return asyncio.run(optimized())


def open_time(path: Path) -> float:
    """Seconds for the engine to open the store and answer a count."""

    async def opened() -> float:
        from rag_runtime.store import close_store, open_store

        started = time.perf_counter()
        store = open_store(contract_settings(path))
        await store.count(None)
        seconds = time.perf_counter() - started
        await close_store(store)
        return seconds

    return asyncio.run(opened())


def run(args: argparse.Namespace) -> dict[str, Any]:
    source = workspace("scifact", args.work_dir).qdrant
    target = args.work_dir / "scale" / "qdrant"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    report: dict[str, Any] = {"tenant": TENANT, "build": asyncio.run(build(source, target, args.chunks))}
    print(f"  built {report['build']}", flush=True)
    if args.optimize:
        report["optimize"] = optimize(target)
        print(f"  optimized {report['optimize']}", flush=True)
    report["engine_open_s"] = round(open_time(target), 3)
    queries = list(load_dataset("scifact", "test", args.data_dir).split_queries().values())
    for mode in ("dense", "hybrid"):
        started = time.perf_counter()
        with running_stack(target, CONFIG_ENV[mode], log_path=target.parent / "stack.log") as stack:
            ready_s = time.perf_counter() - started
            assert stack.pid is not None
            time.sleep(3)  # idle: models loaded, nothing running
            idle_rss = psutil.Process(stack.pid).memory_info().rss / 2**20
            levels = {}
            for concurrency in args.concurrency:
                summary = asyncio.run(load_test(stack, TENANT, queries, concurrency, args.requests))
                levels[f"c{concurrency}"] = summary
                print(f"  {mode} c={concurrency}: {summary}", flush=True)
        report[mode] = {"ready_s": round(ready_s, 1), "idle_rss_mib": round(idle_rss, 1), **levels}
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scale", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--optimize", action="store_true", help="optimize the store first, as `rag optimize` does")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR)
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    report = {
        "command": "python -m benchmarks.scale " + shlex.join(sys.argv[1:] if argv is None else list(argv)),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        **run(args),
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}-scale.json"
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

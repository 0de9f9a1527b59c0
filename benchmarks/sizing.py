"""Sizing: resident memory and disk per stored chunk in Qdrant's engine (docs/deployment.md).

    python -m benchmarks.sizing --seed-docs 400 --chunks 20000,100000

1. Seed: `rag dev` ingests the first ``--seed-docs`` SciFact abstracts through the real HTTP API
   (extract, chunk, dense + BM42, BM25 text index), so payloads, vectors and indexes are what the
   services write.
2. Grow: for each N in ``--chunks`` the seed's points are copied (new point ids, file ids spread
   over ``--tenants`` tenants, the dense vector jittered so the HNSW graph is not built over
   duplicates) into a fresh store until it holds N points, and the engine builds its HNSW graphs
   (``optimize``), as a server's optimizer does once a segment passes its indexing threshold.
3. Measure, each in a fresh process holding no models: RSS after imports, after opening the store,
   and after dense and sparse queries filtered to every tenant in turn (so every tenant's vectors and
   graph are touched); and the store's size on disk (allocated blocks).

The engine is qdrant-edge, Qdrant's own segment code run in-process; a Qdrant server holds the
same structures (vectors and HNSW in RAM by default) plus its own fixed overhead, so the slope
between two sizes (bytes per chunk) is the number to plan with. No model hub is needed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

from benchmarks.beir import DEFAULT_DATA_DIR, load_dataset
from benchmarks.client import ServiceClient
from benchmarks.ingest import ingest_docs
from benchmarks.quality import WORK_DIR
from benchmarks.scale import copy_points, read_points
from benchmarks.speed import contract_settings
from benchmarks.stack import running_stack

SEED_TENANT = "sizing-seed"
_JITTER = 0.02


def _du(path: Path) -> int:
    """Bytes allocated on disk (preallocated, still sparse files count only what they hold)."""
    return sum(item.stat().st_blocks * 512 for item in path.rglob("*") if item.is_file())


def seed(store_dir: Path, docs: int, data_dir: Path) -> dict[str, Any]:
    """Ingest the first ``docs`` SciFact documents into an empty store through `rag dev`."""
    if store_dir.exists():
        shutil.rmtree(store_dir)
    corpus = load_dataset("scifact", "test", data_dir).corpus[:docs]
    with running_stack(store_dir, {}, log_path=store_dir.parent / "seed.log") as stack:

        async def run() -> dict[str, object]:
            async with ServiceClient(
                stack.ingestion_url, stack.retrieval_url, stack.ingestion_key, stack.retrieval_key
            ) as client:
                stats = await ingest_docs(
                    client,
                    corpus,
                    prefix="sizing",
                    collection_name=SEED_TENANT,
                    done_path=store_dir.parent / "seed.done",
                    concurrency=2,
                )
            return stats.as_dict()

        (store_dir.parent / "seed.done").unlink(missing_ok=True)
        return asyncio.run(run())


async def grow(source: Path, target: Path, chunks: int, tenants: int) -> dict[str, Any]:
    """Copy the seed's points into ``target`` until it holds ``chunks``, then build the HNSW graphs."""
    from rag_runtime.store import bootstrap_collection, close_store, open_store
    from rag_runtime.store.edge import EdgeStore

    originals = await read_points(source)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    settings = contract_settings(target)
    store = open_store(settings)
    rng = random.Random(7)

    def jittered(dense: list[float]) -> list[float]:
        # Copies of one vector would make a degenerate graph: each copy moves a little, stays unit length.
        moved = [float(x) + rng.gauss(0.0, _JITTER) for x in dense]
        norm = sum(x * x for x in moved) ** 0.5
        return [x / norm for x in moved]

    started = time.perf_counter()
    try:
        await bootstrap_collection(store, settings)
        written = await copy_points(
            store, originals, chunks, tenant_of=lambda copy: f"tenant-{copy % tenants}", dense_of=jittered
        )
        build_s = time.perf_counter() - started
        assert isinstance(store, EdgeStore)
        started = time.perf_counter()
        store.optimize()
        optimize_s = time.perf_counter() - started
    finally:
        await close_store(store)
    return {
        "seed_chunks": len(originals),
        "chunks": written,
        "tenants": tenants,
        "build_s": round(build_s, 1),
        "optimize_s": round(optimize_s, 1),
    }


async def _probe(path: Path) -> dict[str, Any]:
    """In this process: RSS before and after opening the store and querying every tenant."""
    from qdrant_client import models

    from rag_runtime.embedding.types import SparseVectorData
    from rag_runtime.store import close_store, open_store
    from shared_contract.schema import DENSE_VECTOR, SPARSE_VECTOR

    process = psutil.Process()
    before = process.memory_info().rss
    store = open_store(contract_settings(path))
    try:
        total = await store.count(None)
        opened = process.memory_info().rss
        sample, _ = await store.scroll(None, limit=5, offset=None, with_vectors=True)
        tenants = [str(facet.value) for facet in await store.facet("meta.collection_name", None, limit=10_000)]
        # Every tenant's vectors, graph and indexes touched: what a server serving all tenants holds.
        for tenant in tenants:
            selector = models.Filter(
                must=[models.FieldCondition(key="meta.collection_name", match=models.MatchValue(value=tenant))]
            )
            for record in sample:
                assert record.vectors is not None
                dense = record.vectors["text-dense"]
                sparse = record.vectors.get("text-sparse")
                await store.query(models.QueryRequest(query=dense, using=DENSE_VECTOR, filter=selector, limit=10))
                if isinstance(sparse, SparseVectorData):
                    query = models.SparseVector(indices=list(sparse.indices), values=list(sparse.values))
                    await store.query(models.QueryRequest(query=query, using=SPARSE_VECTOR, filter=selector, limit=10))
        after = process.memory_info().rss
    finally:
        await close_store(store)
    return {
        "points": total,
        "tenants_queried": len(tenants),
        "rss_before_open_mib": before / 2**20,
        "rss_after_open_mib": opened / 2**20,
        "rss_open_mib": after / 2**20,
    }


def measure(path: Path) -> dict[str, Any]:
    """RSS of a fresh process that opens ``path`` (no models loaded), and the store's bytes on disk."""
    output = subprocess.run(
        [sys.executable, "-m", "benchmarks.sizing", "--probe", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    probe: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    probe["store_delta_mib"] = probe["rss_open_mib"] - probe["rss_before_open_mib"]
    probe["disk_mib"] = _du(path) / 2**20
    return {key: round(value, 1) if isinstance(value, float) else value for key, value in probe.items()}


def _per_chunk(report: dict[str, Any]) -> None:
    """The slope between the smallest and the largest store: bytes per chunk, chunks per GiB."""
    sizes = report["sizes"]
    if len(sizes) < 2:
        return
    small, large = sizes[0]["measure"], sizes[-1]["measure"]
    points = large["points"] - small["points"]
    rss = (large["store_delta_mib"] - small["store_delta_mib"]) * 2**20
    disk = (large["disk_mib"] - small["disk_mib"]) * 2**20
    report["per_chunk"] = {
        "rss_bytes": round(rss / points),
        "disk_bytes": round(disk / points),
        "chunks_per_gib_rss": round(points * 2**30 / rss) if rss > 0 else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.sizing", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed-docs", type=int, default=400)
    parser.add_argument("--chunks", default="20000,100000", help="comma-separated store sizes")
    parser.add_argument("--tenants", type=int, default=50)
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR / "sizing")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--probe", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--measure-only", action="store_true", help="re-measure stores built by an earlier run")
    args = parser.parse_args(argv)
    if args.probe is not None:
        print(json.dumps(asyncio.run(_probe(args.probe))))
        return 0
    sizes = [int(part) for part in args.chunks.split(",") if part.strip()]
    report: dict[str, Any] = {"sizes": []}
    if args.measure_only:
        report["sizes"] = [{"measure": measure(args.work_dir / f"n{n}" / "qdrant")} for n in sizes]
        _per_chunk(report)
        print(json.dumps(report, indent=2))
        return 0
    source = args.work_dir / "seed" / "qdrant"
    report["seed"] = seed(source, args.seed_docs, args.data_dir)
    print(json.dumps(report["seed"]), flush=True)
    for chunks in sizes:
        target = args.work_dir / f"n{chunks}" / "qdrant"
        row = {"grow": asyncio.run(grow(source, target, chunks, args.tenants)), "measure": measure(target)}
        report["sizes"].append(row)
        print(json.dumps(row), flush=True)
    _per_chunk(report)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

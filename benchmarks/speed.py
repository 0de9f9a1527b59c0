"""Ingestion throughput, search latency and memory through the real HTTP APIs, as ratios in one run.

    python -m benchmarks.speed                         # SciFact, stages at 1000 docs and the full corpus
    python -m benchmarks.speed --stages 200 --requests 50 --embed-sample 64   # a quick run

The machine is shared and noisy, so every figure that matters is set beside its reference from
the same run: HTTP ingestion chunks/s against raw in-process embedding of the same chunks (fused
dense+sparse pass and two passes), and search latency against in-process query embedding time.

Starts from an EMPTY store at benchmarks/.work/<dataset>/ (it times the ingest) and leaves the full
store there for benchmarks.quality to reuse. Both services run in one `rag dev` process on one
embedded Qdrant store, so "peak RSS" is that process: ingestion and retrieval together.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import os
import random
import shlex
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import psutil

from benchmarks.beir import DEFAULT_DATA_DIR, REPO_ROOT, BeirDoc, load_dataset
from benchmarks.client import BenchmarkHTTPError, ServiceClient
from benchmarks.configs import CONFIG_ENV, rerank_env
from benchmarks.ingest import ingest_docs, print_progress
from benchmarks.quality import RESULTS_DIR, WORK_DIR, Workspace, collection_for, machine, workspace
from benchmarks.rerank_server import RerankServer
from benchmarks.rss import PeakRss
from benchmarks.stack import Stack, running_stack

CONCURRENCY = (1, 4, 16)
MODES = ("dense", "hybrid", "hybrid+rerank")
LATENCY_K = 10


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of already sorted values."""
    if not sorted_values:
        return float("nan")
    index = max(0, min(len(sorted_values) - 1, math.ceil(q / 100 * len(sorted_values)) - 1))
    return sorted_values[index]


def latency_summary(seconds: Sequence[float], wall: float) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "requests": len(ordered),
        "p50_ms": round(percentile(ordered, 50) * 1000, 2),
        "p95_ms": round(percentile(ordered, 95) * 1000, 2),
        "p99_ms": round(percentile(ordered, 99) * 1000, 2),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 2) if ordered else float("nan"),
        "rps": round(len(ordered) / wall, 2) if wall else float("nan"),
    }


async def load_test(
    stack: Stack, collection: str, queries: list[str], concurrency: int, requests: int
) -> dict[str, float]:
    """`requests` searches, `concurrency` in flight, after a short warm-up.

    At concurrency 1 every search is also sent through httpx's async client, the two alternating
    query by query: ``httpx_p50_ms`` is what a client as heavy as httpx sees of the same service.
    """
    async with ServiceClient(
        stack.ingestion_url, stack.retrieval_url, stack.ingestion_key, stack.retrieval_key
    ) as client:
        for text in queries[:5]:
            await client.search(text, [collection], LATENCY_K)
        if concurrency == 1:
            return await _paired_with_httpx(client, stack, collection, queries, requests)
        latencies: list[float] = []
        counter = iter(range(requests))

        async def worker() -> None:
            for i in counter:
                result = await client.search(queries[i % len(queries)], [collection], LATENCY_K)
                latencies.append(result.seconds)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    return latency_summary(latencies, wall)


async def _paired_with_httpx(
    client: ServiceClient, stack: Stack, collection: str, queries: list[str], requests: int
) -> dict[str, float]:
    """c=1: each query through the lean client and through httpx, the order switching by turns."""
    lean: list[float] = []
    heavy: list[float] = []
    async with httpx.AsyncClient(
        base_url=stack.retrieval_url, headers={"Authorization": f"Bearer {stack.retrieval_key}"}, timeout=600.0
    ) as reference:

        async def through_httpx(text: str) -> None:
            body = {"queries": [text], "collection_names": [collection], "k": LATENCY_K}
            started = time.perf_counter()
            response = await reference.post("/search", json=body)
            response.json()
            heavy.append(time.perf_counter() - started)
            if response.status_code != 200:
                raise BenchmarkHTTPError("search", response.status_code, response.text)

        for text in queries[:5]:
            await through_httpx(text)
        heavy.clear()
        for i in range(requests):
            text = queries[i % len(queries)]
            if i % 2:
                await through_httpx(text)
            lean.append((await client.search(text, [collection], LATENCY_K)).seconds)
            if not i % 2:
                await through_httpx(text)
    # One search at a time: the lean client's throughput is one over its mean latency.
    summary = latency_summary(lean, sum(lean))
    ordered = sorted(heavy)
    summary["httpx_p50_ms"] = round(percentile(ordered, 50) * 1000, 2)
    summary["httpx_p95_ms"] = round(percentile(ordered, 95) * 1000, 2)
    return summary


def contract_settings(qdrant_path: Path | None = None) -> Any:
    from shared_contract import ContractSettings, load_settings

    overrides: dict[str, Any] = {
        "local_models_dir": Path(os.environ.get("LOCAL_MODELS_DIR", REPO_ROOT / ".cache" / "models"))
    }
    if qdrant_path is not None:
        overrides["qdrant_uri"] = None
        overrides["qdrant_path"] = qdrant_path
    return load_settings(ContractSettings, **overrides)


def query_embedding_times(queries: list[str], n: int = 100) -> dict[str, Any]:
    """In-process query embedding: dense alone (dense search), dense+sparse (hybrid), the same on the
    int8 query copy with one thread (what the service runs by default), and the multilingual model's
    (hybrid over chunks outside the dense model's languages, run beside it)."""
    from rag_runtime.embedding import ContractEmbedder

    embedder = ContractEmbedder(contract_settings())
    embedder.warm_up()
    runs: list[tuple[str, Callable[[str], object]]] = [
        ("dense", lambda text: embedder.embed_query(text, with_sparse=False)),
        ("dense+sparse", lambda text: embedder.embed_query(text, with_sparse=True)),
    ]
    if embedder.settings.embedding_provider == "fastembed":
        # The service's default query path (QUERY_EMBEDDING_QUANTIZATION=auto): the int8 copy.
        int8 = ContractEmbedder(embedder.settings, query_int8=True, dense_threads=1)
        int8.warm_up()
        runs.append(("dense_int8", lambda text: int8.embed_query(text, with_sparse=False)))
        runs.append(("dense_int8+sparse", lambda text: int8.embed_query(text, with_sparse=True)))
    multilingual = embedder.multilingual
    if multilingual is not None:
        multilingual.warm_up()
        runs.append(("multilingual", multilingual.embed_query))
    out: dict[str, Any] = {}
    for name, embed in runs:
        times: list[float] = []
        for text in queries[:n]:
            started = time.perf_counter()
            embed(text)
            times.append(time.perf_counter() - started)
        ordered = sorted(times)
        out[name] = {
            "p50_ms": round(percentile(ordered, 50) * 1000, 2),
            "p95_ms": round(percentile(ordered, 95) * 1000, 2),
        }
    return out


def stored_chunks(qdrant_path: Path, sample: int, seed: int = 13) -> list[tuple[str, str]]:
    """A seeded sample of the chunks the ingest wrote, as (text, lexical language) (the store must
    not be open elsewhere)."""
    return asyncio.run(_stored_chunks(qdrant_path, sample, seed))


async def _stored_chunks(qdrant_path: Path, sample: int, seed: int) -> list[tuple[str, str]]:
    from rag_runtime.store import close_store, open_store
    from shared_contract import PAYLOAD_CONTENT, PAYLOAD_META, MetaKey, meta_path

    store = open_store(contract_settings(qdrant_path))
    chunks: list[tuple[str, str]] = []
    keys = [PAYLOAD_CONTENT, meta_path(MetaKey.LEXICAL_LANGUAGE)]
    try:
        offset: str | None = None
        while True:
            points, offset = await store.scroll(None, limit=512, offset=offset, with_payload=keys)
            for point in points:
                meta = point.payload.get(PAYLOAD_META) or {}
                chunks.append((str(point.payload.get(PAYLOAD_CONTENT, "")), str(meta.get(MetaKey.LEXICAL_LANGUAGE))))
            if offset is None:
                break
    finally:
        await close_store(store)
    random.Random(seed).shuffle(chunks)
    return chunks[:sample]


def raw_embedding(chunks: list[tuple[str, str]]) -> dict[str, Any]:
    """Chunks/s of in-process embedding: dense only, fused dense+sparse, dense then sparse, and (when
    some chunks are outside the dense model's languages) fused plus their multilingual vectors."""
    from rag_runtime.embedding import ContractEmbedder

    texts = [text for text, _ in chunks]
    settings = contract_settings()
    out: dict[str, Any] = {"chunks": len(texts)}
    fused = ContractEmbedder(settings)
    fused.warm_up()
    two_pass = ContractEmbedder(settings, allow_fused=False)
    two_pass.warm_up()
    out["fused_available"] = fused.fused
    for name, embedder, with_sparse in (
        ("dense_only", fused, False),
        ("dense+sparse_fused", fused, True),
        ("dense+sparse_two_passes", two_pass, True),
    ):
        started = time.perf_counter()
        embedder.embed_documents(texts, with_sparse=with_sparse)
        seconds = time.perf_counter() - started
        out[name] = {"seconds": round(seconds, 2), "chunks_per_s": round(len(texts) / seconds, 2)}
    multilingual = fused.multilingual
    other = [text for text, language in chunks if multilingual is not None and not multilingual.covers(language)]
    if multilingual is not None and other:
        multilingual.warm_up()
        started = time.perf_counter()
        multilingual.embed_documents(other)
        seconds = out["dense+sparse_fused"]["seconds"] + time.perf_counter() - started
        out["multilingual_chunks"] = len(other)
        out["dense+sparse_fused+multilingual"] = {
            "seconds": round(seconds, 2),
            "chunks_per_s": round(len(texts) / seconds, 2),
        }
    return out


def pipeline_efficiency(http_chunks_per_s: float, raw: dict[str, Any]) -> float:
    """HTTP ingest throughput over the raw throughput of every vector the ingest computes."""
    every_vector = raw.get("dense+sparse_fused+multilingual") or raw["dense+sparse_fused"]
    return round(http_chunks_per_s / float(every_vector["chunks_per_s"]), 3)


def search_stage(ws: Workspace, dataset: str, queries: list[str], args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with RerankServer(delay_s=args.rerank_delay) as reranker:
        envs = {"dense": CONFIG_ENV["dense"], "hybrid": CONFIG_ENV["hybrid"], "hybrid+rerank": rerank_env(reranker.url)}
        for mode in args.modes:
            with running_stack(ws.qdrant, envs[mode], log_path=ws.log) as stack:
                results[mode] = {}
                if stack.pid is not None:
                    time.sleep(3)  # idle: models loaded, store open, no request running
                    results[mode]["idle_rss_mib"] = round(psutil.Process(stack.pid).memory_info().rss / 2**20, 1)
                for concurrency in args.concurrency:
                    summary = asyncio.run(
                        load_test(stack, collection_for(dataset), queries, concurrency, args.requests)
                    )
                    results[mode][f"c{concurrency}"] = summary
                    httpx_seen = (
                        f"  (httpx client: p50 {summary['httpx_p50_ms']:.1f} ms)" if "httpx_p50_ms" in summary else ""
                    )
                    print(
                        f"    {mode:<14} c={concurrency:<3} p50 {summary['p50_ms']:7.1f} ms  p95 {summary['p95_ms']:7.1f}  "
                        f"p99 {summary['p99_ms']:7.1f}  {summary['rps']:6.1f} req/s{httpx_seen}",
                        flush=True,
                    )
        results["rerank_server"] = {
            "calls": reranker.calls,
            "documents": reranker.documents,
            "delay_s": args.rerank_delay,
        }
    return results


async def timed_ingest(
    stack: Stack, docs: Sequence[BeirDoc], ws: Workspace, args: argparse.Namespace
) -> dict[str, Any]:
    async with ServiceClient(
        stack.ingestion_url, stack.retrieval_url, stack.ingestion_key, stack.retrieval_key
    ) as client:
        stats = await ingest_docs(
            client,
            docs,
            prefix=args.dataset,
            collection_name=collection_for(args.dataset),
            done_path=ws.done,
            concurrency=args.ingest_concurrency,
            progress=print_progress(500),
        )
    out = stats.as_dict()
    latencies = sorted(stats.latencies)
    out["request_p50_s"] = round(percentile(latencies, 50), 3) if latencies else None
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    dataset = load_dataset(args.dataset, "test", args.data_dir)
    ws = workspace(args.dataset, args.work_dir)
    if args.fresh and ws.root.exists():
        shutil.rmtree(ws.root)
    stages = sorted({min(len(dataset.corpus), int(s)) if s != "all" else len(dataset.corpus) for s in args.stages})
    queries = list(dataset.split_queries().values())
    report: dict[str, Any] = {"stages": []}
    print("query embedding (in-process)", flush=True)
    report["query_embedding"] = query_embedding_times(queries)
    print(f"  {report['query_embedding']}", flush=True)
    for size in stages:
        docs = dataset.corpus[:size]
        stage: dict[str, Any] = {"docs_total": size}
        print(f"stage {size} docs: ingest (concurrency {args.ingest_concurrency})", flush=True)
        with running_stack(ws.qdrant, CONFIG_ENV["hybrid"], log_path=ws.log) as stack:
            assert stack.pid is not None, "speed needs a stack it starts itself (unset BENCH_*_URL)"
            with PeakRss(stack.pid) as rss:
                stage["ingest"] = asyncio.run(timed_ingest(stack, docs, ws, args))
            stage["ingest"]["rss_start_mib"] = round(rss.start_mib, 1)
            stage["ingest"]["rss_peak_mib"] = round(rss.peak_mib, 1)
        print(f"  {stage['ingest']}", flush=True)
        if size == stages[0] and args.embed_sample > 0:
            chunks = stored_chunks(ws.qdrant, args.embed_sample)
            print(f"  raw embedding of {len(chunks)} stored chunks (in-process)", flush=True)
            raw = raw_embedding(chunks)
            raw["pipeline_efficiency"] = pipeline_efficiency(stage["ingest"]["chunks_per_s"], raw)
            raw["fused_speedup_over_two_passes"] = round(
                raw["dense+sparse_fused"]["chunks_per_s"] / raw["dense+sparse_two_passes"]["chunks_per_s"], 3
            )
            stage["raw_embedding"] = raw
            print(f"  {raw}", flush=True)
        print(f"  search (k={LATENCY_K}, {args.requests} requests per level)", flush=True)
        stage["search"] = search_stage(ws, args.dataset, queries, args)
        report["stages"].append(stage)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.speed", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="scifact")
    parser.add_argument(
        "--stages", default="1000,all", help="collection sizes to measure at, ascending (default 1000,all)"
    )
    parser.add_argument("--requests", type=int, default=200, help="searches per mode and concurrency level")
    parser.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--ingest-concurrency", type=int, default=4)
    parser.add_argument("--embed-sample", type=int, default=400, help="stored chunks to embed in-process (0: skip)")
    parser.add_argument("--rerank-delay", type=float, default=0.0, help="seconds the scripted reranker sleeps per call")
    parser.add_argument("--no-fresh", dest="fresh", action="store_false", help="keep an existing store (resume)")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR)
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    args.stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(args.modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; choose from {MODES}")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    started = time.perf_counter()
    report = run(args)
    report = {
        "command": "python -m benchmarks.speed " + shlex.join(sys.argv[1:] if argv is None else list(argv)),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "dataset": args.dataset,
        "wall_s": round(time.perf_counter() - started, 1),
        "note": "one `rag dev` process hosts both services on one embedded store: RSS is both together",
        **report,
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"{stamp}-speed-{args.dataset}.json"
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

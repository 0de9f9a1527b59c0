"""Retrieval quality through the real HTTP APIs: nDCG@10, Recall@100, MRR@10 on BEIR datasets.

    python -m benchmarks.quality --dataset scifact --split test --configs dense,sparse,hybrid,tuned
    python -m benchmarks.quality --dataset all                      # SciFact test + NorQuAD test
    python -m benchmarks.quality --compare RUN_A.jsonl RUN_B.jsonl  # per-query diff of two runs

Each dataset is ingested once (one .txt file per document, its own tenant) into its own embedded
store under benchmarks/.work/<dataset>/, resumably; each config restarts `rag dev` on that store
with the config's retrieval settings. Per-query results go to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from benchmarks.beir import DEFAULT_DATA_DIR, BeirDataset, BeirDoc, load_dataset
from benchmarks.client import SearchResult, ServiceClient
from benchmarks.configs import ALL_CONFIGS, CONFIG_ENV, add_set_option, parse_set_option, rerank_env, tuned_env
from benchmarks.ingest import file_id_for, file_id_map, ingest_docs, print_progress, read_done
from benchmarks.metrics import QueryScores, Run, evaluate, rank
from benchmarks.stack import Stack, running_stack

BENCH_DIR = Path(__file__).resolve().parent
WORK_DIR = BENCH_DIR / ".work"
RESULTS_DIR = BENCH_DIR / "results"
DEFAULT_SPLIT = {"scifact": "test", "norquad": "test"}
TUNING_SPLIT = {"scifact": "train", "norquad": "dev"}
SEARCH_K = 100


def collection_for(dataset: str) -> str:
    return f"bench-{dataset}"


def machine() -> str:
    return (
        f"{psutil.cpu_count()} cores / {psutil.virtual_memory().total / 2**30:.0f} GiB / {platform.machine()} / no GPU"
    )


@dataclass
class Workspace:
    """The store, done-list and log of one dataset."""

    root: Path

    @property
    def qdrant(self) -> Path:
        return self.root / "qdrant"

    @property
    def done(self) -> Path:
        return self.root / "ingested.tsv"

    @property
    def log(self) -> Path:
        return self.root / "stack.log"


def workspace(dataset: str, work_dir: Path = WORK_DIR) -> Workspace:
    return Workspace(work_dir / dataset)


def select_subset(
    dataset: BeirDataset, limit_queries: int | None, limit_docs: int | None
) -> tuple[list[BeirDoc], dict[str, str]]:
    """The queries to run and the docs to index; with limits, the queries' relevant docs come first."""
    queries = dataset.split_queries()
    if limit_queries is not None:
        queries = dict(list(queries.items())[:limit_queries])
    if limit_docs is None:
        return list(dataset.corpus), queries
    wanted = {doc_id for qid in queries for doc_id, grade in dataset.qrels[qid].items() if grade > 0}
    relevant = [doc for doc in dataset.corpus if doc.doc_id in wanted]
    others = [doc for doc in dataset.corpus if doc.doc_id not in wanted]
    return (relevant + others)[: max(limit_docs, len(relevant))], queries


def hits_to_run(result: SearchResult, id_map: dict[str, str]) -> tuple[Run, int]:
    """Chunk hits -> doc scores (best chunk per doc); also the number of hits not from this corpus.

    The score is the hit's position as /search returned it (the list order is the ranking), not its
    ``distances`` value: the calibrated relevance is capped so it never rises down the list, and
    its ties would otherwise be broken by doc id.
    """
    run: dict[str, float] = {}
    foreign = 0
    for position, hit in enumerate(result.hits):
        doc_id = id_map.get(hit.file_id)
        if doc_id is None:
            foreign += 1
            continue
        run.setdefault(doc_id, -float(position))
    return run, foreign


async def search_all(
    stack: Stack, queries: dict[str, str], collection: str, concurrency: int
) -> dict[str, SearchResult]:
    results: dict[str, SearchResult] = {}
    semaphore = asyncio.Semaphore(concurrency)
    async with ServiceClient(
        stack.ingestion_url, stack.retrieval_url, stack.ingestion_key, stack.retrieval_key
    ) as client:

        async def one(qid: str, text: str) -> None:
            async with semaphore:
                results[qid] = await client.search(text, [collection], SEARCH_K)

        await asyncio.gather(*(one(qid, text) for qid, text in queries.items()))
    return results


async def ensure_ingested(
    stack: Stack, dataset: str, docs: Sequence[BeirDoc], ws: Workspace, concurrency: int
) -> dict[str, Any]:
    async with ServiceClient(
        stack.ingestion_url, stack.retrieval_url, stack.ingestion_key, stack.retrieval_key
    ) as client:
        stats = await ingest_docs(
            client,
            docs,
            prefix=dataset,
            collection_name=collection_for(dataset),
            done_path=ws.done,
            concurrency=concurrency,
            progress=print_progress(),
        )
    if stats.failures:
        print(f"  {len(stats.failures)} ingest failures, e.g. {stats.failures[0]}", file=sys.stderr)
    return stats.as_dict()


def write_results(
    out_dir: Path,
    stamp: str,
    dataset: BeirDataset,
    config: str,
    queries: dict[str, str],
    results: dict[str, SearchResult],
    runs: dict[str, Run],
    per_query: dict[str, QueryScores],
) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stamp}-{dataset.name}-{dataset.split}-{config}.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for qid, text in queries.items():
            scores = per_query.get(qid)
            if scores is None:
                continue
            ranking = rank(runs.get(qid, {}))
            fh.write(
                json.dumps(
                    {
                        "qid": qid,
                        "query": text,
                        "ndcg@10": round(scores.ndcg_10, 6),
                        "recall@100": round(scores.recall_100, 6),
                        "mrr@10": round(scores.mrr_10, 6),
                        "relevant": sorted(d for d, g in dataset.qrels[qid].items() if g > 0),
                        "top10": [[doc_id, round(runs[qid][doc_id], 6)] for doc_id in ranking[:10]],
                        "chunk_hits": len(results[qid].hits) if qid in results else 0,
                        "docs_returned": len(ranking),
                        "latency_s": round(results[qid].seconds, 4) if qid in results else None,
                    }
                )
                + "\n"
            )
    return path


async def run_config(
    stack: Stack,
    dataset: BeirDataset,
    docs: list[BeirDoc],
    queries: dict[str, str],
    config: str,
    args: argparse.Namespace,
    stamp: str,
) -> dict[str, Any]:
    id_map = file_id_map(dataset.name, docs)
    started = time.perf_counter()
    results = await search_all(stack, queries, collection_for(dataset.name), args.search_concurrency)
    wall = time.perf_counter() - started
    runs: dict[str, Run] = {}
    foreign = 0
    for qid, result in results.items():
        runs[qid], extra = hits_to_run(result, id_map)
        foreign += extra
    qrels = {qid: dataset.qrels[qid] for qid in queries}
    summary, per_query = evaluate(runs, qrels)
    path = write_results(args.results_dir, stamp, dataset, config, queries, results, runs, per_query)
    latencies = sorted(result.seconds for result in results.values())
    record = {
        "dataset": dataset.name,
        "split": dataset.split,
        "config": config,
        "env": stack.env,
        **summary.as_dict(),
        "docs_indexed": len(docs),
        "limit_docs": args.limit_docs,
        "limit_queries": args.limit_queries,
        "mean_docs_returned": sum(len(r) for r in runs.values()) / max(1, len(runs)),
        "foreign_hits": foreign,
        "search_wall_s": round(wall, 2),
        "search_p50_s": round(latencies[len(latencies) // 2], 4) if latencies else None,
        "per_query_file": str(path),
    }
    print(
        f"  {dataset.name}/{dataset.split} {config:<7} nDCG@10 {summary.ndcg_10:.4f}  R@100 {summary.recall_100:.4f}  "
        f"MRR@10 {summary.mrr_10:.4f}  ({summary.queries} queries, {wall:.0f}s)",
        flush=True,
    )
    return record


def config_env(config: str, dataset: str, rerank_url: str | None) -> dict[str, str] | str:
    """The env for a config, or a reason it cannot run."""
    if config in CONFIG_ENV:
        return CONFIG_ENV[config]
    if config == "tuned":
        env = tuned_env(dataset)
        if env is None:
            return (
                f"not tuned yet: run `python -m benchmarks.tune --dataset {dataset}` (tunes on {TUNING_SPLIT[dataset]})"
            )
        return env
    if config == "rerank":
        if rerank_url is None:
            return "no cross-encoder model obtainable offline here; pass --rerank-url to a real /v1/rerank endpoint"
        return rerank_env(rerank_url)
    return f"unknown config {config!r}"


def run_dataset(name: str, args: argparse.Namespace, stamp: str) -> list[dict[str, Any]]:
    split = args.split or DEFAULT_SPLIT.get(name, "test")
    dataset = load_dataset(name, split, args.data_dir)
    docs, queries = select_subset(dataset, args.limit_queries, args.limit_docs)
    ws = workspace(name, args.work_dir)
    records: list[dict[str, Any]] = []
    ingest_stats: dict[str, Any] | None = None
    print(f"{name}/{split}: {len(docs)} docs, {len(queries)} queries, store {ws.qdrant}", flush=True)
    for config in args.configs:
        env = config_env(config, name, args.rerank_url)
        if isinstance(env, str):
            print(f"  {name}/{split} {config:<7} skipped: {env}", flush=True)
            records.append({"dataset": name, "split": split, "config": config, "skipped": env})
            continue
        with running_stack(ws.qdrant, {**env, **args.set}, log_path=ws.log) as stack:
            if ingest_stats is None:
                ingest_stats = asyncio.run(ensure_ingested(stack, name, docs, ws, args.ingest_concurrency))
                done = read_done(ws.done)
                missing = [d.doc_id for d in docs if file_id_for(name, d.doc_id) not in done]
                if missing:
                    raise SystemExit(f"{name}: {len(missing)} docs failed to ingest (e.g. {missing[:3]}); see {ws.log}")
            record = asyncio.run(run_config(stack, dataset, docs, queries, config, args, stamp))
            record["ingest"] = ingest_stats
            records.append(record)
    return records


def compare(path_a: Path, path_b: Path, top: int = 10) -> str:
    """Per-query differences of two runs (B minus A) on the queries both hold."""
    a = {row["qid"]: row for row in map(json.loads, path_a.read_text(encoding="utf-8").splitlines())}
    b = {row["qid"]: row for row in map(json.loads, path_b.read_text(encoding="utf-8").splitlines())}
    shared = sorted(set(a) & set(b))
    lines = [
        f"A = {path_a.name}",
        f"B = {path_b.name}",
        f"{len(shared)} shared queries (A only {len(set(a) - set(b))}, B only {len(set(b) - set(a))})",
    ]
    for metric in ("ndcg@10", "recall@100", "mrr@10"):
        deltas = [b[q][metric] - a[q][metric] for q in shared]
        mean_a = sum(a[q][metric] for q in shared) / max(1, len(shared))
        mean_b = sum(b[q][metric] for q in shared) / max(1, len(shared))
        wins = sum(d > 1e-9 for d in deltas)
        losses = sum(d < -1e-9 for d in deltas)
        lines.append(
            f"{metric:<11} A {mean_a:.4f}  B {mean_b:.4f}  delta {mean_b - mean_a:+.4f}  "
            f"B better {wins}, worse {losses}, same {len(shared) - wins - losses}"
        )
    moved = sorted(shared, key=lambda q: abs(b[q]["ndcg@10"] - a[q]["ndcg@10"]), reverse=True)[:top]
    lines.append(f"largest nDCG@10 changes (top {top}):")
    for qid in moved:
        lines.append(f"  {qid:<10} {a[qid]['ndcg@10']:.3f} -> {b[qid]['ndcg@10']:.3f}  {a[qid]['query'][:80]}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.quality", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="all", help="scifact, norquad or all (default)")
    parser.add_argument("--split", default=None, help="qrels split (default: test)")
    parser.add_argument("--configs", default=",".join(ALL_CONFIGS), help=f"comma list of {', '.join(ALL_CONFIGS)}")
    parser.add_argument("--limit-docs", type=int, default=None, help="smoke: index only N docs (relevant ones first)")
    parser.add_argument("--limit-queries", type=int, default=None, help="smoke: run only the first N queries")
    parser.add_argument("--ingest-concurrency", type=int, default=4)
    parser.add_argument("--search-concurrency", type=int, default=4)
    parser.add_argument("--rerank-url", default=None, help="a real /v1/rerank endpoint for the rerank row")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR)
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("RUN_A", "RUN_B"), help="diff two per-query files")
    add_set_option(parser)
    args = parser.parse_args(argv)
    args.configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    args.set = parse_set_option(parser, args.set)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.compare:
        print(compare(*args.compare))
        return 0
    names = ["scifact", "norquad"] if args.dataset == "all" else [args.dataset]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    started = time.perf_counter()
    records: list[dict[str, Any]] = []
    for name in names:
        records.extend(run_dataset(name, args, stamp))
    summary = {
        "command": "python -m benchmarks.quality " + shlex.join(sys.argv[1:] if argv is None else list(argv)),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "wall_s": round(time.perf_counter() - started, 1),
        "results": records,
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"{stamp}-quality-summary.json"
    out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"summary: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

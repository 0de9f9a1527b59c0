"""Two search services side by side: /search latency alternated query by query, and whether they answer alike.

    python -m benchmarks.ab --dataset scifact --a benchmarks/.work-ml-5k --b benchmarks/.work-ml-5k-v3
    python -m benchmarks.ab --dataset scifact --a http://127.0.0.1:8002 --b benchmarks/.work-ml-5k-v3

Each side is either a work directory of the other benchmarks (its ``<dataset>/qdrant`` store is
served by this checkout's `rag dev`, with ``--a-env``/``--b-env`` settings) or the URL of a
retrieval service already running, such as another checkout's `rag dev` for a before/after of a
code change (key: ``--a-key``/``--b-key``, default the benchmarks' key). One store cannot be open
in two processes, so comparing two settings on one store takes a copy of it.

This machine's speed drifts by tens of per cent within minutes, so two runs one after the other do
not compare. Here both services are up at once and one client (c=1, keep-alive) sends each test
query to both, A then B or B then A by turns, for ``--rounds`` passes. The report gives each
side's percentiles, the difference of the medians (B - A) with a bootstrap interval over the
queries, how many of the first round's responses were identical (texts, file ids, distances) or
ranked the same files, and, for the services it started, their RSS. Results go to
benchmarks/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import random
import shlex
import statistics
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import psutil

from benchmarks.beir import DEFAULT_DATA_DIR, load_dataset
from benchmarks.client import BenchmarkHTTPError, Hit, parse_search
from benchmarks.http1 import Http1Client
from benchmarks.quality import RESULTS_DIR, collection_for, machine, workspace
from benchmarks.speed import LATENCY_K, latency_summary
from benchmarks.stack import RETRIEVAL_KEY, StackError, attached_stack, running_stack

SIDES = ("a", "b")
WARM_UP_QUERIES = 10
BOOTSTRAP_SAMPLES = 2000

Agreement = Literal["identical", "same_ranking", "different"]


@dataclass(frozen=True)
class Side:
    """One service under comparison: where it answers, and the process when this run started it."""

    name: str
    source: str
    url: str
    key: str
    pid: int | None = None


def compare_hits(a: Sequence[Hit], b: Sequence[Hit]) -> Agreement:
    """``identical``: the same texts, file ids and distances in the same order; ``same_ranking``: the
    same file ids in the same order, something else differing; ``different`` otherwise."""
    if [(hit.text, hit.file_id, hit.score) for hit in a] == [(hit.text, hit.file_id, hit.score) for hit in b]:
        return "identical"
    if [hit.file_id for hit in a] == [hit.file_id for hit in b]:
        return "same_ranking"
    return "different"


def median_difference(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], *, samples: int = BOOTSTRAP_SAMPLES, seed: int = 7
) -> dict[str, float]:
    """median(B) - median(A) over every timing, in ms, with a 95 % bootstrap interval.

    ``a[i]`` and ``b[i]`` are query i's timings on each side: the bootstrap draws queries, so the
    interval keeps the pairing (a slow query is slow on both sides).
    """
    if len(a) != len(b) or not a:
        raise ValueError("median_difference needs the same queries, at least one, on both sides")

    def difference(indices: Sequence[int]) -> float:
        return statistics.median(t for i in indices for t in b[i]) - statistics.median(t for i in indices for t in a[i])

    rng = random.Random(seed)
    queries = range(len(a))
    draws = sorted(difference(rng.choices(queries, k=len(a))) for _ in range(samples))
    return {
        "b_minus_a_ms": round(difference(queries) * 1000, 3),
        "ci95_low_ms": round(draws[int(0.025 * samples)] * 1000, 3),
        "ci95_high_ms": round(draws[int(0.975 * samples) - 1] * 1000, 3),
    }


async def _search(client: Http1Client, query: str, collection: str) -> tuple[float, list[Hit]]:
    started = time.perf_counter()
    response = await client.post_json("/search", {"queries": [query], "collection_names": [collection], "k": LATENCY_K})
    elapsed = time.perf_counter() - started
    if response.status != 200:
        raise BenchmarkHTTPError("search", response.status, response.text)
    return elapsed, parse_search(response.json())


async def alternate(sides: Sequence[Side], collection: str, queries: Sequence[str], rounds: int) -> dict[str, Any]:
    """Every query on both sides, the order switching query by query and round by round."""
    clients = [Http1Client(side.url, headers={"Authorization": f"Bearer {side.key}"}, timeout=60.0) for side in sides]
    timings: list[list[list[float]]] = [[[] for _ in queries] for _ in sides]
    first_answers: list[list[list[Hit]]] = [[] for _ in sides]
    try:
        for text in queries[:WARM_UP_QUERIES]:
            for client in clients:
                await _search(client, text, collection)
        for round_index in range(rounds):
            for index, text in enumerate(queries):
                order = (0, 1) if (index + round_index) % 2 == 0 else (1, 0)
                for side in order:
                    seconds, hits = await _search(clients[side], text, collection)
                    timings[side][index].append(seconds)
                    if round_index == 0:
                        first_answers[side].append(hits)
    finally:
        for client in clients:
            await client.aclose()
    agreement = {"identical": 0, "same_ranking": 0, "different": 0}
    for hits_a, hits_b in zip(*first_answers, strict=True):
        agreement[compare_hits(hits_a, hits_b)] += 1
    return {
        "sides": {
            side.name: {
                "source": side.source,
                **latency_summary(
                    [t for per_query in timings[position] for t in per_query],
                    sum(t for per_query in timings[position] for t in per_query),
                ),
            }
            for position, side in enumerate(sides)
        },
        "median_difference": median_difference(timings[0], timings[1]),
        "responses": agreement,
    }


def rss_mib(pid: int | None) -> float | None:
    return None if pid is None else round(psutil.Process(pid).memory_info().rss / 2**20, 1)


def parse_env(pairs: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"--a-env/--b-env take NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


@contextmanager
def started_sides(args: argparse.Namespace) -> Iterator[list[Side]]:
    """Each side's service: attached to its URL, or `rag dev` started on its store for the run."""
    sources: dict[str, str] = {"a": args.a, "b": args.b}
    stores = {name: source for name, source in sources.items() if not source.startswith(("http://", "https://"))}
    if stores and attached_stack() is not None:
        raise SystemExit("BENCH_*_URL is set: unset it, or give both sides as URLs")
    paths = {name: workspace(args.dataset, Path(source)).qdrant.resolve() for name, source in stores.items()}
    if len(set(paths.values())) < len(paths):
        raise SystemExit("both sides name the same store, which one process at a time can open: copy it")
    for name, path in paths.items():
        if not path.is_dir():
            raise SystemExit(f"side {name}: no store at {path} (ingest one with benchmarks.quality or speed)")
    sides: list[Side] = []
    with ExitStack() as stack:
        for name in SIDES:
            if name in paths:
                env: Mapping[str, str] = parse_env(getattr(args, f"{name}_env"))
                try:
                    running = stack.enter_context(running_stack(paths[name], env))
                except StackError as exc:
                    raise SystemExit(f"side {name}: {exc}") from exc
                sides.append(Side(name, sources[name], running.retrieval_url, running.retrieval_key, running.pid))
            else:
                sides.append(Side(name, sources[name], sources[name].rstrip("/"), getattr(args, f"{name}_key")))
        yield sides


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.ab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="scifact")
    parser.add_argument("--a", required=True, help="work directory (its <dataset>/qdrant store) or retrieval URL")
    parser.add_argument("--b", required=True, help="the same, for side B")
    parser.add_argument("--a-env", action="append", default=[], metavar="NAME=VALUE", help="setting for A's rag dev")
    parser.add_argument("--b-env", action="append", default=[], metavar="NAME=VALUE", help="setting for B's rag dev")
    parser.add_argument("--a-key", default=RETRIEVAL_KEY, help="A's retrieval key when A is a URL")
    parser.add_argument("--b-key", default=RETRIEVAL_KEY, help="B's retrieval key when B is a URL")
    parser.add_argument("--requests", type=int, default=300, help="test queries per round (each sent to both)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tenant", default=None, help="collection_names to search (default: the dataset's tenant)")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    if args.requests < 1 or args.rounds < 1:
        parser.error("--requests and --rounds must be at least 1")
    queries = list(load_dataset(args.dataset, "test", args.data_dir).split_queries().values())[: args.requests]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    with started_sides(args) as sides:
        result = asyncio.run(alternate(sides, args.tenant or collection_for(args.dataset), queries, args.rounds))
        for side in sides:
            result["sides"][side.name]["rss_mib"] = rss_mib(side.pid)
    report = {
        "command": "python -m benchmarks.ab " + shlex.join(sys.argv[1:] if argv is None else list(argv)),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "dataset": args.dataset,
        "queries": len(queries),
        "rounds": args.rounds,
        "k": LATENCY_K,
        **result,
    }
    for name, side in report["sides"].items():
        print(
            f"{name.upper()} {side['source']}: p50 {side['p50_ms']:.2f} ms  p95 {side['p95_ms']:.2f}  "
            f"({side['requests']} searches, RSS {side['rss_mib']} MiB)"
        )
    difference = report["median_difference"]
    print(
        f"B - A: {difference['b_minus_a_ms']:+.2f} ms (95 % CI {difference['ci95_low_ms']:+.2f} to "
        f"{difference['ci95_high_ms']:+.2f})"
    )
    print(f"responses (first round): {report['responses']}")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"{stamp}-ab-{args.dataset}.json"
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

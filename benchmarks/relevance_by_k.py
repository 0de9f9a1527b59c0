"""Whether a search's first hits and their relevance depend on the ``k`` asked for.

    python -m benchmarks.relevance_by_k --url http://127.0.0.1:8002 --dataset scifact --ks 3,10,100

Sends every test query of the dataset to a running retrieval service once per ``k`` (the tenant
the other benchmarks ingest it into) and reports, per ``k``, the top hit's ``distances`` value
(median, mean), the same hit's difference to the reference ``k`` (the second of ``--ks``), and how
often a smaller ``k``'s list is the first hits of the reference list. Results go to
benchmarks/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import shlex
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.beir import DEFAULT_DATA_DIR, load_dataset
from benchmarks.client import BenchmarkHTTPError
from benchmarks.http1 import Http1Client
from benchmarks.quality import RESULTS_DIR, collection_for, machine
from benchmarks.stack import RETRIEVAL_KEY


@dataclass(frozen=True)
class Answer:
    """One /search answer: the hits' texts and relevance, best first."""

    documents: list[str]
    distances: list[float]


def summarise(answers: Sequence[Mapping[int, Answer]], reference: int) -> dict[str, Any]:
    """Per k: the top hit's relevance, its difference to ``reference``'s, and prefix agreement."""
    rows: dict[str, Any] = {}
    ks = sorted({k for answer in answers for k in answer})
    for k in ks:
        tops = [answer[k].distances[0] for answer in answers if answer[k].distances]
        row: dict[str, Any] = {
            "top_relevance_median": round(statistics.median(tops), 4) if tops else None,
            "top_relevance_mean": round(statistics.fmean(tops), 4) if tops else None,
        }
        if k != reference:
            paired = [
                answer[k].distances[0] - answer[reference].distances[0]
                for answer in answers
                if answer[k].distances and answer[reference].distances
            ]
            row["minus_reference_mean"] = round(statistics.fmean(paired), 4) if paired else None
            row["minus_reference_largest"] = round(max(map(abs, paired)), 4) if paired else None
        if k < reference:
            row["prefix_of_reference"] = sum(
                answer[k].documents == answer[reference].documents[:k] for answer in answers
            )
        rows[str(k)] = row
    return {"reference_k": reference, "queries": len(answers), "by_k": rows}


async def collect(
    client: Http1Client, queries: Sequence[str], tenant: str, ks: Sequence[int]
) -> list[dict[int, Answer]]:
    answers: list[dict[int, Answer]] = []
    for query in queries:
        by_k: dict[int, Answer] = {}
        for k in ks:
            response = await client.post_json("/search", {"queries": [query], "collection_names": [tenant], "k": k})
            if response.status != 200:
                raise BenchmarkHTTPError("search", response.status, response.text)
            body = response.json()
            by_k[k] = Answer(documents=list(body["documents"][0]), distances=list(body["distances"][0]))
        answers.append(by_k)
    return answers


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.relevance_by_k",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", required=True, help="a running retrieval service")
    parser.add_argument("--key", default=RETRIEVAL_KEY)
    parser.add_argument("--dataset", default="scifact")
    parser.add_argument("--ks", default="3,10,100", help="comma list; the second is the reference (default 3,10,100)")
    parser.add_argument("--limit-queries", type=int, default=None)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    ks = [int(value) for value in args.ks.split(",") if value.strip()]
    if len(ks) < 2:
        parser.error("--ks needs at least two values")
    queries = list(load_dataset(args.dataset, "test", args.data_dir).split_queries().values())[: args.limit_queries]
    client = Http1Client(args.url, headers={"Authorization": f"Bearer {args.key}"}, timeout=60.0)
    answers = asyncio.run(collect(client, queries, collection_for(args.dataset), ks))
    report = {
        "command": "python -m benchmarks.relevance_by_k " + shlex.join(sys.argv[1:] if argv is None else list(argv)),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        **summarise(answers, ks[1]),
    }
    print(json.dumps(report["by_k"], indent=2))
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}-relevance-by-k-{args.dataset}.json"
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What `rag dev` holds while it ingests the real documents, and after.

    python -m benchmarks.ingest_rss                       # the 97 documents of ../shared/eval/docs
    python -m benchmarks.ingest_rss --set INGEST_CONCURRENCY=1

Starts `rag dev` on a fresh store (default settings, offline models), reads its resident memory
(the process and its children) idle, then samples it every 0.2 s while every file of the docs
folder goes through PUT /api/v1/ingest (``--concurrency`` at a time), and reads it again right
after the last answer and once more after ``--idle-seconds``. The store is removed afterwards; the
result goes to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import psutil

from benchmarks.configs import add_set_option, parse_set_option
from benchmarks.quality import RESULTS_DIR, machine
from benchmarks.realdocs import DEFAULT_DOCS_DIR, doc_paths
from benchmarks.realdocs.__main__ import ingest_files
from benchmarks.rss import PeakRss
from benchmarks.stack import running_stack

MIB = 2**20


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and its children."""
    process = psutil.Process(pid)
    return int(process.memory_info().rss + sum(child.memory_info().rss for child in process.children(recursive=True)))


def measure(docs_dir: Path, env: dict[str, str], *, concurrency: int, idle_seconds: float) -> dict[str, object]:
    """One run on a fresh store: idle, peak, right after and idle after, in MiB."""
    work = Path(tempfile.mkdtemp(prefix="ingest-rss-"))
    try:
        with running_stack(work / "qdrant", env, log_path=work / "rag-dev.log") as stack:
            if stack.pid is None:
                raise SystemExit("benchmarks.ingest_rss starts its own rag dev: unset BENCH_*_URL")
            idle_before = tree_rss(stack.pid)
            started = time.perf_counter()
            with PeakRss(stack.pid) as peak:
                report = asyncio.run(ingest_files(stack, docs_dir, doc_paths(docs_dir), work / "done.tsv", concurrency))
            wall = time.perf_counter() - started
            right_after = tree_rss(stack.pid)
            time.sleep(idle_seconds)
            idle_after = tree_rss(stack.pid)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "documents": report.ingested,
        "chunks": report.chunks,
        "failures": report.failures,
        "wall_s": round(wall, 1),
        "idle_before_mib": round(idle_before / MIB),
        "peak_mib": round(peak.peak_bytes / MIB),
        "right_after_mib": round(right_after / MIB),
        "idle_after_mib": round(idle_after / MIB),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.ingest_rss",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--docs-dir", type=Path, default=DEFAULT_DOCS_DIR)
    parser.add_argument("--concurrency", type=int, default=2, help="uploads in flight (default 2)")
    parser.add_argument("--idle-seconds", type=float, default=30.0, help="wait before the idle-after reading")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    add_set_option(parser)
    args = parser.parse_args(argv)
    args.env = parse_set_option(parser, args.set)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    env: dict[str, str] = args.env
    result = {
        "benchmark": "ingest_rss",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "docs_dir": str(args.docs_dir),
        "settings": env,
        "concurrency": args.concurrency,
        **measure(args.docs_dir, env, concurrency=args.concurrency, idle_seconds=args.idle_seconds),
    }
    print(json.dumps({key: value for key, value in result.items() if key != "failures"}), flush=True)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = args.results_dir / f"ingest-rss-{stamp}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"written {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`rag sync` timings: a cold sync, a warm one (nothing changed) and one with a single file edited.

    python -m benchmarks.sync                 # every document of ../shared/eval/docs (~10+ minutes)
    python -m benchmarks.sync --limit 3       # the first 3 documents: a quick check that it works

The documents (as ``python -m benchmarks.realdocs`` picks them: the corpus' bookkeeping and
``expected/`` left out) are copied into benchmarks/.work/sync/docs, and a fresh `rag dev` store is
started in benchmarks/.work/sync/qdrant. Then `rag sync <copy> --collection bench-sync` runs three
times as a person runs it (a process of its own, so each time includes the interpreter's start,
measured on its own as ``startup``; one documents listing is timed too):

- ``cold``: every file is new (extract, chunk, embed, write);
- ``warm``: nothing changed: every file is hashed and compared with the documents listing, none is sent;
- ``one_changed``: a line appended to one .md or .txt file: only that file is sent again.

Results (seconds and the command's counts per run, and warm / cold) go to
benchmarks/results/<stamp>-sync.json. With BENCH_INGESTION_URL / BENCH_RETRIEVAL_URL set it attaches
to that stack and uses a collection of its own (``bench-sync-<stamp>``) so the cold run is cold.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from benchmarks.quality import RESULTS_DIR, WORK_DIR, machine
from benchmarks.realdocs import DEFAULT_DOCS_DIR, doc_paths
from benchmarks.stack import Stack, StackError, rag_command, running_stack

COLLECTION = "bench-sync"
SUMMARY = re.compile(r"(\d+) added, (\d+) changed, (\d+) unchanged, (\d+) removed, (\d+) failed")
EDITED_SUFFIXES = (".md", ".txt")
EDIT_LINE = "\nEdited by benchmarks.sync: this line makes the file changed.\n"


@dataclass(frozen=True, slots=True)
class SyncRun:
    phase: str
    seconds: float
    exit_code: int
    added: int
    changed: int
    unchanged: int
    removed: int
    failed: int


def copy_docs(docs_dir: Path, target: Path, limit: int | None) -> list[str]:
    """A fresh copy of the documents (the first ``limit`` of them, sorted) under ``target``."""
    paths = doc_paths(docs_dir)[:limit] if limit is not None else doc_paths(docs_dir)
    if target.exists():
        shutil.rmtree(target)
    for relative in paths:
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(docs_dir / relative, destination)
    return paths


def edit_one(folder: Path, paths: Sequence[str]) -> str:
    """Append a line to the first .md or .txt file (else to the first file): the one changed file."""
    chosen = next((path for path in paths if path.endswith(EDITED_SUFFIXES)), paths[0])
    with (folder / chosen).open("a", encoding="utf-8") as handle:
        handle.write(EDIT_LINE)
    return chosen


def run_sync(stack: Stack, folder: Path, collection: str, concurrency: int, phase: str) -> SyncRun:
    """`rag sync` in a process of its own, timed from start to exit."""
    command = [
        *rag_command(),
        "sync",
        str(folder),
        "--collection",
        collection,
        "--concurrency",
        str(concurrency),
        "--url",
        stack.ingestion_url,
        "--api-key",
        stack.ingestion_key,
    ]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "200"})
    seconds = time.perf_counter() - started
    found = SUMMARY.findall(result.stdout)
    if not found:
        tail = (result.stdout + result.stderr)[-2000:]
        raise RuntimeError(f"rag sync ({phase}) printed no summary (exit {result.returncode}):\n{tail}")
    added, changed, unchanged, removed, failed = map(int, found[-1])
    if failed:
        print(result.stdout[-3000:], file=sys.stderr)
    return SyncRun(phase, round(seconds, 3), result.returncode, added, changed, unchanged, removed, failed)


def unexpected(runs: Sequence[SyncRun], documents: int) -> list[str]:
    """What differs from the counts each phase must show (a failed file included)."""
    expected = {
        "cold": (documents, 0, 0),
        "warm": (0, 0, documents),
        "one_changed": (0, 1, documents - 1),
    }
    problems: list[str] = []
    for run in runs:
        counts = (run.added, run.changed, run.unchanged)
        if run.exit_code != 0 or run.failed or run.removed or counts != expected[run.phase]:
            problems.append(f"{run.phase}: {asdict(run)}, expected added/changed/unchanged {expected[run.phase]}")
    return problems


def startup_seconds() -> float:
    """A process that only imports what `rag sync` imports: the interpreter's share of every run."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import rag_cli.__main__, rag_cli.sync.watch"], capture_output=True, check=True
    )
    return round(time.perf_counter() - started, 3)


def listing_seconds(stack: Stack, collection: str) -> float:
    """One ``GET /api/v1/documents`` of the collection: the floor of a warm sync besides hashing."""
    headers = {"Authorization": f"Bearer {stack.ingestion_key}"}
    started = time.perf_counter()
    response = httpx.get(
        f"{stack.ingestion_url}/api/v1/documents",
        params={"collection_name": collection, "limit": 1000},
        headers=headers,
        timeout=120,
    )
    response.raise_for_status()
    return round(time.perf_counter() - started, 3)


def print_table(runs: Sequence[SyncRun], startup: float, listing: float) -> None:
    print(f"{'phase':12} {'seconds':>8} {'added':>6} {'changed':>8} {'unchanged':>10} {'removed':>8} {'failed':>7}")
    for run in runs:
        print(
            f"{run.phase:12} {run.seconds:8.2f} {run.added:6} {run.changed:8} {run.unchanged:10} "
            f"{run.removed:8} {run.failed:7}"
        )
    print(f"{'startup':12} {startup:8.2f}  (start and imports only: part of every run above)")
    print(f"{'listing':12} {listing:8.2f}  (one GET /api/v1/documents after the cold run)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.sync", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs-dir", type=Path, default=DEFAULT_DOCS_DIR)
    parser.add_argument("--limit", type=int, default=None, help="only the first N documents (sorted by path)")
    parser.add_argument("--concurrency", type=int, default=2, help="rag sync --concurrency")
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR)
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    if not args.docs_dir.is_dir():
        print(f"no documents at {args.docs_dir}", file=sys.stderr)
        return 2
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    space = args.work_dir / "sync"
    folder = space / "docs"
    paths = copy_docs(args.docs_dir, folder, args.limit)
    if not paths:
        print(f"no documents under {args.docs_dir}", file=sys.stderr)
        return 2
    if (space / "qdrant").exists():
        shutil.rmtree(space / "qdrant")  # a fresh store: the cold run must be cold
    runs: list[SyncRun] = []
    try:
        with running_stack(space / "qdrant", log_path=space / "stack.log") as stack:
            collection = f"{COLLECTION}-{stamp.lower()}" if stack.attached else COLLECTION
            runs.append(run_sync(stack, folder, collection, args.concurrency, "cold"))
            listing = listing_seconds(stack, collection)
            runs.append(run_sync(stack, folder, collection, args.concurrency, "warm"))
            edited = edit_one(folder, paths)
            runs.append(run_sync(stack, folder, collection, args.concurrency, "one_changed"))
    except StackError as exc:
        print(f"the stack did not start: {exc}", file=sys.stderr)
        return 1
    startup = startup_seconds()
    print(f"{len(paths)} documents from {args.docs_dir}, edited: {edited}")
    print_table(runs, startup, listing)
    cold, warm = runs[0], runs[1]
    ratio = warm.seconds / cold.seconds if cold.seconds else None
    if ratio is not None:
        print(f"warm / cold: {ratio:.3f}")
    problems = unexpected(runs, len(paths))
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"{stamp}-sync.json"
    summary = {
        "machine": machine(),
        "documents": len(paths),
        "docs_dir": str(args.docs_dir),
        "concurrency": args.concurrency,
        "edited": edited,
        "startup_seconds": startup,
        "listing_seconds": listing,
        "runs": [asdict(run) for run in runs],
        "warm_over_cold": None if ratio is None else round(ratio, 4),
        "problems": problems,
    }
    out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    for problem in problems:
        print(f"unexpected: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

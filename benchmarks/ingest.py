"""Ingest a BEIR corpus through the real ingestion API: one .txt file per document, one tenant per dataset.

Resumable: every ingested file id is appended to a done-list next to the store, and a rerun skips
those. The store and its done-list live and die together (wipe both to start over).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.beir import BeirDoc
from benchmarks.client import BenchmarkHTTPError, ServiceClient

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def file_id_for(prefix: str, doc_id: str) -> str:
    """A file id safe for the APIs' id patterns, unique per dataset; hashed when sanitising changed it."""
    safe = _UNSAFE.sub("_", doc_id)
    if safe != doc_id:
        safe = f"{safe}_{hashlib.sha1(doc_id.encode()).hexdigest()[:8]}"
    return f"{prefix}-{safe}"


def file_id_map(prefix: str, docs: Sequence[BeirDoc]) -> dict[str, str]:
    """file id -> BEIR doc id, to map search hits back to qrels ids."""
    return {file_id_for(prefix, doc.doc_id): doc.doc_id for doc in docs}


@dataclass
class IngestStats:
    docs: int = 0
    chunks: int = 0
    seconds: float = 0.0
    skipped: int = 0
    failures: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    @property
    def docs_per_s(self) -> float:
        return self.docs / self.seconds if self.seconds else 0.0

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "docs": self.docs,
            "chunks": self.chunks,
            "seconds": round(self.seconds, 3),
            "docs_per_s": round(self.docs_per_s, 3),
            "chunks_per_s": round(self.chunks_per_s, 3),
            "skipped_already_done": self.skipped,
            "failures": len(self.failures),
            "failure_examples": self.failures[:5],
        }


def read_done(done_path: Path) -> dict[str, int]:
    """file id -> chunks written, from the done-list."""
    done: dict[str, int] = {}
    if done_path.exists():
        for line in done_path.read_text(encoding="utf-8").splitlines():
            if "\t" in line:
                file_id, chunks = line.split("\t", 1)
                done[file_id] = int(chunks)
    return done


async def ingest_docs(
    client: ServiceClient,
    docs: Sequence[BeirDoc],
    *,
    prefix: str,
    collection_name: str,
    done_path: Path,
    concurrency: int = 4,
    progress: Callable[[IngestStats, int], None] | None = None,
) -> IngestStats:
    """Ingest the docs not yet in the done-list with `concurrency` requests in flight."""
    done = read_done(done_path)
    todo = [doc for doc in docs if file_id_for(prefix, doc.doc_id) not in done]
    stats = IngestStats(skipped=len(docs) - len(todo))
    if not todo:
        return stats
    done_path.parent.mkdir(parents=True, exist_ok=True)
    queue: asyncio.Queue[BeirDoc] = asyncio.Queue()
    for doc in todo:
        queue.put_nowait(doc)

    with done_path.open("a", encoding="utf-8") as done_file:

        async def worker() -> None:
            while True:
                try:
                    doc = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                file_id = file_id_for(prefix, doc.doc_id)
                try:
                    result = await client.ingest(
                        file_id=file_id,
                        filename=f"{file_id}.txt",
                        content=doc.as_file_text().encode("utf-8"),
                        collection_name=collection_name,
                    )
                except BenchmarkHTTPError as exc:
                    stats.failures.append(str(exc))
                    continue
                stats.docs += 1
                stats.chunks += result.chunks
                stats.latencies.append(result.seconds)
                done_file.write(f"{file_id}\t{result.chunks}\n")
                done_file.flush()
                if progress is not None:
                    progress(stats, len(todo))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
        stats.seconds = time.perf_counter() - started
    return stats


def print_progress(every: int = 250) -> Callable[[IngestStats, int], None]:
    started = time.perf_counter()

    def report(stats: IngestStats, total: int) -> None:
        if stats.docs % every == 0 or stats.docs == total:
            elapsed = time.perf_counter() - started
            print(
                f"  ingested {stats.docs}/{total} docs, {stats.chunks} chunks, "
                f"{stats.docs / elapsed:.1f} docs/s, failures {len(stats.failures)}",
                flush=True,
            )

    return report

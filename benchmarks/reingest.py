"""What a re-ingest costs: first ingest, the same bytes again (unchanged), and the same file into a second collection.

    python -m benchmarks.reingest            # three real documents of ../shared/eval/docs on a fresh `rag dev`

Each file goes through ``PUT /api/v1/ingest`` (multipart) once into ``kb-a``, then five more times
unchanged (the median is reported), then once into ``kb-b`` (vectors copied from ``kb-a``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from benchmarks.realdocs import DEFAULT_DOCS_DIR
from benchmarks.stack import running_stack

DEFAULT_FILES = ("pdf/kreuzberg__sample_contract.pdf", "docx/docling__word_tables.docx", "md/docling__wiki.md")
REPEATS = 5


def _put(client: httpx.Client, path: Path, file_id: str, collection: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    with path.open("rb") as handle:
        response = client.put(
            "/api/v1/ingest",
            files={"file": (path.name, handle)},
            data={"file_id": file_id, "filename": path.name, "collection_name": collection, "user_id": "bench"},
        )
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return time.perf_counter() - started, body


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs-dir", type=Path, default=DEFAULT_DOCS_DIR)
    parser.add_argument("files", nargs="*", default=list(DEFAULT_FILES), help="paths relative to --docs-dir")
    args = parser.parse_args(argv)
    paths = [args.docs_dir / name for name in args.files]
    print("file | bytes | chunks | first ingest ms | unchanged p50 ms | into a 2nd collection ms")
    with tempfile.TemporaryDirectory() as work, running_stack(Path(work) / "qdrant") as stack:
        headers = {"Authorization": f"Bearer {stack.ingestion_key}"}
        with httpx.Client(base_url=stack.ingestion_url, headers=headers, timeout=900) as client:
            for path in paths:
                file_id = uuid.uuid4().hex
                first, body = _put(client, path, file_id, "kb-a")
                again = [_put(client, path, file_id, "kb-a") for _ in range(REPEATS)]
                if not all(reply["unchanged"] for _, reply in again):
                    raise SystemExit(f"{path.name}: a repeat was re-ingested")
                copied, reply = _put(client, path, file_id, "kb-b")
                if not reply["extraction"]["reused_vectors"]:
                    raise SystemExit(f"{path.name}: the second collection did not reuse the vectors")
                unchanged_ms = statistics.median(seconds for seconds, _ in again) * 1000
                print(
                    f"{path.name} | {path.stat().st_size} | {body['chunks_count']} | {first * 1000:.0f} | "
                    f"{unchanged_ms:.1f} | {copied * 1000:.0f}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

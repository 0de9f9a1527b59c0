"""A real ingestion service to kill -9 at a chosen instant (run as a script by the kill tests).

It is the production app on the embedded engine, with two test hooks injected through
``ServiceHooks`` (constructor injection, no patching): the writer writes in batches of two and
the chunk index can pause after one step of the commit. At the chosen point it prints a marker
line and sleeps, so the test can SIGKILL it exactly there.

Usage: python kill_target.py PORT QDRANT_PATH POINT
POINT: ``after-first-batch`` | ``before-commit`` | ``after-publish`` | ``none``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import uvicorn

from ingestion_service.adapters.chunk_index import ChunkIndex
from ingestion_service.indexing.assembly import PipelineParts
from ingestion_service.indexing.job import IngestJob
from ingestion_service.main import create_app
from ingestion_service.pipeline.components.chunk_writer import ChunkWriter
from ingestion_service.runtime import ServiceHooks
from ingestion_service.settings import Settings
from rag_runtime.store import ChunkPoint, ChunkStore
from shared_contract import load_settings

MARK_PREFIX = "KILL-POINT "


def _hold(point: str) -> None:
    sys.stdout.write(f"{MARK_PREFIX}{point}\n")
    sys.stdout.flush()
    time.sleep(3600)


def hooks_for(point: str) -> ServiceHooks:
    def small_batches(parts: PipelineParts) -> PipelineParts:
        real_write = parts.writer.write
        written = 0

        async def write(points: Sequence[ChunkPoint]) -> None:
            nonlocal written
            await real_write(points)
            written += 1
            if point == "after-first-batch" and written == 1:
                _hold(point)

        writer = ChunkWriter(write, parts.writer.embed_text, batch_size=2, lexical_window=parts.writer.lexical_window)
        return replace(parts, writer=writer)

    def before_commit(job: IngestJob) -> None:
        if point == "before-commit":
            _hold(point)

    class PausingIndex(ChunkIndex):
        async def publish(
            self, file_id: str, collection_name: str, ingest_version: str, *, meta: Mapping[str, Any] | None = None
        ) -> None:
            await super().publish(file_id, collection_name, ingest_version, meta=meta)
            if point == "after-publish":
                _hold(point)

    def index_factory(store: ChunkStore) -> ChunkIndex:
        return PausingIndex(store)

    return ServiceHooks(customize_parts=small_batches, before_commit=before_commit, index_factory=index_factory)


def main() -> None:
    port, qdrant_path, point = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    settings = load_settings(
        Settings,
        api_key=os.environ["INGESTION_API_KEY"],
        qdrant_uri=None,
        qdrant_path=qdrant_path,
        originals_dir=qdrant_path.parent / "originals",
        port=port,
    )
    app = create_app(settings, hooks=hooks_for(point))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()

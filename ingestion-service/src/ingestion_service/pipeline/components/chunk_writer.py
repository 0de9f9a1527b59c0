"""Writer stage: the run's chunks into the shared collection as pending points, in batches."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import anyio.from_thread
from haystack import Document, component

from ingestion_service.errors import QdrantWriteError
from ingestion_service.pipeline.embed_text import TRANSIENT_KEYS, EmbedTextBuilder
from ingestion_service.pipeline.observe import StageObserver, timed
from ingestion_service.run_control import report_progress
from rag_runtime.embedding import SparseVectorData
from rag_runtime.lexical import DEFAULT_LEXICAL_WINDOW, lexical_windows
from rag_runtime.store import ChunkPoint, chunk_point
from shared_contract import ContractError

# Modest batches: each is one store update, and the embedded engine holds the GIL while it runs.
WRITE_BATCH_SIZE = 64

WriteBatch = Callable[[Sequence[ChunkPoint]], Coroutine[Any, Any, None]]


def to_point(
    document: Document, lexical_text: str | None = None, multilingual: Sequence[float] | None = None
) -> ChunkPoint:
    """One embedded chunk as a point (payload shape and lexical field from the contract)."""
    if document.embedding is None:
        raise QdrantWriteError(f"chunk {document.id} has no dense vector")
    sparse = None
    if document.sparse_embedding is not None:
        sparse = SparseVectorData(
            indices=list(document.sparse_embedding.indices), values=list(document.sparse_embedding.values)
        )
    return chunk_point(
        document.id,
        document.content or "",
        {key: value for key, value in document.meta.items() if key not in TRANSIENT_KEYS},
        dense=document.embedding,
        sparse=sparse,
        lexical_text=lexical_text,
        multilingual=multilingual,
    )


@component
class ChunkWriter:
    """Writes through the async storage port from the pipeline's worker thread.

    The pipeline runs in an anyio worker thread (``anyio.to_thread.run_sync``), so each batch is
    handed to the event loop with ``anyio.from_thread.run``. Points carry
    ``meta.ingest_state = "pending"`` (set by the job's meta): nobody reads them until the run's
    commit publishes them in one operation. Each chunk's BM25 entry is its indexed text (context and
    body, see ``embed_text``), or with ``lexical_window`` its context and its window of that many
    neighbours on either side (the run's documents arrive in reading order).
    """

    def __init__(
        self,
        write: WriteBatch,
        embed_text: EmbedTextBuilder,
        *,
        batch_size: int = WRITE_BATCH_SIZE,
        lexical_window: int = DEFAULT_LEXICAL_WINDOW,
        observer: StageObserver | None = None,
    ) -> None:
        self.write = write
        self.embed_text = embed_text
        self.batch_size = batch_size
        self.lexical_window = lexical_window
        self.observer = observer

    @component.output_types(documents_written=int)
    def run(self, documents: list[Document], multilingual: dict[str, list[float]] | None = None) -> dict[str, int]:
        """Write every chunk (with its ``multilingual`` vector, by chunk id); report how many were written."""
        with timed(self.observer, "writer"):
            windows = self._lexical_texts(documents)
            extra = multilingual or {}
            points = [
                to_point(document, window, extra.get(document.id))
                for document, window in zip(documents, windows, strict=True)
            ]
            report_progress("writing", 0, len(points))
            for start in range(0, len(points), self.batch_size):
                batch = points[start : start + self.batch_size]
                try:
                    anyio.from_thread.run(self.write, batch)
                except ContractError as exc:
                    raise QdrantWriteError(f"{type(exc).__name__}: {exc}") from exc
                report_progress("writing", start + len(batch), len(points))
        return {"documents_written": len(points)}

    def _lexical_texts(self, documents: list[Document]) -> list[str]:
        if self.lexical_window == 0:
            return [self.embed_text.indexed_text(document.content or "", document.meta) for document in documents]
        windows = lexical_windows([document.content or "" for document in documents], self.lexical_window)
        return [
            self.embed_text.text(window, self.embed_text.body_and_context(document.content or "", document.meta)[1])
            for document, window in zip(documents, windows, strict=True)
        ]

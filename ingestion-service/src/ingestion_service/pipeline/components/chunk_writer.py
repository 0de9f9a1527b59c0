"""Writer stage: Haystack's DocumentWriter with timing and a typed failure."""

from __future__ import annotations

from haystack import Document, component
from haystack.components.writers import DocumentWriter
from haystack.document_stores.types import DocumentStore, DuplicatePolicy

from ingestion_service.errors import QdrantWriteError
from ingestion_service.pipeline.observe import StageObserver, timed


@component
class ChunkWriter:
    """Wraps DocumentWriter (Haystack's component decorator rebuilds classes, so no subclassing).

    OVERWRITE policy: chunk ids are unique per run, so it only matters for a retried batch, and
    it spares the store a read before every write.
    """

    def __init__(self, document_store: DocumentStore, observer: StageObserver | None = None) -> None:
        self.writer = DocumentWriter(document_store=document_store, policy=DuplicatePolicy.OVERWRITE)
        self.observer = observer

    @component.output_types(documents_written=int)
    def run(self, documents: list[Document]) -> dict[str, int]:
        """Write and report how many points were written."""
        with timed(self.observer, "writer"):
            try:
                written: dict[str, int] = self.writer.run(documents=documents)
            except Exception as exc:  # client, transport and server errors alike mean a failed write
                raise QdrantWriteError(f"{type(exc).__name__}: {exc}") from exc
        return written

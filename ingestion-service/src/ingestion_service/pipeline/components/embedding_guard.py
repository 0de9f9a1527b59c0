"""No chunk reaches Qdrant without its vectors (a point without ``text-dense`` is unfindable)."""

from __future__ import annotations

from haystack import Document, component

from ingestion_service.errors import EmbeddingFailedError, SparseEmbeddingFailedError
from ingestion_service.pipeline.observe import StageObserver, timed


@component
class EmbeddingGuard:
    """Fails the run when a chunk lacks a dense vector of the contract's size, or a required sparse one."""

    def __init__(self, *, dim: int, require_sparse: bool, observer: StageObserver | None = None) -> None:
        self.dim = dim
        self.require_sparse = require_sparse
        self.observer = observer

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """The documents unchanged, or a typed failure."""
        with timed(self.observer, "embedding_guard"):
            for document in documents:
                if document.embedding is None or len(document.embedding) != self.dim:
                    raise EmbeddingFailedError(f"chunk {document.id} has no {self.dim}-d dense vector")
                if self.require_sparse and document.sparse_embedding is None:
                    raise SparseEmbeddingFailedError(f"chunk {document.id} has no sparse vector")
        return {"documents": documents}

"""Sparse (BM42) embedding through the shared contract, for chunks still lacking a sparse vector."""

from __future__ import annotations

from dataclasses import replace

from haystack import Document, component
from haystack.dataclasses import SparseEmbedding

from ingestion_service.errors import SparseEmbeddingFailedError
from ingestion_service.pipeline.embed_slices import embed_in_slices
from ingestion_service.pipeline.embed_text import EmbedTextBuilder
from ingestion_service.pipeline.observe import StageObserver, timed
from rag_runtime.embedding import ContractEmbedder


@component
class ContractSparseEmbedder:
    """Embeds the same text the dense embedder read, so both vectors describe one input."""

    def __init__(
        self, embedder: ContractEmbedder, embed_text: EmbedTextBuilder, *, observer: StageObserver | None = None
    ) -> None:
        self.embedder = embedder
        self.embed_text = embed_text
        self.observer = observer

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """Documents with ``sparse_embedding`` filled in."""
        with timed(self.observer, "sparse_embedder"):
            missing = [index for index, document in enumerate(documents) if document.sparse_embedding is None]
            if not missing:
                return {"documents": documents}
            texts = [self.embed_text.indexed_text(documents[i].content or "", documents[i].meta) for i in missing]
            vectors = embed_in_slices(
                texts, self.embedder.embed_sparse_documents, SparseEmbeddingFailedError, "embedding_sparse"
            )
            result = list(documents)
            for index, data in zip(missing, vectors, strict=True):
                sparse = SparseEmbedding(indices=list(data.indices), values=list(data.values))
                result[index] = replace(documents[index], sparse_embedding=sparse)
        return {"documents": result}

"""Dense embedding through the shared contract (with the fused pass, sparse vectors come along)."""

from __future__ import annotations

from dataclasses import replace

from haystack import Document, component
from haystack.dataclasses import SparseEmbedding

from ingestion_service.errors import EmbeddingFailedError
from ingestion_service.pipeline.embed_slices import EMBED_SLICE
from ingestion_service.pipeline.embed_text import EmbedTextBuilder
from ingestion_service.pipeline.observe import StageObserver, timed
from ingestion_service.run_control import checkpoint, report_progress
from rag_runtime.embedding import ContractEmbedder, DocumentVectors, SparseVectorData
from shared_contract import ContractError


@component
class ContractDenseEmbedder:
    """Embeds ``breadcrumb + content`` (see :mod:`ingestion_service.pipeline.embed_text`).

    When the contract embedder runs dense and BM42 in one forward pass and sparse is on, the
    sparse vectors are attached here too; the sparse component then has nothing left to do.
    """

    def __init__(
        self,
        embedder: ContractEmbedder,
        embed_text: EmbedTextBuilder,
        *,
        sparse_enabled: bool,
        observer: StageObserver | None = None,
    ) -> None:
        self.embedder = embedder
        self.embed_text = embed_text
        self.sparse_enabled = sparse_enabled
        self.observer = observer

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """Documents with ``embedding`` (and ``sparse_embedding`` from a fused pass)."""
        with timed(self.observer, "dense_embedder"):
            texts = [self.embed_text.indexed_text(doc.content or "", doc.meta) for doc in documents]
            vectors = self._embed(texts, with_sparse=self.embedder.fused and self.sparse_enabled)
            if len(vectors.dense) != len(documents):
                raise EmbeddingFailedError(f"{len(vectors.dense)} vectors for {len(documents)} chunks")
            embedded: list[Document] = []
            for index, document in enumerate(documents):
                sparse = None
                if vectors.sparse is not None and index < len(vectors.sparse):
                    data = vectors.sparse[index]
                    sparse = SparseEmbedding(indices=list(data.indices), values=list(data.values))
                embedded.append(replace(document, embedding=vectors.dense[index], sparse_embedding=sparse))
        return {"documents": embedded}

    def _embed(self, texts: list[str], *, with_sparse: bool) -> DocumentVectors:
        dense: list[list[float]] = []
        sparse: list[SparseVectorData] | None = [] if with_sparse else None
        report_progress("embedding", 0, len(texts))
        for start in range(0, len(texts), EMBED_SLICE):
            checkpoint()
            try:
                part = self.embedder.embed_documents(texts[start : start + EMBED_SLICE], with_sparse=with_sparse)
            except ContractError as exc:
                raise EmbeddingFailedError(str(exc)) from exc
            except Exception as exc:  # any backend failure means chunks without vectors
                raise EmbeddingFailedError(f"{type(exc).__name__}: {exc}") from exc
            dense.extend(part.dense)
            if sparse is not None and part.sparse is not None:
                sparse.extend(part.sparse)
            report_progress("embedding", len(dense), len(texts))
        return DocumentVectors(dense=dense, sparse=sparse)

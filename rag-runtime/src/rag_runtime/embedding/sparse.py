"""Sparse embedders: any fastembed sparse model (BM42, BM25, SPLADE, miniCOIL)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rag_runtime.embedding.dense import load_fastembed, sort_by_length
from rag_runtime.embedding.fastembed_internals import truncating_tokenizer
from rag_runtime.embedding.types import SparseVectorData, TokenWindow
from shared_contract.embedding_models import sparse_queries_run_network

if TYPE_CHECKING:
    from fastembed import SparseTextEmbedding
    from fastembed.sparse.sparse_embedding_base import SparseEmbedding


def to_sparse_data(embedding: SparseEmbedding) -> SparseVectorData:
    """fastembed's numpy sparse embedding as plain lists."""
    return SparseVectorData(
        indices=[int(i) for i in embedding.indices.tolist()],
        values=[float(v) for v in embedding.values.tolist()],
    )


class FastembedSparseEmbedder:
    """A fastembed ``SparseTextEmbedding`` run in-process.

    ``queries_only`` (a process that embeds no documents: the retrieval service without memory):
    a model whose query vectors need its tokenizer alone (BM42, BM25) loads just that, not its ONNX
    network (~90 MB of RSS for BM42); a document embedded after all loads the network then.
    """

    def __init__(
        self,
        model_name: str,
        *,
        model_dir: Path | None,
        cache_dir: Path | None,
        threads: int | None,
        batch_size: int,
        queries_only: bool = False,
    ) -> None:
        self.model_name = model_name
        self.model_dir = model_dir
        self._cache_dir = cache_dir
        self._threads = threads
        self._batch_size = batch_size
        # Without the network: the fused dense + sparse pass cannot be built on this model.
        self.tokenizer_only = queries_only and not sparse_queries_run_network(model_name)
        self._model: SparseTextEmbedding | None = None

    def warm_up(self) -> None:
        """Load the model; idempotent."""
        if self._model is not None:
            return
        from fastembed import SparseTextEmbedding

        self._model = load_fastembed(
            SparseTextEmbedding,
            self.model_name,
            model_dir=self.model_dir,
            cache_dir=self._cache_dir,
            threads=self._threads,
            tokenizer_only=self.tokenizer_only,
        )

    @property
    def model(self) -> SparseTextEmbedding:
        """The loaded fastembed model (``warm_up`` first)."""
        if self._model is None:
            self.warm_up()
        assert self._model is not None
        return self._model

    @property
    def window(self) -> TokenWindow | None:
        """How much of a document the model reads; None when it reads any length (BM25)."""
        tokenizer = truncating_tokenizer(self.model)
        truncation = tokenizer.truncation if tokenizer is not None else None
        if tokenizer is None or truncation is None:
            return None
        return TokenWindow(tokenizer=tokenizer, max_tokens=int(truncation["max_length"]))

    def embed_documents(self, texts: Sequence[str]) -> list[SparseVectorData]:
        """Document-side sparse vectors (the model runs)."""
        order = sort_by_length(texts)
        vectors = list(self.model.embed([texts[i] for i in order], batch_size=self._batch_size))
        result: list[SparseVectorData | None] = [None] * len(texts)
        for position, index in enumerate(order):
            result[index] = to_sparse_data(vectors[position])
        return [vector for vector in result if vector is not None]

    def embed_query(self, text: str) -> SparseVectorData:
        """Query-side sparse vector (BM42 and BM25 hash tokens without running the network)."""
        return to_sparse_data(next(iter(self.model.query_embed(text))))

"""One forward pass for both vectors when the dense and sparse models share a backbone.

BM42 is all-MiniLM-L6-v2 with its last layer's attentions exported. Running that graph once
yields ``last_hidden_state`` (mean-pooled into the dense vector) and ``attention_6`` (BM42's
token weights), halving the network cost of ingestion. Post-processing is fastembed's own, so
the vectors equal those of two separate passes (a test holds this to within float tolerance).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rag_runtime.embedding.dense import FastembedDenseEmbedder, sort_by_length
from rag_runtime.embedding.fastembed_internals import onnx_session, post_process, tokenize
from rag_runtime.embedding.sparse import FastembedSparseEmbedder, to_sparse_data
from rag_runtime.embedding.types import SparseVectorData
from shared_contract.embedding_models import SHARED_BACKBONES

_HIDDEN = "last_hidden_state"
_ATTENTION = "attention_6"
# ONNX Runtime keeps the memory arena a run grew to (a batch of long chunks with its attentions
# takes hundreds of MB); the last batch of a call hands it back, so an idle service shrinks again.
_SHRINK_ARENA = ("memory.enable_memory_arena_shrinkage", "cpu:0")


class FusedForwardPass:
    """Dense + BM42 vectors from one run of the shared network (through ``fastembed_internals``)."""

    def __init__(self, dense: FastembedDenseEmbedder, sparse: FastembedSparseEmbedder, *, batch_size: int) -> None:
        self._dense = dense
        self._sparse = sparse
        self._batch_size = batch_size
        import onnxruntime as ort  # loaded with the models, not at import

        self._last_run = ort.RunOptions()
        self._last_run.add_run_config_entry(*_SHRINK_ARENA)

    @staticmethod
    def supported(dense: FastembedDenseEmbedder, sparse: FastembedSparseEmbedder) -> bool:
        """True when the pair shares a backbone and the sparse graph also exports hidden states."""
        if (dense.model_name, sparse.model_name) not in SHARED_BACKBONES:
            return False
        outputs = {output.name for output in onnx_session(sparse.model).get_outputs()}
        return {_HIDDEN, _ATTENTION} <= outputs

    def embed(self, texts: Sequence[str]) -> tuple[list[list[float]], list[SparseVectorData]]:
        """Dense and sparse vectors for ``texts``, in order."""
        session = onnx_session(self._sparse.model)
        order = sort_by_length(texts)
        dense_out: list[list[float]] = [[] for _ in texts]
        sparse_out: list[SparseVectorData | None] = [None] * len(texts)
        for start in range(0, len(order), self._batch_size):
            batch_indices = order[start : start + self._batch_size]
            # The dense model's tokenizer: the same vocabulary, with the dense truncation length.
            encoded = tokenize(self._dense.model, [texts[i] for i in batch_indices])
            input_ids = np.array([e.ids for e in encoded], dtype=np.int64)
            attention_mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feed = {
                "input_ids": input_ids,
                "attention_mask": attention_mask,
                "token_type_ids": np.zeros_like(input_ids),
            }
            last = start + self._batch_size >= len(order)
            hidden, attention = session.run([_HIDDEN, _ATTENTION], feed, self._last_run if last else None)
            dense_vectors = post_process(self._dense.model, hidden, attention_mask, input_ids)
            sparse_vectors = post_process(self._sparse.model, attention, attention_mask, input_ids)
            for index, vector, sparse_vector in zip(batch_indices, dense_vectors, sparse_vectors, strict=True):
                dense_out[index] = vector.tolist()
                sparse_out[index] = to_sparse_data(sparse_vector)
        return dense_out, [vector for vector in sparse_out if vector is not None]

"""Embedding, written once for both services."""

from rag_runtime.embedding.embedder import SPECIAL_TOKENS_RESERVE, ContractEmbedder, fused_pass_configured
from rag_runtime.embedding.types import DocumentVectors, QueryVectors, SparseVectorData, TokenWindow
from shared_contract.embedding_models import SHARED_BACKBONES, known_dense_dim, local_model_dir

__all__ = [
    "SHARED_BACKBONES",
    "SPECIAL_TOKENS_RESERVE",
    "ContractEmbedder",
    "DocumentVectors",
    "QueryVectors",
    "SparseVectorData",
    "TokenWindow",
    "fused_pass_configured",
    "known_dense_dim",
    "local_model_dir",
]

"""Embedding, written once for both services."""

from shared_contract.embedding.catalog import SHARED_BACKBONES, known_dense_dim, local_model_dir
from shared_contract.embedding.embedder import SPECIAL_TOKENS_RESERVE, ContractEmbedder, fused_pass_configured
from shared_contract.embedding.types import DocumentVectors, QueryVectors, SparseVectorData, TokenWindow

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

"""Embedding, written once for both services."""

from shared_contract.embedding.catalog import SHARED_BACKBONES, known_dense_dim, local_model_dir
from shared_contract.embedding.embedder import SPECIAL_TOKENS_RESERVE, ContractEmbedder
from shared_contract.embedding.types import DocumentVectors, QueryVectors, SparseVectorData

__all__ = [
    "SHARED_BACKBONES",
    "SPECIAL_TOKENS_RESERVE",
    "ContractEmbedder",
    "DocumentVectors",
    "QueryVectors",
    "SparseVectorData",
    "known_dense_dim",
    "local_model_dir",
]

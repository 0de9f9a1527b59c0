"""The contract ingestion-service and retrieval-agent share.

Collection name, vector names, payload keys, embedding models and prefixes, the collection's
layout and manifest, and the code that embeds: one definition, so the two services cannot drift
apart silently.
"""

from shared_contract.embedding import ContractEmbedder, DocumentVectors, QueryVectors, SparseVectorData
from shared_contract.errors import (
    CollectionMissingError,
    ContractConfigError,
    ContractError,
    ContractMismatchError,
    EmbeddingError,
    ManifestMissingError,
    ModelUnavailableError,
    QdrantUnavailableError,
    SparseEmbeddingError,
)
from shared_contract.manifest import CollectionManifest, manifest_for, verify_manifest
from shared_contract.qdrant import (
    CollectionSpec,
    bootstrap_collection,
    call_qdrant,
    close_qdrant,
    collection_has_sparse,
    collection_spec,
    embedded_backend,
    open_qdrant,
    read_manifest,
    verify_collection,
)
from shared_contract.schema import (
    DEFAULT_COLLECTION,
    DENSE_VECTOR,
    PAYLOAD_CONTENT,
    PAYLOAD_META,
    SPARSE_VECTOR,
    MetaKey,
    file_collection_name,
    meta_path,
    user_memory_collection_name,
)
from shared_contract.settings import ContractSettings, load_settings
from shared_contract.version import CONTRACT_VERSION

__all__ = [
    "CONTRACT_VERSION",
    "DEFAULT_COLLECTION",
    "DENSE_VECTOR",
    "PAYLOAD_CONTENT",
    "PAYLOAD_META",
    "SPARSE_VECTOR",
    "CollectionManifest",
    "CollectionMissingError",
    "CollectionSpec",
    "ContractConfigError",
    "ContractEmbedder",
    "ContractError",
    "ContractMismatchError",
    "ContractSettings",
    "DocumentVectors",
    "EmbeddingError",
    "ManifestMissingError",
    "MetaKey",
    "ModelUnavailableError",
    "QdrantUnavailableError",
    "QueryVectors",
    "SparseEmbeddingError",
    "SparseVectorData",
    "bootstrap_collection",
    "call_qdrant",
    "close_qdrant",
    "collection_has_sparse",
    "collection_spec",
    "embedded_backend",
    "file_collection_name",
    "load_settings",
    "manifest_for",
    "meta_path",
    "open_qdrant",
    "read_manifest",
    "user_memory_collection_name",
    "verify_collection",
    "verify_manifest",
]

"""The contract ingestion-service and retrieval-agent share.

Collection name, vector names, payload keys, embedding models and prefixes, the manifest, the
error types, the registry of wire error codes (each with its status and hint) and the wire models:
one definition, so the two services cannot drift apart silently. Plain data and pydantic models
only; the code both services run on it (store, embedding, HTTP edge, LLM clients) is ``rag_runtime``.
"""

from shared_contract.error_codes import (
    CONTRACT_CODES,
    EDGE_CODES,
    SHARED_CODES,
    ErrorCodeSpec,
    register_codes,
    registered_codes,
)
from shared_contract.errors import (
    CollectionMissingError,
    ContractConfigError,
    ContractError,
    ContractMismatchError,
    EmbeddingError,
    LegacyStoreError,
    ManifestMissingError,
    ModelUnavailableError,
    QdrantUnavailableError,
    SparseEmbeddingError,
    StoreIncompatibleError,
    StoreRequestError,
)
from shared_contract.manifest import CollectionManifest, has_live_key, manifest_for, verify_manifest
from shared_contract.names import COLLECTION_NAME_PATTERN, CollectionName, check_collection_name
from shared_contract.schema import (
    DEFAULT_COLLECTION,
    DENSE_VECTOR,
    LIVE_STATE,
    MULTILINGUAL_VECTOR,
    PAYLOAD_CONTENT,
    PAYLOAD_META,
    PENDING_STATE,
    SPARSE_VECTOR,
    MetaKey,
    file_collection_name,
    meta_path,
    user_memory_collection_name,
)
from shared_contract.settings import ContractSettings, load_settings
from shared_contract.version import CONTRACT_VERSION

__all__ = [
    "COLLECTION_NAME_PATTERN",
    "CONTRACT_CODES",
    "CONTRACT_VERSION",
    "DEFAULT_COLLECTION",
    "DENSE_VECTOR",
    "EDGE_CODES",
    "LIVE_STATE",
    "MULTILINGUAL_VECTOR",
    "PAYLOAD_CONTENT",
    "PAYLOAD_META",
    "PENDING_STATE",
    "SHARED_CODES",
    "SPARSE_VECTOR",
    "CollectionManifest",
    "CollectionMissingError",
    "CollectionName",
    "ContractConfigError",
    "ContractError",
    "ContractMismatchError",
    "ContractSettings",
    "EmbeddingError",
    "ErrorCodeSpec",
    "LegacyStoreError",
    "ManifestMissingError",
    "MetaKey",
    "ModelUnavailableError",
    "QdrantUnavailableError",
    "SparseEmbeddingError",
    "StoreIncompatibleError",
    "StoreRequestError",
    "check_collection_name",
    "file_collection_name",
    "has_live_key",
    "load_settings",
    "manifest_for",
    "meta_path",
    "register_codes",
    "registered_codes",
    "user_memory_collection_name",
    "verify_manifest",
]

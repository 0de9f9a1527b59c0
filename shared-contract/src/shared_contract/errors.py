"""Typed failures of the contract layer. Each service's error table maps them to wire codes (``error_codes``)."""

from __future__ import annotations


class ContractError(Exception):
    """Base class of every error the shared contract raises."""


class ContractConfigError(ContractError):
    """A contract setting is invalid; the message names the environment variable."""

    def __init__(self, variable: str, problem: str) -> None:
        self.variable = variable
        self.problem = problem
        super().__init__(f"{variable}: {problem}")


class ContractMismatchError(ContractError):
    """A service's settings disagree with the manifest stored on the collection."""

    def __init__(self, collection: str, field: str, collection_value: object, service_value: object) -> None:
        self.collection = collection
        self.field = field
        self.collection_value = collection_value
        self.service_value = service_value
        super().__init__(
            f"collection {collection!r} was built with {field}={collection_value!r}, "
            f"but this service is configured with {field}={service_value!r}"
        )


class ManifestMissingError(ContractError):
    """The collection exists but carries no contract manifest (it was not created by this contract)."""

    def __init__(self, collection: str) -> None:
        self.collection = collection
        super().__init__(
            f"collection {collection!r} has no contract manifest; it was created by another tool. "
            "Point QDRANT_INDEX at a new collection or re-create this one."
        )


class CollectionMissingError(ContractError):
    """The collection does not exist (yet)."""

    def __init__(self, collection: str) -> None:
        self.collection = collection
        super().__init__(f"collection {collection!r} does not exist yet")


class QdrantUnavailableError(ContractError):
    """Qdrant could not be reached or answered with an error."""


class StoreRequestError(ContractError):
    """The store rejected a well-formed call (unknown vector or field, missing index, bad filter).

    ``missing_text_index`` marks a text query on a field without a scoring full-text index.
    """

    def __init__(self, message: str, *, missing_text_index: bool = False) -> None:
        self.missing_text_index = missing_text_index
        super().__init__(message)


class StoreIncompatibleError(ContractError):
    """The store cannot serve this contract: a Qdrant server too old, or a store in an old format."""


class LegacyStoreError(StoreIncompatibleError):
    """QDRANT_PATH holds a store written by qdrant-client's local mode (before qdrant-edge)."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            f"{path} holds an embedded store in the old qdrant-client local-mode format, which this "
            f"version no longer opens. Copy it into the new engine with `rag migrate --from {path}` "
            "(the old files are kept), or point QDRANT_PATH at an empty directory."
        )


class ModelUnavailableError(ContractError):
    """An embedding model could not be loaded (not built locally and no model hub reachable)."""


class EmbeddingError(ContractError):
    """The dense embedder failed."""


class SparseEmbeddingError(ContractError):
    """The sparse embedder failed."""

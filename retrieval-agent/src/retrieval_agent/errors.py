"""Domain errors of the retrieval agent; ``error_table.py`` maps each to a status and wire code."""

from __future__ import annotations


class RetrievalError(Exception):
    """Base class of the retrieval agent's own failures."""


class RerankerError(RetrievalError):
    """The reranker failed; the pipeline fails open and counts it."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class QueryGenerationError(RetrievalError):
    """The LLM did not produce usable queries; the pipeline falls back to the user's message."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class InvalidFilterError(RetrievalError):
    """The request's ``filter`` cannot run (an attribute not in INDEXED_ATTRIBUTES, a condition of the
    wrong type): a 422 naming the key, like any other invalid field."""


class AgenticDisabledError(RetrievalError):
    """A search asked for ``mode: agentic`` on a service without the agent (ENABLE_AGENTIC_RAG=false):
    a 422, since running the linear search instead would answer something else than was asked."""


class MemoryFailure(RetrievalError):
    """Base class of long-term memory failures."""


class MemoryDisabledError(MemoryFailure):
    """ENABLE_MEMORY is off: the memory API answers 503 MEMORY_DISABLED."""


class FactNotFoundError(MemoryFailure):
    """No fact with this id in the user's memory (404 FACT_NOT_FOUND)."""


class InvalidMemoryRequestError(MemoryFailure):
    """A user or fact id that breaks its rule, or a fact text out of bounds (422 INVALID_REQUEST)."""


class MemoryStorageError(MemoryFailure):
    """The memory folder or its Git repository failed, or a link in it was refused (500 MEMORY_FAILED);
    nothing of the change was stored."""


def first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first failure inside a task group's exception group (nested groups unwrapped): the typed
    error that maps to its wire code, not the group around it."""
    first = group.exceptions[0]
    return first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


class KnowledgeBaseError(RetrievalError):
    """A failure of a knowledge-base tool (MCP, /tools) the caller can act on; its message is shown
    as it is. ``cause``: the service's own typed error behind it (Qdrant down, ...), which HTTP
    callers get with its own code and status."""

    def __init__(self, message: str, *, cause: Exception | None = None) -> None:
        super().__init__(message)
        self.cause = cause


class CollectionNotFoundError(KnowledgeBaseError):
    """The collection holds no committed document (collections exist only as values on chunks,
    so an unknown name and an empty one look the same)."""

    def __init__(self, collection: str) -> None:
        super().__init__(
            f"collection {collection!r} holds no documents (unknown or empty); list_collections shows the knowledge bases"
        )
        self.collection = collection


class DocumentNotFoundError(KnowledgeBaseError):
    """No committed version of the file in that collection."""

    def __init__(self, file_id: str, collection: str) -> None:
        super().__init__(
            f"no document {file_id!r} in collection {collection!r}; list_documents shows the collection's file ids"
        )
        self.file_id = file_id
        self.collection = collection

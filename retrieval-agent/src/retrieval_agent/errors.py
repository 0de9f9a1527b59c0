"""Domain errors of the retrieval agent; ``api/errors.py`` maps each to a wire code."""

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

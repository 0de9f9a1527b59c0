"""Haystack components of the indexing pipeline, one per module."""

__all__: list[str] = []

"""The indexing pipeline: components, assembly, and the versioning protocol."""

__all__: list[str] = []

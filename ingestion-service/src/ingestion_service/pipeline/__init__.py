"""The indexing pipeline's components and the text they build: chunking, tables, context, embed text."""

__all__: list[str] = []

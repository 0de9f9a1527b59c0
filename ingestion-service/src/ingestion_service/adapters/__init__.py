"""The only modules that talk to external systems: Qdrant, S3, extraction engines, tokenizers."""

__all__: list[str] = []

"""ingestion-service: extract, chunk, embed and write documents into the shared Qdrant collection."""

__all__: list[str] = []

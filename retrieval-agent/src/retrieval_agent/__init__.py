"""retrieval-agent: hybrid search over the shared Qdrant collection for Open WebUI's retrieval hook."""

__all__: list[str] = []

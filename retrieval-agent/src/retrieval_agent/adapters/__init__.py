"""The only modules that talk to external systems: Qdrant, the reranker, the LLM."""

__all__: list[str] = []

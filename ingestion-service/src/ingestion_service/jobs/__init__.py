"""Background jobs: async ingests (``Prefer: respond-async``) and reindexes, on one engine (``engine``)."""

__all__: list[str] = []

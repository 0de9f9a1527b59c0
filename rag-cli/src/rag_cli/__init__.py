"""``rag``: run both services locally (``rag dev``), ingest files and search from a terminal."""

__all__: list[str] = []

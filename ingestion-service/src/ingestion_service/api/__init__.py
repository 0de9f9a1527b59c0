"""HTTP layer: thin routes over the runtime; error mapping in one place."""

__all__: list[str] = []

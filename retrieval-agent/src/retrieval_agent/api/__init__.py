"""HTTP layer: wire models, dependencies, error mapping, routes."""

__all__: list[str] = []

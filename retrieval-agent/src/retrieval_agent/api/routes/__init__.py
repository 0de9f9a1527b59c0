"""Thin route modules."""

__all__: list[str] = []

"""The linear search pipeline, as plain typed steps the agentic loop can reuse."""

__all__: list[str] = []

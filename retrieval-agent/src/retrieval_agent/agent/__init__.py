"""Agentic mode: a PydanticAI loop that writes queries, calls the retrieval tools and grades results."""

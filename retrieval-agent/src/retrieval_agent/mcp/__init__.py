"""The knowledge base over MCP: the server definition (``server``), its backend port (``models``) and
the retrieval agent's in-process backend (``backend``)."""

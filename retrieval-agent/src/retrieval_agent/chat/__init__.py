"""The OpenAI-compatible chat endpoint: retrieval first, then an upstream chat model through LiteLLM.

``upstream`` is the adapter (the only code that talks to the model), ``context`` numbers the
sources and writes the context prompt, ``tools`` runs the RAG tools, ``service`` orchestrates.
"""

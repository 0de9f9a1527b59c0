"""The code both RAG services run on the contract: store, embedding, HTTP edge, language identification."""

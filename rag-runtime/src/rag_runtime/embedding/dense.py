"""Dense embedders: fastembed in-process, OpenAI-compatible ``/embeddings``, TEI ``/embed``.

They embed text exactly as given; prefixes are applied by :class:`ContractEmbedder`.
All calls are synchronous and CPU- or I/O-bound: async callers offload them to a thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from rag_runtime.embedding.fastembed_internals import embed_one, model_tokenizer, onnx_session, signal_before_run
from shared_contract.errors import EmbeddingError, ModelUnavailableError

if TYPE_CHECKING:
    from fastembed import TextEmbedding
    from tokenizers import Tokenizer

_RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class _TransientStatusError(Exception):
    """A retryable HTTP status; becomes an EmbeddingError once the retries are spent."""

    def __init__(self, status_code: int) -> None:
        self.status_code = status_code
        super().__init__(f"HTTP {status_code}")


class DenseEmbedder(Protocol):
    """What :class:`ContractEmbedder` needs from a dense backend."""

    model_name: str

    def warm_up(self) -> None:
        """Load the model or check the endpoint; idempotent."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...

    @property
    def max_tokens(self) -> int | None:
        """The longest input in tokens the model reads without truncating, when known."""
        ...


def sort_by_length(texts: Sequence[str]) -> list[int]:
    """Indices of ``texts`` ordered by length, so each batch pads to similar lengths."""
    return sorted(range(len(texts)), key=lambda index: len(texts[index]))


ModelT = TypeVar("ModelT")


def load_fastembed(
    factory: Callable[..., ModelT],
    model_name: str,
    *,
    model_dir: Path | None,
    cache_dir: Path | None,
    threads: int | None,
    tokenizer_only: bool = False,
) -> ModelT:
    """Load a fastembed model from its offline build when there is one, else by name.

    ``tokenizer_only``: built with ``lazy_load`` and its tokenizer loaded alone; its ONNX session
    loads on the first embedding (or is handed one, :func:`.fastembed_internals.replace_onnx_session`).
    """
    try:
        model = factory(
            model_name,
            cache_dir=str(cache_dir) if cache_dir is not None else None,
            threads=threads,
            specific_model_path=str(model_dir) if model_dir is not None else None,
            **({"lazy_load": True} if tokenizer_only else {}),
        )
        if tokenizer_only:
            model.token_count("")  # type: ignore[attr-defined]  # loads the tokenizer alone (fastembed's public way to)
        return model
    except Exception as exc:  # fastembed raises assorted hub/IO errors; all mean "not loadable"
        where = f"from {model_dir}" if model_dir is not None else "from the model hub"
        raise ModelUnavailableError(
            f"could not load {model_name} {where} ({type(exc).__name__}). Without a model hub, run "
            "`make models` and set LOCAL_MODELS_DIR to its output directory."
        ) from exc


class FastembedDenseEmbedder:
    """A fastembed ``TextEmbedding`` run in-process on ONNX Runtime."""

    def __init__(
        self,
        model_name: str,
        *,
        model_dir: Path | None,
        cache_dir: Path | None,
        threads: int | None,
        batch_size: int,
    ) -> None:
        self.model_name = model_name
        self.model_dir = model_dir
        self._cache_dir = cache_dir
        self._threads = threads
        self._batch_size = batch_size
        self._model: TextEmbedding | None = None

    def warm_up(self) -> None:
        if self._model is not None:
            return
        from fastembed import TextEmbedding

        self._model = load_fastembed(
            TextEmbedding, self.model_name, model_dir=self.load_dir(), cache_dir=self._cache_dir, threads=self._threads
        )

    def load_dir(self) -> Path | None:
        """The directory the model loads from: its offline build, or None (fastembed downloads it by name)."""
        return self.model_dir

    @property
    def threads(self) -> int | None:
        """ONNX Runtime's thread count for this model (None: fastembed's default, every core)."""
        return self._threads

    @property
    def loaded(self) -> bool:
        """Whether the ONNX session is in memory (models load on first use or ``warm_up``)."""
        return self._model is not None

    @property
    def model(self) -> TextEmbedding:
        """The loaded fastembed model (``warm_up`` first)."""
        if self._model is None:
            self.warm_up()
        assert self._model is not None
        return self._model

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's own tokenizer, with its truncation settings."""
        return model_tokenizer(self.model)

    @property
    def max_tokens(self) -> int | None:
        truncation = self.tokenizer.truncation
        return int(truncation["max_length"]) if truncation else None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        order = sort_by_length(texts)
        vectors = list(self.model.embed([texts[i] for i in order], batch_size=self._batch_size))
        result: list[list[float]] = [[] for _ in texts]
        for position, index in enumerate(order):
            result[index] = vectors[position].tolist()
        return result

    def embed_one(self, text: str, before_run: Callable[[], None] | None = None) -> list[float]:
        """``text``'s vector through one forward pass, without ``embed``'s batching (a query: ~0.1 ms).

        ``before_run`` is called from this thread once the text is tokenized, just before the
        network runs. ONNX Runtime releases the GIL for the run, so from then on other Python
        threads run beside it (the search sends its term legs). Not called when tokenizing fails.
        """
        if before_run is None:
            return self._forward_one(text)
        return signal_before_run(self.model, before_run, lambda: self._forward_one(text))

    def _forward_one(self, text: str) -> list[float]:
        if onnx_session(self.model) is None:  # built lazily and not loaded yet: embed() loads it
            return self.embed([text])[0]
        vector: list[float] = embed_one(self.model, text).tolist()
        return vector


class _HttpDenseEmbedder:
    """Shared retry and error handling for HTTP embedding endpoints."""

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str,
        api_key: str | None,
        timeout: float,
        max_retries: int,
        batch_size: int,
        max_tokens: int | None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.model_name = model_name
        self._base_url = base_url.rstrip("/")
        self._max_retries = max_retries
        self._batch_size = batch_size
        self._max_tokens = max_tokens
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout, headers=headers, transport=transport)

    @property
    def max_tokens(self) -> int | None:
        return self._max_tokens

    def warm_up(self) -> None:
        """Nothing to load; the dimension probe in ContractEmbedder checks the endpoint."""

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        url = f"{self._base_url}{path}"
        retrying = Retrying(
            stop=stop_after_attempt(self._max_retries + 1),
            wait=wait_exponential(multiplier=0.25, max=4.0),
            retry=retry_if_exception_type((httpx.TransportError, _TransientStatusError)),
            reraise=True,
        )
        try:
            response = retrying(self._post_once, url, body)
        except httpx.TransportError as exc:
            raise EmbeddingError(f"embedding endpoint unreachable: {type(exc).__name__}") from exc
        except _TransientStatusError as exc:
            raise EmbeddingError(f"embedding endpoint answered HTTP {exc.status_code}") from exc
        return response.json()

    def _post_once(self, url: str, body: dict[str, Any]) -> httpx.Response:
        response = self._client.post(url, json=body)
        if response.status_code in _RETRYABLE_STATUS:
            raise _TransientStatusError(response.status_code)
        if response.status_code >= 400:
            raise EmbeddingError(f"embedding endpoint answered HTTP {response.status_code}")
        return response

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors.extend(self._embed_batch(list(texts[start : start + self._batch_size])))
        return vectors

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        raise NotImplementedError


class OpenAICompatDenseEmbedder(_HttpDenseEmbedder):
    """An OpenAI-compatible ``POST {base}/embeddings`` endpoint (LiteLLM, vLLM, Infinity, OpenAI)."""

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        payload = self._post("/embeddings", {"model": self.model_name, "input": texts})
        try:
            items = sorted(payload["data"], key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in items]
        except (KeyError, TypeError) as exc:
            raise EmbeddingError("embedding endpoint returned an unexpected body") from exc
        if len(vectors) != len(texts):
            raise EmbeddingError(f"embedding endpoint returned {len(vectors)} vectors for {len(texts)} inputs")
        return vectors


class TeiDenseEmbedder(_HttpDenseEmbedder):
    """Hugging Face text-embeddings-inference ``POST {base}/embed``."""

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        # truncate=false: an over-long chunk is an error, never silently cut.
        payload = self._post("/embed", {"inputs": texts, "normalize": True, "truncate": False})
        try:
            vectors = [[float(x) for x in vector] for vector in payload]
        except (TypeError, ValueError) as exc:
            raise EmbeddingError("embedding endpoint returned an unexpected body") from exc
        if len(vectors) != len(texts):
            raise EmbeddingError(f"embedding endpoint returned {len(vectors)} vectors for {len(texts)} inputs")
        return vectors

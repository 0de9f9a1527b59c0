"""Cross-encoder rerankers: an HTTP ``/v1/rerank`` endpoint or an in-process fastembed model."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import anyio.to_thread
import httpx

from rag_runtime.embedding import local_model_dir
from retrieval_agent.errors import RerankerError
from retrieval_agent.settings import Settings
from shared_contract import ModelUnavailableError


class Reranker(Protocol):
    """Scores documents against a query; one score per document, higher is more relevant."""

    async def score(self, query: str, documents: Sequence[str]) -> list[float]:
        """Raise RerankerError on any failure."""
        ...

    async def aclose(self) -> None:
        """Release connections or models."""
        ...


def parse_rerank_response(body: Any, count: int) -> list[float]:
    """Scores per input index from a TEI, Infinity or Cohere-style rerank body.

    Accepts ``{"results": [{"index", "relevance_score"}]}`` (Cohere, Infinity, Jina) and a bare
    list ``[{"index", "score"}]`` (TEI). Every document must get exactly one score.
    """
    items = body.get("results", body.get("data")) if isinstance(body, dict) else body
    if not isinstance(items, list):
        raise RerankerError("bad_response", "rerank response has no result list")
    scores: list[float | None] = [None] * count
    for item in items:
        if not isinstance(item, dict):
            raise RerankerError("bad_response", "rerank result is not an object")
        index = item.get("index")
        value = item.get("relevance_score", item.get("score"))
        if not isinstance(index, int) or not 0 <= index < count or not isinstance(value, int | float):
            raise RerankerError("bad_response", f"rerank result has a bad index or score: {item!r:.200}")
        scores[index] = float(value)
    missing = [index for index, score in enumerate(scores) if score is None]
    if missing:
        raise RerankerError("bad_response", f"rerank response lacks scores for {len(missing)} documents")
    return [score for score in scores if score is not None]


def rerank_url(base_url: str) -> str:
    """``{base}/v1/rerank``; a base that already ends in ``/v1`` is not doubled."""
    base = base_url.rstrip("/")
    return f"{base}/rerank" if base.endswith("/v1") else f"{base}/v1/rerank"


class HttpReranker:
    """POST ``{RERANKER_API_BASE_URL}/v1/rerank`` with ``{model, query, documents, top_n}``."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = rerank_url(base_url)
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client if client is not None else httpx.AsyncClient(timeout=timeout, headers=headers)

    async def score(self, query: str, documents: Sequence[str]) -> list[float]:
        body = {"model": self.model, "query": query, "documents": list(documents), "top_n": len(documents)}
        try:
            response = await self._client.post(self.url, json=body)
        except httpx.TimeoutException as exc:
            raise RerankerError("timeout", f"reranker timed out: {exc!r}") from exc
        except httpx.HTTPError as exc:
            raise RerankerError("unreachable", f"reranker unreachable: {type(exc).__name__}") from exc
        if response.status_code >= 400:
            raise RerankerError("http_status", f"reranker answered {response.status_code}")
        try:
            payload = response.json()
        except ValueError as exc:
            raise RerankerError("bad_response", "reranker answered with invalid JSON") from exc
        return parse_rerank_response(payload, len(documents))

    async def aclose(self) -> None:
        await self._client.aclose()


class CrossEncoder(Protocol):
    """What the in-process reranker needs of a model (fastembed's ``TextCrossEncoder`` fits)."""

    def rerank(self, query: str, documents: Iterable[str]) -> Iterable[float]:
        """One relevance score per document, in input order."""
        ...


class FastembedReranker:
    """fastembed ``TextCrossEncoder`` in-process; load it with :meth:`warm_up` at start-up.

    ``model``: an already-loaded cross-encoder (shared by hosts, or scripted in tests); then
    :meth:`warm_up` loads nothing.
    """

    def __init__(self, settings: Settings, *, model: CrossEncoder | None = None) -> None:
        self.settings = settings
        self._model: CrossEncoder | None = model

    def warm_up(self) -> None:
        """Load the cross-encoder; ModelUnavailableError with what to do when it cannot load."""
        if self._model is not None:
            return
        from fastembed.rerank.cross_encoder import TextCrossEncoder

        model_dir = local_model_dir(self.settings.local_models_dir, self.settings.reranker_model)
        kwargs: dict[str, Any] = {}
        if model_dir is not None:
            kwargs["specific_model_path"] = str(model_dir)
        if self.settings.fastembed_cache_path is not None:
            kwargs["cache_dir"] = str(self.settings.fastembed_cache_path)
        if self.settings.embedding_threads:
            kwargs["threads"] = self.settings.embedding_threads
        try:
            self._model = TextCrossEncoder(self.settings.reranker_model, **kwargs)
        except Exception as exc:  # fastembed raises many types; all mean "model not loadable"
            where = f"from {model_dir}" if model_dir is not None else "from the model hub"
            raise ModelUnavailableError(
                f"could not load reranker {self.settings.reranker_model} {where} ({type(exc).__name__}: {exc}). "
                "Build it into LOCAL_MODELS_DIR, use RERANKER_PROVIDER=http, or set ENABLE_RERANKING=false."
            ) from exc

    async def score(self, query: str, documents: Sequence[str]) -> list[float]:
        model = self._model
        if model is None:
            raise RerankerError("not_loaded", "reranker model is not loaded")

        def run() -> list[float]:
            return [float(value) for value in model.rerank(query, list(documents))]

        try:
            scores = await anyio.to_thread.run_sync(run)
        except Exception as exc:  # ONNX runtime failures of any kind: fail open upstream
            raise RerankerError("model_error", f"cross-encoder failed: {type(exc).__name__}") from exc
        if len(scores) != len(documents):
            raise RerankerError("bad_response", "cross-encoder returned the wrong number of scores")
        return scores

    async def aclose(self) -> None:
        self._model = None


def build_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker, or None when ENABLE_RERANKING is off. Call warm-up separately."""
    if not settings.enable_reranking:
        return None
    if settings.reranker_provider == "fastembed":
        return FastembedReranker(settings)
    assert settings.reranker_api_base_url is not None  # enforced by Settings
    api_key = settings.reranker_api_key.get_secret_value() if settings.reranker_api_key else None
    return HttpReranker(
        settings.reranker_api_base_url, settings.reranker_model, api_key=api_key, timeout=settings.reranker_timeout
    )

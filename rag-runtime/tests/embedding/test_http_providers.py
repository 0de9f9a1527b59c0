from __future__ import annotations

import json

import httpx
import pytest

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.embedding.dense import OpenAICompatDenseEmbedder, TeiDenseEmbedder
from shared_contract import ContractSettings, EmbeddingError, load_settings


def _openai(handler: httpx.MockTransport) -> OpenAICompatDenseEmbedder:
    return OpenAICompatDenseEmbedder(
        "intfloat/multilingual-e5-large",
        base_url="http://embed.test/v1/",
        api_key="secret-key",
        timeout=5,
        max_retries=2,
        batch_size=2,
        max_tokens=512,
        transport=handler,
    )


def test_openai_compat_batches_orders_by_index_and_authenticates() -> None:
    calls: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        calls.append(body)
        assert request.url == "http://embed.test/v1/embeddings"
        assert request.headers["Authorization"] == "Bearer secret-key"
        data = [{"index": i, "embedding": [float(len(text))]} for i, text in enumerate(body["input"])]
        return httpx.Response(200, json={"data": list(reversed(data))})

    vectors = _openai(httpx.MockTransport(handler)).embed(["a", "bb", "ccc"])
    assert vectors == [[1.0], [2.0], [3.0]]
    assert [call["input"] for call in calls] == [["a", "bb"], ["ccc"]]
    assert calls[0]["model"] == "intfloat/multilingual-e5-large"


def test_openai_compat_retries_transient_errors() -> None:
    attempts = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        attempts["n"] += 1
        if attempts["n"] < 3:
            return httpx.Response(503)
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": [0.5]}]})

    assert _openai(httpx.MockTransport(handler)).embed(["x"]) == [[0.5]]
    assert attempts["n"] == 3


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (httpx.Response(400, json={"error": "bad"}), "HTTP 400"),
        (httpx.Response(503), "HTTP 503"),
        (httpx.Response(200, json={"unexpected": True}), "unexpected body"),
        (httpx.Response(200, json={"data": []}), "0 vectors for 1"),
    ],
)
def test_openai_compat_failures_are_embedding_errors(response: httpx.Response, message: str) -> None:
    embedder = _openai(httpx.MockTransport(lambda request: response))
    with pytest.raises(EmbeddingError, match=message):
        embedder.embed(["x"])


def test_tei_never_asks_for_silent_truncation() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert request.url == "http://tei.test/embed"
        assert body["truncate"] is False
        return httpx.Response(200, json=[[0.1, 0.2] for _ in body["inputs"]])

    embedder = TeiDenseEmbedder(
        "BAAI/bge-m3",
        base_url="http://tei.test",
        api_key=None,
        timeout=5,
        max_retries=0,
        batch_size=8,
        max_tokens=None,
        transport=httpx.MockTransport(handler),
    )
    assert embedder.embed(["a", "b"]) == [[0.1, 0.2], [0.1, 0.2]]


def test_unreachable_endpoint_is_an_embedding_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(EmbeddingError, match="unreachable"):
        _openai(httpx.MockTransport(refuse)).embed(["x"])


def test_closing_the_contract_embedder_closes_its_http_endpoint_pool() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": [0.5]}]})

    settings = load_settings(
        ContractSettings,
        embedding_provider="openai-compat",
        embedding_model="intfloat/multilingual-e5-large",
        embedding_api_base_url="http://embed.test/v1/",
        enable_sparse_embeddings=False,
    )
    backend = _openai(httpx.MockTransport(handler))
    embedder = ContractEmbedder(settings, dense_backend=backend)
    assert backend.embed(["x"]) == [[0.5]]
    embedder.close()
    with pytest.raises(RuntimeError, match="closed"):
        backend.embed(["x"])

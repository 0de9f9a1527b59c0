from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from retrieval_agent.adapters.reranker import (
    FastembedReranker,
    HttpReranker,
    build_reranker,
    parse_rerank_response,
    rerank_url,
)
from retrieval_agent.errors import RerankerError
from shared_contract import ModelUnavailableError

from ..conftest import make_settings  # noqa: TID252


@pytest.mark.parametrize(
    "body",
    [
        {"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]},
        [{"index": 1, "score": 0.9}, {"index": 0, "score": 0.1}],
        {"data": [{"index": 0, "score": 0.1}, {"index": 1, "relevance_score": 0.9}]},
    ],
)
def test_parse_cohere_infinity_and_tei_bodies(body: Any) -> None:
    assert parse_rerank_response(body, 2) == [0.1, 0.9]


@pytest.mark.parametrize(
    "body",
    [
        {"results": [{"index": 0, "relevance_score": 1}]},
        {"results": [{"index": 5, "score": 1}, {"index": 0, "score": 1}]},
        {"x": 1},
        [1, 2],
    ],
)
def test_parse_rejects_incomplete_bodies(body: Any) -> None:
    with pytest.raises(RerankerError) as info:
        parse_rerank_response(body, 2)
    assert info.value.reason == "bad_response"


def test_rerank_url() -> None:
    assert rerank_url("http://r:80") == "http://r:80/v1/rerank"
    assert rerank_url("http://r:80/v1/") == "http://r:80/v1/rerank"


def test_http_reranker_against_a_scripted_tei_server(serve: Callable[[Any], str]) -> None:
    received: list[tuple[dict[str, Any], str | None]] = []

    async def tei(request: Request) -> Response:
        payload = await request.json()
        received.append((payload, request.headers.get("authorization")))
        if payload["query"] == "boom":
            return Response("not json", media_type="text/plain")
        return JSONResponse([{"index": i, "score": float(len(d))} for i, d in enumerate(payload["documents"])])

    base = serve(Starlette(routes=[Route("/v1/rerank", tei, methods=["POST"])]))

    async def run() -> tuple[list[float], RerankerError]:
        reranker = HttpReranker(base, "bge-reranker", api_key="secret")
        try:
            scores = await reranker.score("q", ["a", "bbb"])
            with pytest.raises(RerankerError) as info:
                await reranker.score("boom", ["a"])
        finally:
            await reranker.aclose()
        return scores, info.value

    scores, error = anyio.run(run)
    assert scores == [1.0, 3.0]
    assert received[0] == (
        {"model": "bge-reranker", "query": "q", "documents": ["a", "bbb"], "top_n": 2},
        "Bearer secret",
    )
    assert error.reason == "bad_response"


def test_http_reranker_timeout(serve: Callable[[Any], str]) -> None:
    async def slow(_: Request) -> JSONResponse:
        await anyio.sleep(1)
        return JSONResponse([])

    base = serve(Starlette(routes=[Route("/v1/rerank", slow, methods=["POST"])]))

    async def run() -> RerankerError:
        reranker = HttpReranker(base, "m", timeout=0.1)
        try:
            with pytest.raises(RerankerError) as info:
                await reranker.score("q", ["a"])
        finally:
            await reranker.aclose()
        return info.value

    assert anyio.run(run).reason == "timeout"


class ScriptedCrossEncoder:
    """A cross-encoder handed in through the constructor: scores = does the document contain the query."""

    def __init__(self, *, extra: int = 0, fail: bool = False) -> None:
        self.extra = extra
        self.fail = fail
        self.calls: list[tuple[str, list[str]]] = []

    def rerank(self, query: str, documents: Iterable[str]) -> Iterable[float]:
        texts = list(documents)
        self.calls.append((query, texts))
        if self.fail:
            raise RuntimeError("onnxruntime: out of memory")
        return [float(query in text) for text in texts] + [0.0] * self.extra


def _fastembed(model: ScriptedCrossEncoder) -> FastembedReranker:
    # A model name that cannot load: warm_up must not try, since a model was handed in.
    settings = make_settings(enable_reranking=True, reranker_provider="fastembed", reranker_model="nobody/none")
    return FastembedReranker(settings, model=model)


def test_fastembed_reranker_scores_with_the_model_it_was_given() -> None:
    model = ScriptedCrossEncoder()
    reranker = _fastembed(model)
    reranker.warm_up()
    assert anyio.run(lambda: reranker.score("cat", ["a cat", "a dog"])) == [1.0, 0.0]
    assert model.calls == [("cat", ["a cat", "a dog"])]


@pytest.mark.parametrize(
    ("model", "reason"),
    [(ScriptedCrossEncoder(fail=True), "model_error"), (ScriptedCrossEncoder(extra=1), "bad_response")],
)
def test_fastembed_reranker_failures_are_typed(model: ScriptedCrossEncoder, reason: str) -> None:
    with pytest.raises(RerankerError) as info:
        anyio.run(lambda: _fastembed(model).score("cat", ["a cat"]))
    assert info.value.reason == reason


def test_fastembed_reranker_not_loaded_fails_open_reason() -> None:
    reranker = FastembedReranker(make_settings())
    with pytest.raises(RerankerError) as info:
        anyio.run(lambda: reranker.score("q", ["a"]))
    assert info.value.reason == "not_loaded"


def test_fastembed_reranker_unknown_model_is_a_clear_startup_error() -> None:
    settings = make_settings(
        enable_reranking=True, reranker_provider="fastembed", reranker_model="nobody/no-such-reranker"
    )
    reranker = build_reranker(settings)
    assert isinstance(reranker, FastembedReranker)
    with pytest.raises(ModelUnavailableError, match="RERANKER_PROVIDER=http"):
        reranker.warm_up()


def test_no_reranker_when_disabled() -> None:
    assert build_reranker(make_settings()) is None

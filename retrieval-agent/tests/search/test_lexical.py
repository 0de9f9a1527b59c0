from __future__ import annotations

import anyio

from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.search.lexical import Bm25Cache, Bm25Index, tokenize
from retrieval_agent.search.postprocess import Hit


def hit(text: str) -> Hit:
    return Hit(point_id=text, content=text)


def test_tokenize_keeps_nordic_letters() -> None:
    assert tokenize("Blåbær-grød, Æble!") == ["blåbær", "grød", "æble"]


def test_bm25_ranks_rare_and_repeated_terms_higher() -> None:
    index = Bm25Index([hit("the cat sat"), hit("the dog dog barked"), hit("the bird"), hit("nothing here")])
    ranked = index.search("dog cat", 10)
    assert [h.content for h in ranked] == ["the dog dog barked", "the cat sat"]
    assert ranked[0].score > ranked[1].score > 0
    assert index.search("the", 10)[0].score > 0
    assert index.search("unrelated", 10) == []
    assert Bm25Index([]).search("x", 3) == []


def test_cache_builds_once_per_ttl_and_key() -> None:
    metrics = SearchMetrics()
    cache = Bm25Cache(ttl_seconds=60, max_docs=2, metrics=metrics)
    loads: list[int] = []

    async def load(max_docs: int) -> list[Hit]:
        loads.append(max_docs)
        return [hit("zebra"), hit("lion")]

    async def run() -> None:
        first = await cache.index_for(["b", "a"], load)
        second = await cache.index_for(["a", "b"], load)
        assert first is second
        await cache.index_for(["c"], load)

    anyio.run(run)
    assert loads == [2, 2]
    expired = Bm25Cache(ttl_seconds=0, max_docs=5, metrics=metrics)
    anyio.run(lambda: expired.index_for(["a"], load))
    anyio.run(lambda: expired.index_for(["a"], load))
    assert len(loads) == 4

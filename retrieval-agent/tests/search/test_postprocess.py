from __future__ import annotations

import pytest
from qdrant_client import models

from retrieval_agent.search.postprocess import Hit, content_hash, dedup, dense_score, point_to_hit, rrf_fuse, top_k


def hit(text: str, score: float = 0.0) -> Hit:
    return Hit(point_id=text, content=text, meta={"name": text}, score=score)


def test_point_to_hit_keeps_meta_verbatim() -> None:
    point = models.ScoredPoint(
        id="5f0c", version=1, score=0.5, payload={"id": "h", "content": "text", "meta": {"page": 2, "headers": ["A"]}}
    )
    assert point_to_hit(point) == Hit(point_id="5f0c", content="text", meta={"page": 2, "headers": ["A"]}, score=0.5)
    assert point_to_hit(point, score=0.75).score == 0.75


def test_point_without_payload_is_an_empty_hit() -> None:
    assert point_to_hit(models.Record(id=1, payload=None)) == Hit(point_id="1", content="", meta={}, score=0.0)


@pytest.mark.parametrize(("cosine", "expected"), [(1.0, 1.0), (0.0, 0.5), (-1.0, 0.0), (1.0000001, 1.0)])
def test_dense_score(cosine: float, expected: float) -> None:
    assert dense_score(cosine) == expected


def test_dedup_by_content_hash_keeps_first() -> None:
    first, twin = Hit("1", "same", {"k": 1}), Hit("2", "same", {"k": 2})
    assert dedup([first, hit("other"), twin]) == [first, hit("other")]
    assert first.content_hash == content_hash("same")


def test_rrf_golden() -> None:
    fused = rrf_fuse([[hit("a"), hit("b"), hit("c")], [hit("c"), hit("a")]], k=60, limit=10)
    assert [(h.content, round(h.score, 8)) for h in fused] == [
        ("a", round(1 / 60 + 1 / 61, 8)),
        ("c", round(1 / 62 + 1 / 60, 8)),
        ("b", round(1 / 61, 8)),
    ]


def test_rrf_weights_and_limit() -> None:
    fused = rrf_fuse([[hit("a")], [hit("b")]], k=2, limit=1, weights=[1.0, 2.0])
    # weight 2 at rank 1: 1 / (1/2 + 1) = 2/3 beats 1 / (1 + 1) = 1/2
    assert [(h.content, h.score) for h in fused] == [("b", pytest.approx(2 / 3))]
    with pytest.raises(ValueError):
        rrf_fuse([[hit("a")]], k=2, limit=1, weights=[1.0, 2.0])


def test_top_k() -> None:
    assert top_k([hit("a"), hit("a"), hit("b"), hit("c")], 2) == [hit("a"), hit("b")]

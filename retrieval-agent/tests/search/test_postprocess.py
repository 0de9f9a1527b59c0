from __future__ import annotations

import pytest

from rag_runtime.store import PointRecord
from retrieval_agent.search.postprocess import (
    Hit,
    content_hash,
    dedup,
    dense_score,
    newest_versions,
    point_to_hit,
    rrf_fuse,
    top_k,
)


def hit(text: str, score: float = 0.0) -> Hit:
    return Hit(point_id=text, content=text, meta={"name": text}, score=score)


def test_point_to_hit_keeps_meta_verbatim() -> None:
    point = PointRecord(
        point_id="5f0c", score=0.5, payload={"id": "h", "content": "text", "meta": {"page": 2, "headers": ["A"]}}
    )
    assert point_to_hit(point) == Hit(point_id="5f0c", content="text", meta={"page": 2, "headers": ["A"]}, score=0.5)
    assert point_to_hit(point, score=0.75).score == 0.75


def test_point_without_payload_is_an_empty_hit() -> None:
    assert point_to_hit(PointRecord(point_id="1")) == Hit(point_id="1", content="", meta={}, score=0.0)
    odd = PointRecord(point_id="2", payload={"content": 3, "meta": "x"})
    assert point_to_hit(odd) == Hit(point_id="2", content="", meta={}, score=0.0)


def version(text: str, file_id: str | None, seq: object, tenant: str = "kb") -> Hit:
    meta: dict[str, object] = {"collection_name": tenant, "ingest_seq": seq}
    if file_id is not None:
        meta["file_id"] = file_id
    return Hit(point_id=text, content=text, meta=meta)


def test_newest_versions_keeps_only_the_newest_seq_of_a_file_in_a_tenant() -> None:
    hits = [
        version("f-old-1", "f", 1),
        version("g-1", "g", 7),
        version("f-new-1", "f", 2),
        version("f-other-tenant", "f", 1, tenant="kb-2"),  # another tenant's copy is its own file
        version("no-file", None, 1),
        version("f-old-2", "f", 1),
        version("f-new-2", "f", 2),
    ]
    assert [hit.content for hit in newest_versions(hits)] == ["g-1", "f-new-1", "f-other-tenant", "no-file", "f-new-2"]


def test_newest_versions_without_conflicts_is_the_same_list() -> None:
    hits = [version("a", "f", 3), version("b", "f", 3), version("c", "g", 1), version("d", None, None)]
    assert newest_versions(hits) == hits
    assert newest_versions([]) == []


def test_a_chunk_without_seq_is_older_than_one_with_a_seq() -> None:
    hits = [version("legacy", "f", None), version("new", "f", 1), version("bool", "f", True)]
    assert [hit.content for hit in newest_versions(hits)] == ["new"]


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
    assert [h.content for h in fused] == ["b"]
    assert fused[0].score == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        rrf_fuse([[hit("a")]], k=2, limit=1, weights=[1.0, 2.0])


def test_top_k() -> None:
    assert top_k([hit("a"), hit("a"), hit("b"), hit("c")], 2) == [hit("a"), hit("b")]

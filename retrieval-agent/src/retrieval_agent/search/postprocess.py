"""Pure result handling: Qdrant points to hits, content-hash dedup, fusion across result lists."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from qdrant_client import models

from shared_contract import PAYLOAD_CONTENT, PAYLOAD_META


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved chunk: its text, its stored metadata and a score (higher is better)."""

    point_id: str
    content: str
    meta: dict[str, Any] = field(default_factory=lambda: dict[str, Any]())
    score: float = 0.0

    @property
    def content_hash(self) -> str:
        """What dedup compares: the same text stored twice (two KBs, two versions) is one result."""
        return content_hash(self.content)


def content_hash(content: str) -> str:
    """sha256 of the chunk text."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def dense_score(cosine: float) -> float:
    """Cosine similarity mapped into [0, 1]: ``(cosine + 1) / 2``."""
    return min(1.0, max(0.0, (cosine + 1.0) / 2.0))


def point_to_hit(point: models.ScoredPoint | models.Record, score: float | None = None) -> Hit:
    """A Qdrant point with a Haystack-shaped payload (``{"content", "meta"}``) as a hit."""
    payload = point.payload or {}
    content = payload.get(PAYLOAD_CONTENT)
    meta = payload.get(PAYLOAD_META)
    raw_score = getattr(point, "score", 0.0)
    return Hit(
        point_id=str(point.id),
        content=content if isinstance(content, str) else "",
        meta=dict(meta) if isinstance(meta, dict) else {},
        score=float(raw_score if score is None else score),
    )


def dedup(hits: Iterable[Hit]) -> list[Hit]:
    """Drop later hits whose content equals an earlier one's, keeping the order."""
    seen: set[str] = set()
    unique: list[Hit] = []
    for hit in hits:
        digest = hit.content_hash
        if digest in seen:
            continue
        seen.add(digest)
        unique.append(hit)
    return unique


def rrf_fuse(
    rankings: Sequence[Sequence[Hit]], *, k: int, limit: int, weights: Sequence[float] | None = None
) -> list[Hit]:
    """Reciprocal rank fusion of ranked lists, keyed by content hash.

    Each list is deduplicated first. The score is Qdrant's weighted RRF, so client-side and
    server-side fusion share one scale: ``sum(1 / (rank / w + k - 1))`` with a 1-based rank; a
    hit first in every one of ``n`` unit-weight lists scores ``n / k``. A zero weight ignores its
    list. Ties keep the order of first appearance; metadata comes from the first list holding the hit.
    """
    if weights is not None and len(weights) != len(rankings):
        raise ValueError("one weight per ranking is required")
    scores: dict[str, float] = {}
    first: dict[str, Hit] = {}
    for index, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[index]
        if weight <= 0:
            continue
        for rank, hit in enumerate(dedup(ranking), start=1):
            digest = hit.content_hash
            scores[digest] = scores.get(digest, 0.0) + 1.0 / (rank / weight + k - 1)
            first.setdefault(digest, hit)
    order = sorted(scores, key=lambda digest: -scores[digest])  # stable: first appearance wins ties
    return [replace(first[digest], score=scores[digest]) for digest in order[:limit]]


def top_k(hits: Iterable[Hit], k: int) -> list[Hit]:
    """Deduplicated, at most ``k`` hits, order kept."""
    return dedup(hits)[:k]

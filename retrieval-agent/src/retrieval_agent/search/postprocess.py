"""Pure result handling: store points to hits, newest-version filter, content-hash dedup, fusion."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from rag_runtime.store import PointRecord
from shared_contract import DENSE_VECTOR, PAYLOAD_CONTENT, PAYLOAD_META, MetaKey


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved chunk: its text, its stored metadata and a score (higher is better).

    ``score`` orders hits within one path (cosine, fused RRF, cross-encoder); ``cosine`` is the
    query's dense cosine to the chunk when known; ``relevance`` is the calibrated probability that
    the chunk is relevant (:mod:`retrieval_agent.search.relevance`), what the API returns.
    """

    point_id: str
    content: str
    meta: dict[str, Any] = field(default_factory=lambda: dict[str, Any]())
    score: float = 0.0
    cosine: float | None = None
    relevance: float = 0.0

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


def cosine(query: Sequence[float], vector: Sequence[float]) -> float:
    """Cosine similarity of two dense vectors (0 for a zero vector)."""
    left = np.asarray(query, dtype=np.float32)
    right = np.asarray(vector, dtype=np.float32)
    norms = float(np.linalg.norm(left) * np.linalg.norm(right))
    return float(np.dot(left, right)) / norms if norms > 0 else 0.0


def point_to_hit(
    point: PointRecord,
    score: float | None = None,
    *,
    cosine_to: Sequence[float] | None = None,
    known_cosine: float | None = None,
) -> Hit:
    """A stored point with a Haystack-shaped payload (``{"content", "meta"}``) as a hit.

    ``cosine_to``: the query's dense vector, compared with the point's dense vector when the read
    returned it; ``known_cosine``: the cosine the store already computed (a dense search).
    The payload is the store's fresh dict for this call, so it is used as is, not copied.
    """
    payload = point.payload
    content = payload.get(PAYLOAD_CONTENT)
    meta = payload.get(PAYLOAD_META)
    similarity = known_cosine
    if similarity is None and cosine_to is not None and point.vectors is not None:
        dense = point.vectors.get(DENSE_VECTOR)
        if isinstance(dense, list):
            similarity = cosine(cosine_to, dense)
    return Hit(
        point_id=point.point_id,
        content=content if isinstance(content, str) else "",
        meta=meta if isinstance(meta, dict) else {},
        score=point.score if score is None else score,
        cosine=similarity,
    )


def _file_key(meta: dict[str, Any]) -> tuple[str, str] | None:
    file_id = meta.get(MetaKey.FILE_ID)
    if not isinstance(file_id, str):
        return None
    return file_id, str(meta.get(MetaKey.COLLECTION_NAME))


def _ingest_seq(meta: dict[str, Any]) -> int:
    seq = meta.get(MetaKey.INGEST_SEQ)
    # A chunk without a sequence (written before versioning) is older than any that has one.
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else -1


def newest_versions(hits: Sequence[Hit]) -> list[Hit]:
    """Drop chunks of a file version that a newer version of the same file and tenant replaces.

    A commit makes the new version live in one switch and removes the old one right after; in
    between both are live. Among the hits of one list, chunks of the same
    (``meta.file_id``, ``meta.collection_name``) with different ``meta.ingest_seq`` are narrowed
    to the newest seq, so a result never mixes two versions of a file. Order is kept.
    """
    newest: dict[tuple[str, str], int] = {}
    mixed = False
    for hit in hits:
        key = _file_key(hit.meta)
        if key is None:
            continue
        seq = _ingest_seq(hit.meta)
        known = newest.setdefault(key, seq)
        if known != seq:
            mixed = True
            newest[key] = max(known, seq)
    if not mixed:
        return list(hits)
    kept: list[Hit] = []
    for hit in hits:
        key = _file_key(hit.meta)
        if key is None or _ingest_seq(hit.meta) == newest[key]:
            kept.append(hit)
    return kept


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
    list. Ties keep the order of first appearance; metadata comes from the first list holding the
    hit, the cosine from the first list that knew it, the relevance is the highest any list gave.
    """
    if weights is not None and len(weights) != len(rankings):
        raise ValueError("one weight per ranking is required")
    scores: dict[str, float] = {}
    first: dict[str, Hit] = {}
    cosines: dict[str, float] = {}
    relevance: dict[str, float] = {}
    for index, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[index]
        if weight <= 0:
            continue
        for rank, hit in enumerate(dedup(ranking), start=1):
            digest = hit.content_hash
            scores[digest] = scores.get(digest, 0.0) + 1.0 / (rank / weight + k - 1)
            first.setdefault(digest, hit)
            if hit.cosine is not None:
                cosines.setdefault(digest, hit.cosine)
            relevance[digest] = max(relevance.get(digest, 0.0), hit.relevance)
    order = sorted(scores, key=lambda digest: -scores[digest])  # stable: first appearance wins ties
    return [
        replace(first[digest], score=scores[digest], cosine=cosines.get(digest), relevance=relevance[digest])
        for digest in order[:limit]
    ]


def top_k(hits: Iterable[Hit], k: int) -> list[Hit]:
    """Deduplicated, at most ``k`` hits, order kept."""
    return dedup(hits)[:k]

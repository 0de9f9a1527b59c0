"""The last-resort lexical leg: a bounded, cached, client-side BM25 over the tenants' chunks.

Used only when hybrid search is on and the collection offers the engine neither a ``text-sparse``
vector nor any lexical full-text index (a collection another tool created), or while those
indexes are missing. The corpus is read once per tenant set (at most BM25_MAX_DOCS committed
chunks) and cached for BM25_CACHE_TTL_SECONDS, never copied per query; building and scoring run
in a worker thread.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

import anyio

from retrieval_agent.metrics import SearchMetrics
from retrieval_agent.search.postprocess import Hit

_TOKEN = re.compile(r"\w+", re.UNICODE)
K1 = 1.2
B = 0.75


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (Unicode-aware, so Danish and Norwegian letters stay whole)."""
    return _TOKEN.findall(text.lower())


@dataclass
class Bm25Index:
    """Okapi BM25 over a fixed list of hits."""

    hits: list[Hit]
    frequencies: list[Counter[str]] = field(init=False)
    lengths: list[int] = field(init=False)
    document_frequency: Counter[str] = field(init=False)
    average_length: float = field(init=False)

    def __post_init__(self) -> None:
        self.frequencies = [Counter(tokenize(hit.content)) for hit in self.hits]
        self.lengths = [sum(counts.values()) for counts in self.frequencies]
        self.document_frequency = Counter(term for counts in self.frequencies for term in counts)
        self.average_length = (sum(self.lengths) / len(self.lengths)) if self.lengths else 0.0

    def search(self, query: str, limit: int) -> list[Hit]:
        """The ``limit`` best hits with their BM25 score; documents sharing no term are left out."""
        terms = set(tokenize(query))
        count = len(self.hits)
        if not terms or count == 0:
            return []
        idf = {
            term: math.log((count - self.document_frequency[term] + 0.5) / (self.document_frequency[term] + 0.5) + 1)
            for term in terms
        }
        scored: list[tuple[float, int]] = []
        for index, counts in enumerate(self.frequencies):
            norm = K1 * (1 - B + B * self.lengths[index] / (self.average_length or 1.0))
            score = sum(idf[t] * counts[t] * (K1 + 1) / (counts[t] + norm) for t in terms if counts[t])
            if score > 0:
                scored.append((score, index))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [replace(self.hits[index], score=score) for score, index in scored[:limit]]


class Bm25Cache:
    """BM25 indexes per tenant set, built at most once per TTL under a per-key lock."""

    def __init__(self, *, ttl_seconds: float, max_docs: int, metrics: SearchMetrics) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_docs = max_docs
        self.metrics = metrics
        self._entries: dict[tuple[str, ...], tuple[float, Bm25Index]] = {}
        self._locks: dict[tuple[str, ...], anyio.Lock] = {}

    async def index_for(
        self, collection_names: Sequence[str], load: Callable[[int], Awaitable[list[Hit]]]
    ) -> Bm25Index:
        """The cached index of these tenants, or one built from ``load(max_docs)``."""
        key = tuple(sorted(set(collection_names)))
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            entry = self._entries.get(key)
            if entry is not None and time.monotonic() - entry[0] < self.ttl_seconds:
                self.metrics.bm25_cache.labels(result="hit").inc()
                return entry[1]
            self.metrics.bm25_cache.labels(result="miss").inc()
            hits = await load(self.max_docs)
            index = await anyio.to_thread.run_sync(lambda: Bm25Index(hits))
            self._entries[key] = (time.monotonic(), index)
            return index

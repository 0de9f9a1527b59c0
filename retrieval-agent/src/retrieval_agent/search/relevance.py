"""Calibrated relevance: the number /search returns in ``distances``, one scale on every path.

Each hit's ``relevance`` estimates the probability that the chunk is relevant to the query:

- Retrieval paths (``native_hybrid``, ``dense``, ``bm25_fallback``): Platt scaling,
  ``sigmoid(intercept + cosine_weight * cosine + fused_weight * fused)``. ``cosine`` is the
  query's dense cosine to the chunk (an absolute signal: a query with nothing relevant gets low
  values); ``fused`` is the path's fused score: the z-score sum (how far above the legs' weakest
  candidates the chunk stands, in standard deviations, weighted), or an RRF score times its k
  (roughly the summed weight of the legs that ranked the chunk near the top). The dense path has no fused score; the client-side BM25
  fallback has no cosine for its lexical-only hits, so its model uses the fused score alone. A
  hybrid hit in a language the dense model was not trained on (``meta.lexical_language`` outside
  an English-only MiniLM's languages) gets ``native_hybrid_other_languages``, a fused-score model:
  there the cosine says little, and the dense leg's fusion weight is lower.
- Reranked hits: the cross-encoder's own probability, ``sigmoid(logit)`` for a model that returns
  logits (fastembed's cross-encoders) or the score itself for an endpoint that already returns
  one in [0, 1] (TEI, Infinity, Cohere-style ``relevance_score``).

The default coefficients were fitted by ``python -m benchmarks.calibration`` on SciFact's train
split (NorQuAD's dev split for ``native_hybrid_other_languages``); docs/benchmarks.md has the fit
and its error on the test splits. Probabilities are only as
calibrated as the corpus is like SciFact: RELEVANCE_CALIBRATION sets coefficients fitted on your own
judged queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from retrieval_agent.metrics import SearchPath
from retrieval_agent.relevance_models import ModelName, PlattModel, RerankerScale, sigmoid
from retrieval_agent.search.postprocess import Hit
from shared_contract import MetaKey


@dataclass(frozen=True, slots=True)
class RelevanceCalibrator:
    """Sets ``Hit.relevance`` for the hits of one retrieval path, or from a reranker's scores."""

    models: Mapping[ModelName, PlattModel]
    reranker_scale: RerankerScale = "probability"
    # The dense model's languages; None: multilingual (every hybrid hit gets ``native_hybrid``).
    dense_languages: frozenset[str] | None = None

    def model_for(self, hit: Hit, path: SearchPath) -> ModelName:
        languages = self.dense_languages
        if (
            path == "native_hybrid"
            and languages is not None
            and hit.meta.get(MetaKey.LEXICAL_LANGUAGE) not in languages
        ):
            return "native_hybrid_other_languages"
        return path

    def retrieved(self, hits: Sequence[Hit], path: SearchPath, *, fused_scale: float) -> list[Hit]:
        """The hits with their relevance from the path's model (``score`` is the fused score on fused paths,
        times ``fused_scale`` as the feature: an RRF score times its k, a z-score fused score as is)."""
        fused_path = path != "dense"
        return [
            replace(
                hit,
                relevance=self.models[self.model_for(hit, path)].probability(
                    hit.cosine, hit.score * fused_scale if fused_path else None
                ),
            )
            for hit in hits
        ]

    def reranked(self, hits: Sequence[Hit]) -> list[Hit]:
        """The hits with their relevance from the cross-encoder score in ``score``."""
        if self.reranker_scale == "logit":
            return [replace(hit, relevance=sigmoid(hit.score)) for hit in hits]
        return [replace(hit, relevance=min(1.0, max(0.0, hit.score))) for hit in hits]


def non_increasing(hits: Sequence[Hit]) -> list[Hit]:
    """The ranked list with each relevance capped at the one above it, order kept.

    The ranking is the path's (fused, cosine, cross-encoder), which the per-hit model can disagree
    with by a little; clients that sort or threshold on ``distances`` (Open WebUI) must not reorder
    the ranking, so a hit never shows more relevance than the hit ranked above it.
    """
    capped: list[Hit] = []
    ceiling = 1.0
    for hit in hits:
        ceiling = min(ceiling, hit.relevance)
        capped.append(hit if hit.relevance == ceiling else replace(hit, relevance=ceiling))
    return capped

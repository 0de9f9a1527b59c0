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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from retrieval_agent.metrics import SearchPath
from retrieval_agent.search.postprocess import Hit
from shared_contract import MetaKey

RerankerScale = Literal["logit", "probability"]
ModelName = Literal["native_hybrid", "native_hybrid_other_languages", "dense", "bm25_fallback"]


@dataclass(frozen=True, slots=True)
class PlattModel:
    """``sigmoid(intercept + cosine * hit.cosine + fused * fused_score)``; a missing feature adds 0."""

    intercept: float
    cosine: float = 0.0
    fused: float = 0.0

    def probability(self, cosine: float | None, fused: float | None) -> float:
        logit = self.intercept
        if cosine is not None:
            logit += self.cosine * cosine
        if fused is not None:
            logit += self.fused * fused
        return sigmoid(logit)


# The k the default models were fitted at. A hybrid search of any k fuses as one of this k does
# (the same candidate depth and standardisation: search/fusion.py), so the fit holds at every k.
FITTED_K = 10

# Fitted with the service defaults (z-score fusion, k 10 hits) on SciFact train, NorQuAD dev for
# other languages, whose hybrid includes the multilingual dense leg (benchmarks/tuned/calibration.json).
DEFAULT_MODELS: Mapping[ModelName, PlattModel] = {
    "native_hybrid": PlattModel(intercept=-5.44, cosine=2.524, fused=0.517),
    "native_hybrid_other_languages": PlattModel(intercept=-3.37, fused=0.708),
    "dense": PlattModel(intercept=-7.855, cosine=10.87),
    "bm25_fallback": PlattModel(intercept=-5.288, fused=3.277),
}
# HYBRID_FUSION=rrf: its fused feature is an RRF score times k, on another scale. Fitted the same
# way with RRF k 5 and weights dense 0.75, BM42 0.25, BM25 0.5 (its tuned point before z-score).
RRF_HYBRID_MODELS: Mapping[ModelName, PlattModel] = {
    **DEFAULT_MODELS,
    "native_hybrid": PlattModel(intercept=-6.047, cosine=3.104, fused=2.487),
    "native_hybrid_other_languages": PlattModel(intercept=-4.117, fused=5.116),
}


def default_models(fusion: str) -> Mapping[ModelName, PlattModel]:
    """The fitted Platt models for the hybrid fusion in use (``zscore`` or ``rrf``)."""
    return RRF_HYBRID_MODELS if fusion == "rrf" else DEFAULT_MODELS


def sigmoid(value: float) -> float:
    """The logistic function, safe for large magnitudes."""
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    exp = math.exp(value)
    return exp / (1.0 + exp)


def parse_models(
    raw: Mapping[str, object], defaults: Mapping[ModelName, PlattModel] = DEFAULT_MODELS
) -> dict[ModelName, PlattModel]:
    """Coefficients per path from ``{"native_hybrid": [intercept, cosine, fused], ...}``; missing paths keep ``defaults``."""
    models = dict(defaults)
    for name, coefficients in raw.items():
        path = next((known for known in DEFAULT_MODELS if known == name), None)
        if path is None:
            raise ValueError(f"unknown model {name!r}; expected one of {', '.join(DEFAULT_MODELS)}")
        if not isinstance(coefficients, list) or not all(
            isinstance(value, int | float) and not isinstance(value, bool) for value in coefficients
        ):
            raise ValueError(f"{name}: expected a list of numbers [intercept, cosine, fused]")
        values = [float(value) for value in coefficients]
        if not 1 <= len(values) <= 3 or not all(math.isfinite(value) for value in values):
            raise ValueError(f"{name}: expected 1 to 3 finite numbers [intercept, cosine, fused]")
        models[path] = PlattModel(*values)
    return models


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

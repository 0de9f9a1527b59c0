"""The Platt models that turn a path's scores into a relevance probability, and their parsing.

Settings parse RELEVANCE_CALIBRATION into these; ``search/relevance.py`` applies them. The
defaults' provenance is in that module's docstring.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

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

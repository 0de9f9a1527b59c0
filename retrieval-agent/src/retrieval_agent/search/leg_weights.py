"""How much each hybrid leg weighs over the requested tenants: the BM25 fields their languages have,
and the dense and multilingual legs' weights by the share of chunks (or of the query's language) the
dense model reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from rag_runtime import lexical


def lexical_fields_for(codes: Iterable[str], indexed: Iterable[str]) -> list[str]:
    """The BM25 fields to query: the tenants' lexical languages that have a scoring text index."""
    available = set(indexed)
    return [field for field in lexical.lexical_fields(list(codes)) if field in available]


# An English query is routed to the English model alone when at least this share of the tenants'
# chunks is English; over mostly foreign tenants it keeps the multilingual leg (the only dense
# model that reads them).
COVERED_QUERY_MIN_SHARE: Final = 0.5


def dense_weight_for(
    language_mix: Mapping[str, int],
    model_languages: frozenset[str] | None,
    *,
    covered: float,
    other: float,
    query_language: str | None = None,
) -> float:
    """The dense leg's weight over tenants with this ``meta.lexical_language`` mix.

    A multilingual model (``model_languages`` None) always gets ``covered``. A model trained on
    some languages only (MiniLM: English) gets ``covered`` for the share of chunks in those
    languages and ``other`` for the rest (``any`` counts as another language): English MiniLM
    scores 0.41 nDCG@10 on Norwegian and only pulls the fused ranking down there. With the query's
    language (``query_share``), the share is the query's.
    """
    share = query_share(language_mix, model_languages, query_language)
    return covered if share is None else covered * share + other * (1.0 - share)


def covered_share(language_mix: Mapping[str, int], model_languages: frozenset[str] | None) -> float | None:
    """The share of the mix's chunks in ``model_languages``; None for a multilingual model or an empty mix."""
    total = sum(language_mix.values())
    if model_languages is None or total == 0:
        return None
    return sum(count for code, count in language_mix.items() if code in model_languages) / total


def query_share(
    language_mix: Mapping[str, int], model_languages: frozenset[str] | None, query_language: str | None
) -> float | None:
    """The share of chunks in the dense model's languages that weighs the dense legs for one query.

    Without the query's language, the tenants' share. A query in the model's languages counts as
    all covered (the multilingual leg is not embedded or sent) where most chunks are covered; a
    query in another language as none covered: it is read by the multilingual model, not by an
    English one (the caller passes a language only where the multilingual leg exists), unless
    the tenants hold no chunk in another language: then the English model is the only one that
    reads them.
    """
    share = covered_share(language_mix, model_languages)
    if share is None or query_language is None or model_languages is None:
        return share
    if query_language in model_languages:
        return 1.0 if share >= COVERED_QUERY_MIN_SHARE else share
    return 0.0 if share < 1.0 else share


def multilingual_weight_for(
    language_mix: Mapping[str, int],
    model_languages: frozenset[str] | None,
    *,
    weight: float,
    query_language: str | None = None,
) -> float:
    """The ``text-dense-multilingual`` leg's weight over tenants with this ``meta.lexical_language`` mix.

    The vector exists only on chunks outside the dense model's languages, so the leg earns
    ``weight`` times their share (the share :func:`dense_weight_for` gives ``other``): 0 over an
    English tenant, where the leg is not sent, the full weight over a Norwegian one; with the
    query's language, the share is the query's (``query_share``).
    """
    share = query_share(language_mix, model_languages, query_language)
    return 0.0 if share is None else weight * (1.0 - share)

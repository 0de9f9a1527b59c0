"""The legs' weights by the tenants' language mix and the query's language, and the BM25 fields queried."""

from __future__ import annotations

import pytest

from retrieval_agent.search.leg_weights import (
    dense_weight_for,
    lexical_fields_for,
    multilingual_weight_for,
    query_share,
)


def test_lexical_fields_for_intersects_tenant_languages_with_scoring_indexes() -> None:
    indexed = ["lexical_en", "lexical_no", "lexical_any", "content"]
    assert lexical_fields_for(["no", "en", "any", "de", "zz"], indexed) == ["lexical_any", "lexical_en", "lexical_no"]
    assert lexical_fields_for([], indexed) == []


@pytest.mark.parametrize(
    ("mix", "languages", "expected"),
    [
        ({"en": 10}, frozenset({"en"}), 0.75),  # an English tenant, an English model
        ({"no": 9, "any": 1}, frozenset({"en"}), 0.0),  # Norwegian: the English model sits out
        ({"en": 1, "da": 3}, frozenset({"en"}), 0.75 * 0.25),  # mixed: by share of chunks
        ({"no": 5}, None, 0.75),  # a multilingual model covers every language
        ({}, frozenset({"en"}), 0.75),  # nothing known about the tenants
    ],
)
def test_dense_weight_follows_the_share_of_chunks_the_dense_model_can_read(
    mix: dict[str, int], languages: frozenset[str] | None, expected: float
) -> None:
    assert dense_weight_for(mix, languages, covered=0.75, other=0.0) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("mix", "languages", "expected"),
    [
        ({"en": 10}, frozenset({"en"}), 0.0),  # English only: the leg is not sent
        ({"no": 9, "any": 1}, frozenset({"en"}), 1.2),  # every chunk outside the English model's languages
        ({"en": 1, "da": 3}, frozenset({"en"}), 1.2 * 0.75),  # by the share of chunks that carry the vector
        ({"no": 5}, None, 0.0),  # a multilingual dense model: no second vector exists
        ({}, frozenset({"en"}), 0.0),
    ],
)
def test_the_multilingual_weight_follows_the_share_of_chunks_outside_the_dense_models_languages(
    mix: dict[str, int], languages: frozenset[str] | None, expected: float
) -> None:
    assert multilingual_weight_for(mix, languages, weight=1.2) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("mix", "query_language", "dense", "multilingual"),
    [
        # An English query over a mostly English tenant: the English model alone (no multilingual pass).
        ({"en": 7, "fr": 3}, "en", 1.2, 0.0),
        # A French query over the same tenant: the multilingual model alone reads it.
        ({"en": 7, "fr": 3}, "fr", 0.0, 1.2),
        # An English query over a mostly Norwegian tenant keeps the mix: the multilingual leg reads those.
        ({"en": 2, "no": 8}, "en", 1.2 * 0.2, 1.2 * 0.8),
        # A query whose language is unknown: the tenants' mix, as without routing.
        ({"en": 7, "fr": 3}, None, 1.2 * 0.7, 1.2 * 0.3),
        # A French query over an English tenant: only the English model reads its chunks.
        ({"en": 10}, "fr", 1.2, 0.0),
    ],
)
def test_the_querys_language_routes_it_to_the_model_that_reads_it(
    mix: dict[str, int], query_language: str | None, dense: float, multilingual: float
) -> None:
    english = frozenset({"en"})
    assert query_share(mix, english, query_language) == pytest.approx(dense / 1.2)
    assert dense_weight_for(mix, english, covered=1.2, other=0.0, query_language=query_language) == pytest.approx(dense)
    assert multilingual_weight_for(mix, english, weight=1.2, query_language=query_language) == pytest.approx(
        multilingual
    )


def test_a_multilingual_dense_model_is_never_routed() -> None:
    assert query_share({"no": 5}, None, "no") is None
    assert dense_weight_for({"no": 5}, None, covered=1.2, other=0.0, query_language="no") == 1.2

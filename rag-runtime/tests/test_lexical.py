"""The language-aware lexical (BM25) layout (pure)."""

from __future__ import annotations

import pytest
from qdrant_client import models

from rag_runtime.lexical import (
    FALLBACK_LANGUAGE,
    LEXICAL_LANGUAGES,
    all_lexical_codes,
    lexical_field,
    lexical_fields,
    lexical_language_for,
    lexical_windows,
    text_index_params,
)

STEMMED = {
    "da": "danish",
    "de": "german",
    "en": "english",
    "es": "spanish",
    "fi": "finnish",
    "fr": "french",
    "it": "italian",
    "nl": "dutch",
    "no": "norwegian",
    "pt": "portuguese",
    "sv": "swedish",
}


def test_every_code_and_the_fallback_last() -> None:
    assert all_lexical_codes() == [*STEMMED, "any"]
    assert FALLBACK_LANGUAGE == "any"
    assert {language.code for language in LEXICAL_LANGUAGES} == set(STEMMED)


def test_field_names() -> None:
    assert lexical_field("no") == "lexical_no"
    assert lexical_field("any") == "lexical_any"
    assert [language.field for language in LEXICAL_LANGUAGES] == [f"lexical_{code}" for code in STEMMED]


@pytest.mark.parametrize(("code", "language"), list(STEMMED.items()))
def test_a_stemmed_field_has_its_languages_stemmer_and_stop_words(code: str, language: str) -> None:
    assert text_index_params(code) == models.TextIndexParams(
        type=models.TextIndexType.TEXT,
        tokenizer=models.TokenizerType.WORD,
        lowercase=True,
        stopwords=models.Language(language),
        stemmer=models.SnowballParams(type=models.Snowball.SNOWBALL, language=models.SnowballLanguage(language)),
        scoring=models.TextScoringParams(type=models.TextScoringType.BM25),
    )


def test_the_fallback_field_is_multilingual_without_stemmer_or_stop_words() -> None:
    params = text_index_params("any")
    assert params == models.TextIndexParams(
        type=models.TextIndexType.TEXT,
        tokenizer=models.TokenizerType.MULTILINGUAL,
        lowercase=True,
        scoring=models.TextScoringParams(type=models.TextScoringType.BM25),
    )
    assert params.stemmer is None
    assert params.stopwords is None


@pytest.mark.parametrize(
    ("languages", "code"),
    [
        (["nb"], "no"),
        (["nn"], "no"),
        (["Nb"], "no"),
        (["EN"], "en"),
        (["ja", "fi"], "fi"),
        (["fi", "sv"], "fi"),
        (["ja"], "any"),
        ([], "any"),
        (None, "any"),
    ],
)
def test_the_lexical_language_of_a_chunk(languages: list[str] | None, code: str) -> None:
    assert lexical_language_for(languages) == code


def test_fields_to_query_for_the_languages_of_a_tenant_set() -> None:
    assert lexical_fields(["sv", "no", "any", "no", "xx"]) == ["lexical_any", "lexical_no", "lexical_sv"]
    assert lexical_fields(["nb"]) == []  # callers pass stored codes (meta.lexical_language), not aliases
    assert lexical_fields([]) == []


def test_a_window_joins_neighbours_writes_their_overlap_once_and_repeats_its_own_chunk() -> None:
    chunks = [
        "Alpha beta gamma delta epsilon zeta",
        "delta epsilon zeta eta theta iota",  # repeats the end of the first chunk
        "kappa lambda mu",  # no overlap with the second
    ]
    assert lexical_windows(chunks, 1) == [
        "Alpha beta gamma delta epsilon zeta eta theta iota\nAlpha beta gamma delta epsilon zeta",
        "Alpha beta gamma delta epsilon zeta eta theta iota\nkappa lambda mu\ndelta epsilon zeta eta theta iota",
        "delta epsilon zeta eta theta iota\nkappa lambda mu\nkappa lambda mu",
    ]


def test_a_window_stops_at_the_document_edges() -> None:
    chunks = ["one chunk here", "two chunks here", "three chunks here", "four chunks here"]
    windows = lexical_windows(chunks, 2)
    assert windows[0] == "one chunk here\ntwo chunks here\nthree chunks here\none chunk here"
    assert windows[3] == "two chunks here\nthree chunks here\nfour chunks here\nfour chunks here"
    assert windows[1] == "\n".join(chunks) + "\ntwo chunks here"


def test_radius_zero_is_the_chunk_itself_and_a_negative_radius_is_refused() -> None:
    chunks = ["a b c", "d e f"]
    assert lexical_windows(chunks, 0) == chunks
    assert lexical_windows([], 2) == []
    with pytest.raises(ValueError, match="radius"):
        lexical_windows(chunks, -1)

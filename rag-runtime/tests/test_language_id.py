"""The one language detector of chunks and queries: labels, doubt, and the Scandinavian rule."""

from __future__ import annotations

import pytest

from rag_runtime.language_id import LanguageIdentifier, language_identifier


@pytest.fixture(scope="module")
def identifier() -> LanguageIdentifier:
    return language_identifier()


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("How long did the baseline code run on the Mac?", "en"),
        ("Hvordan faldt afstemningen på Formandskonferencen om Kommissionens program ud?", "da"),
        ("Dans quelle université travaillent les auteurs de l'article ?", "fr"),
        ("삼성카드 빅포인트는 적립 후 몇 년 동안 쓸 수 있나요?", "ko"),
        ("Når går USAs nasjonale etterretningssjef av?", "no"),
    ],
)
def test_queries_get_their_language(identifier: LanguageIdentifier, query: str, code: str) -> None:
    assert identifier.query_language(query) == code


def test_a_query_of_a_name_or_two_has_no_language(identifier: LanguageIdentifier) -> None:
    # The detector's top label for "Eiffel Tower" is German (0.42): too doubtful to route by.
    assert identifier.query_language("Eiffel Tower") is None


def test_text_without_letters_has_no_language(identifier: LanguageIdentifier) -> None:
    assert identifier.detect("| 2019 | 120 |\n| --- | --- |") is None
    assert identifier.query_language("12345") is None


def test_a_chunk_keeps_its_own_language_when_the_detector_is_sure(identifier: LanguageIdentifier) -> None:
    spanish = "El informe anual describe los resultados de la empresa y sus planes para el próximo año."
    assert identifier.chunk_language(spanish, "en") == "es"


def test_a_doubtful_chunk_takes_its_documents_language(identifier: LanguageIdentifier) -> None:
    # A heading of two words reads as anything; the document says what it is.
    assert identifier.chunk_language("Sample PDF", "de") == "de"
    assert identifier.chunk_language("| 2019 | 120 |", "fr") == "fr"


def test_a_scandinavian_chunk_of_a_scandinavian_document_keeps_the_documents_label(
    identifier: LanguageIdentifier,
) -> None:
    # Short Norwegian text often reads as Danish; both take the multilingual model, their stemmers differ.
    norwegian = "Kommunestyret vedtok budsjettet for neste år etter en lang debatt om skoler."
    assert identifier.chunk_language(norwegian, "no") == "no"
    assert identifier.chunk_language(norwegian, "da") == "da"


def test_the_document_language_is_read_from_its_text(identifier: LanguageIdentifier) -> None:
    text = "Familien kjøpte en ny elbil i fjor. Bilen er rød, og den står parkert i garasjen ved siden av syklene."
    assert identifier.document_language(text * 3) == "no"

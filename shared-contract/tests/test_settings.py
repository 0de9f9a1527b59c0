from __future__ import annotations

import pytest

from shared_contract import CONTRACT_VERSION, ContractConfigError, ContractSettings, load_settings
from shared_contract.settings import CONTRACT_GROUPS, StoreSettings, group_fields
from shared_contract.version import major_version


def test_defaults_are_the_offline_minilm_bm42_pair() -> None:
    settings = load_settings(ContractSettings)
    assert settings.qdrant_index == "ingestion_files"
    assert settings.embedding_provider == "fastembed"
    assert settings.embedding_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert settings.dense_dim == 384
    assert settings.enable_sparse_embeddings is True
    assert settings.sparse_embedding_model == "Qdrant/bm42-all-minilm-l6-v2-attentions"
    assert settings.embedded_qdrant is True


def test_reads_the_design_variable_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QDRANT_URI", "http://qdrant:6333/")
    monkeypatch.setenv("QDRANT_INDEX", "kb_chunks")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "openai-compat")
    monkeypatch.setenv("EMBEDDING_MODEL", "intfloat/multilingual-e5-large")
    monkeypatch.setenv("EMBEDDING_API_BASE_URL", "https://embed.example/v1")
    monkeypatch.setenv("EMBEDDING_PREFIX_DOC", "passage: ")
    monkeypatch.setenv("EMBEDDING_PREFIX_QUERY", "query: ")
    monkeypatch.setenv("ENABLE_SPARSE_EMBEDDINGS", "false")
    settings = load_settings(ContractSettings)
    assert settings.qdrant_uri == "http://qdrant:6333"
    assert settings.qdrant_index == "kb_chunks"
    assert settings.dense_dim == 1024
    assert settings.embedding_prefix_doc == "passage: "
    assert settings.embedding_prefix_query == "query: "
    assert settings.enable_sparse_embeddings is False
    assert settings.embedded_qdrant is False


def test_sparse_query_model_is_an_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARSE_QUERY_MODEL", "Qdrant/bm25")
    assert load_settings(ContractSettings).sparse_embedding_model == "Qdrant/bm25"


@pytest.mark.parametrize(
    ("env", "variable", "fragment"),
    [
        ({"EMBEDDING_PROVIDER": "ollama"}, "EMBEDDING_PROVIDER", "fastembed"),
        ({"EMBEDDING_DIM": "768"}, "EMBEDDING_DIM", "produces 384-d"),
        ({"EMBEDDING_PROVIDER": "tei"}, "EMBEDDING_API_BASE_URL", "required"),
        ({"EMBEDDING_MODEL": "acme/unknown-model"}, "EMBEDDING_DIM", "must be set"),
        ({"EMBEDDING_DIM": "-3"}, "EMBEDDING_DIM", "greater than 0"),
        ({"QDRANT_URI": "qdrant:6333"}, "QDRANT_URI", "http"),
        ({"QDRANT_INDEX": "bad name!"}, "QDRANT_INDEX", "pattern"),
        ({"ENABLE_SPARSE_EMBEDDINGS": "maybe"}, "ENABLE_SPARSE_EMBEDDINGS", "boolean"),
        (
            {
                "EMBEDDING_PROVIDER": "openai-compat",
                "EMBEDDING_API_BASE_URL": "https://x/v1",
                "EMBEDDING_MODEL": "BAAI/bge-m3",
                "EMBEDDING_DIM": "512",
            },
            "EMBEDDING_DIM",
            "1024",
        ),
    ],
)
def test_invalid_values_fail_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], variable: str, fragment: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ContractConfigError) as caught:
        load_settings(ContractSettings)
    assert caught.value.variable == variable
    assert str(caught.value).startswith(f"{variable}: ")
    assert fragment in str(caught.value)


def test_unknown_http_model_is_accepted_with_an_explicit_dimension(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "tei")
    monkeypatch.setenv("EMBEDDING_API_BASE_URL", "http://tei:80")
    monkeypatch.setenv("EMBEDDING_MODEL", "acme/private-embedder")
    monkeypatch.setenv("EMBEDDING_DIM", "640")
    assert load_settings(ContractSettings).dense_dim == 640


def test_contract_version_is_semantic_and_matches_the_package() -> None:
    from importlib.metadata import version

    assert CONTRACT_VERSION == version("shared-contract")
    assert major_version(CONTRACT_VERSION) >= 1
    assert len(CONTRACT_VERSION.split(".")) == 3


def test_every_contract_setting_belongs_to_exactly_one_group() -> None:
    owners = {name: [g for g in CONTRACT_GROUPS if name in group_fields(g)] for name in ContractSettings.model_fields}
    assert {name: groups for name, groups in owners.items() if len(groups) != 1} == {}


def test_the_store_group_reads_the_design_names_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QDRANT_URI", "http://qdrant:6333/")
    assert StoreSettings(_env_file=None).qdrant_uri == "http://qdrant:6333"

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_agent.relevance_models import DEFAULT_MODELS, RRF_HYBRID_MODELS, PlattModel
from retrieval_agent.settings import GROUPS, RerankSettings, Settings
from shared_contract import ContractConfigError, load_settings
from shared_contract.settings import group_fields

from .conftest import API_KEY  # noqa: TID252


def test_defaults_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_KEY", API_KEY)
    settings = load_settings(Settings)
    assert settings.enable_hybrid_search is True
    assert settings.enable_reranking is False
    assert settings.initial_retrieval_multiplier == 3
    assert settings.search_result_sets == "merged"
    assert settings.lexical_retry_after_seconds == 300.0
    assert settings.port == 8000


def test_short_api_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_KEY", "short")
    with pytest.raises(ContractConfigError, match="API_KEY"):
        load_settings(Settings)


def test_reranking_over_http_needs_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_KEY", API_KEY)
    monkeypatch.setenv("ENABLE_RERANKING", "true")
    with pytest.raises(ContractConfigError, match="RERANKER_API_BASE_URL"):
        load_settings(Settings)


def test_sparse_query_model_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_KEY", API_KEY)
    monkeypatch.setenv("SPARSE_QUERY_MODEL", "Qdrant/bm25")
    assert load_settings(Settings).sparse_embedding_model == "Qdrant/bm25"


def test_hybrid_and_lexical_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_KEY", API_KEY)
    settings = load_settings(Settings)
    # Tuned jointly on SciFact train and NorQuAD dev (benchmarks/tuned/joint-zscore.json).
    assert settings.hybrid_fusion == "zscore"
    assert (settings.hybrid_dense_weight, settings.hybrid_sparse_weight, settings.hybrid_lexical_weight) == (
        1.2,
        0.6,
        1.0,
    )
    assert (settings.hybrid_rrf_k, settings.hybrid_dense_weight_other_languages) == (5, 0.0)
    assert (settings.lexical_bm25_k1, settings.lexical_bm25_b) == (None, None)  # the engine's 1.2 / 0.75
    assert settings.lexical_language_cache_ttl_seconds == 10.0


def test_lexical_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_KEY", API_KEY)
    monkeypatch.setenv("HYBRID_LEXICAL_WEIGHT", "0.7")
    monkeypatch.setenv("LEXICAL_BM25_K1", "0.9")
    monkeypatch.setenv("LEXICAL_BM25_B", "0.4")
    settings = load_settings(Settings)
    assert (settings.hybrid_lexical_weight, settings.lexical_bm25_k1, settings.lexical_bm25_b) == (0.7, 0.9, 0.4)
    monkeypatch.setenv("LEXICAL_BM25_B", "1.5")
    with pytest.raises(ContractConfigError, match="LEXICAL_BM25_B"):
        load_settings(Settings)


def test_old_bm25_weight_still_sets_the_lexical_weight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_KEY", API_KEY)
    monkeypatch.setenv("BM25_WEIGHT", "0.3")
    assert load_settings(Settings).hybrid_lexical_weight == 0.3


def test_relevance_defaults_follow_the_hybrid_fusion(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_KEY", API_KEY)
    zscore = load_settings(Settings).relevance_models
    monkeypatch.setenv("HYBRID_FUSION", "rrf")
    rrf = load_settings(Settings).relevance_models
    # The fused feature is on another scale per fusion; the dense path's model is the same.
    assert zscore["native_hybrid"] == DEFAULT_MODELS["native_hybrid"]
    assert rrf["native_hybrid"] == RRF_HYBRID_MODELS["native_hybrid"] != zscore["native_hybrid"]
    assert rrf["dense"] == zscore["dense"]
    monkeypatch.setenv("RELEVANCE_CALIBRATION", '{"dense": [1, 2, 0]}')
    overridden = load_settings(Settings).relevance_models
    assert overridden["native_hybrid"] == RRF_HYBRID_MODELS["native_hybrid"]
    assert overridden["dense"] == PlattModel(1.0, 2.0, 0.0)


def test_queries_run_on_the_int8_copy_of_the_default_model_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("API_KEY", API_KEY)
    assert load_settings(Settings).query_int8 is True
    monkeypatch.setenv("QUERY_EMBEDDING_QUANTIZATION", "none")
    assert load_settings(Settings).query_int8 is False
    monkeypatch.setenv("QUERY_EMBEDDING_QUANTIZATION", "auto")
    monkeypatch.setenv("EMBEDDING_MODEL", "BAAI/bge-small-en-v1.5")
    monkeypatch.setenv("EMBEDDING_DIM", "384")
    assert load_settings(Settings).query_int8 is False  # not measured: fp32 unless asked


def test_int8_queries_beside_an_http_embedding_provider_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_KEY", API_KEY)
    monkeypatch.setenv("QUERY_EMBEDDING_QUANTIZATION", "int8")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "tei")
    monkeypatch.setenv("EMBEDDING_API_BASE_URL", "http://127.0.0.1:9")
    with pytest.raises(ContractConfigError, match="QUERY_EMBEDDING_QUANTIZATION"):
        load_settings(Settings)


def test_log_level_takes_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_KEY", API_KEY)
    monkeypatch.setenv("LOG_LEVEL", "info")
    assert load_settings(Settings).log_level == "INFO"


def test_a_memory_path_that_is_no_directory_is_refused_when_memory_is_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    a_file = tmp_path / "passwd"
    a_file.write_text("root:x:0:0\n")
    monkeypatch.setenv("API_KEY", API_KEY)
    monkeypatch.setenv("MEMORY_PATH", str(a_file))
    assert load_settings(Settings).memory_path == a_file  # memory off: not used, not checked
    monkeypatch.setenv("ENABLE_MEMORY", "true")
    with pytest.raises(ContractConfigError, match=r"^MEMORY_PATH: .* is not a directory"):
        load_settings(Settings)


def test_every_setting_belongs_to_exactly_one_group() -> None:
    owners = {
        name: [group.__name__ for group in GROUPS if name in group_fields(group)] for name in Settings.model_fields
    }
    assert {name: groups for name, groups in owners.items() if len(groups) != 1} == {}
    assert all(issubclass(Settings, group) for group in GROUPS)


def test_no_group_validator_shadows_another() -> None:
    # Validators are looked up by name across the bases: a name two groups share keeps only one.
    names = [
        name
        for group in GROUPS
        for kind in (group.__pydantic_decorators__.field_validators, group.__pydantic_decorators__.model_validators)
        for name in kind
    ]
    assert sorted(names) == sorted(set(names))


def test_a_group_reads_its_flat_variables_and_checks_them_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RERANKER_MODEL", "BAAI/bge-reranker-base")
    assert RerankSettings(_env_file=None).reranker_model == "BAAI/bge-reranker-base"
    monkeypatch.setenv("ENABLE_RERANKING", "true")
    with pytest.raises(ContractConfigError, match=r"^RERANKER_API_BASE_URL"):
        load_settings(RerankSettings, _env_file=None)


@pytest.mark.parametrize(
    ("name", "variable"),
    [
        ("reranker_api_base_url", "RERANKER_API_BASE_URL"),
        ("agent_api_base_url", "AGENT_API_BASE_URL"),
        ("chat_upstream_base_url", "CHAT_UPSTREAM_BASE_URL"),
        ("citation_base_url", "CITATION_BASE_URL"),
    ],
)
def test_every_upstream_url_must_be_http(name: str, variable: str) -> None:
    with pytest.raises(ContractConfigError) as caught:
        load_settings(Settings, api_key=API_KEY, _env_file=None, **{name: "ftp://upstream"})
    assert caught.value.variable == variable

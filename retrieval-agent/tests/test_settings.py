from __future__ import annotations

import pytest

from retrieval_agent.settings import Settings
from shared_contract import ContractConfigError, load_settings

from .conftest import API_KEY  # type: ignore[import-not-found]  # noqa: TID252


def test_defaults_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_KEY", API_KEY)
    settings = load_settings(Settings)
    assert settings.enable_hybrid_search is True
    assert settings.enable_reranking is False
    assert settings.initial_retrieval_multiplier == 3
    assert settings.search_result_sets == "merged"
    assert settings.query_generation_active is False  # no AGENT_API_BASE_URL
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

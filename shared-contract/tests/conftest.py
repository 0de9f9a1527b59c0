from __future__ import annotations

from pathlib import Path

import pytest

from shared_contract import ContractSettings, load_settings

# Every contract variable but where the offline models are (the tests read those), and the old
# name SPARSE_EMBEDDING_MODEL still accepts.
_MODEL_LOCATIONS = {"local_models_dir", "fastembed_cache_path"}
CONTRACT_ENV_VARS = [name.upper() for name in ContractSettings.model_fields if name not in _MODEL_LOCATIONS]
CONTRACT_ENV_VARS.append("SPARSE_QUERY_MODEL")


@pytest.fixture(autouse=True)
def _clean_contract_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests see only the variables they set; a stray .env in the cwd must not leak in."""
    for name in CONTRACT_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def settings() -> ContractSettings:
    return load_settings(ContractSettings, qdrant_uri=":memory:")

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("LOCAL_MODELS_DIR", str(REPO_ROOT / ".cache" / "models"))

INGESTION_KEY = "cli-ingestion-key-0123456789-0123456789"
RETRIEVAL_KEY = "cli-retrieval-key-0123456789-0123456789"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RAG_INGESTION_URL", "RAG_RETRIEVAL_URL", "INGESTION_API_KEY", "RETRIEVAL_API_KEY", "QDRANT_URI"):
        monkeypatch.delenv(name, raising=False)

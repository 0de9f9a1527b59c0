"""The one embedder ``rag dev`` shares between both apps runs queries as the retrieval agent would."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingestion_service.settings import Settings as IngestionSettings
from rag_cli.dev import shared_embedder
from rag_runtime.embedding.dense import FastembedDenseEmbedder
from rag_runtime.embedding.query_int8 import Int8QueryEmbedder
from retrieval_agent.settings import Settings as RetrievalSettings
from shared_contract import load_settings

from .conftest import INGESTION_KEY, RETRIEVAL_KEY  # noqa: TID252


def settings_pair(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **env: str
) -> tuple[IngestionSettings, RetrievalSettings]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    common = {"qdrant_uri": None, "qdrant_path": tmp_path / "qdrant"}
    return (
        load_settings(IngestionSettings, api_key=INGESTION_KEY, **common),
        load_settings(RetrievalSettings, api_key=RETRIEVAL_KEY, **common),
    )


def test_queries_run_on_the_int8_copy_with_the_query_thread_count(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ingestion, retrieval = settings_pair(monkeypatch, tmp_path, QUERY_EMBEDDING_THREADS="1", EMBEDDING_THREADS="2")

    embedder = shared_embedder(ingestion, retrieval)

    assert isinstance(embedder.query_dense, Int8QueryEmbedder)
    assert embedder.query_dense.threads == 1
    # Documents keep the fp32 model, with the document thread count.
    assert type(embedder.dense) is FastembedDenseEmbedder
    assert embedder.dense.threads == 2


def test_quantization_none_runs_queries_on_the_document_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ingestion, retrieval = settings_pair(monkeypatch, tmp_path, QUERY_EMBEDDING_QUANTIZATION="none")

    embedder = shared_embedder(ingestion, retrieval)

    assert embedder.query_dense is embedder.dense
    assert type(embedder.dense) is FastembedDenseEmbedder

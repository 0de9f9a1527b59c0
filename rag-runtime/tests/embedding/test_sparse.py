"""The fastembed sparse embedder: a queries-only BM42 never loads its network."""

from __future__ import annotations

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.embedding.fastembed_internals import onnx_session
from shared_contract import ContractSettings, load_settings
from shared_contract.embedding_models import sparse_queries_run_network

TEXT = "Qdrant is a vector search engine for neural search."


def settings() -> ContractSettings:
    return load_settings(ContractSettings, qdrant_uri=":memory:")


def test_a_queries_only_bm42_builds_the_same_query_vectors_without_its_network(embedder: ContractEmbedder) -> None:
    queries_only = ContractEmbedder(settings(), sparse_queries_only=True)
    queries_only.warm_up()
    assert queries_only.sparse is not None
    assert queries_only.sparse.tokenizer_only

    assert queries_only.embed_query(TEXT).sparse == embedder.embed_query(TEXT).sparse
    # Fails if a fastembed release runs BM42's network for queries: the session would be loaded.
    assert onnx_session(queries_only.sparse.model) is None
    # Without the network there is no fused dense + sparse pass to build.
    assert not queries_only.fused
    assert embedder.fused


def test_a_queries_only_bm42_loads_its_network_for_a_document(embedder: ContractEmbedder) -> None:
    queries_only = ContractEmbedder(settings(), sparse_queries_only=True)
    queries_only.warm_up()

    assert queries_only.embed_sparse_documents([TEXT]) == embedder.embed_sparse_documents([TEXT])
    assert queries_only.sparse is not None
    assert onnx_session(queries_only.sparse.model) is not None


def test_only_models_that_tokenize_queries_skip_their_network() -> None:
    assert not sparse_queries_run_network("Qdrant/bm42-all-minilm-l6-v2-attentions")
    assert not sparse_queries_run_network("Qdrant/bm25")
    assert sparse_queries_run_network("prithivida/Splade_PP_en_v1")
    assert sparse_queries_run_network("Qdrant/minicoil-v1")

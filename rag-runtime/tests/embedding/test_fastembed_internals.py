"""The fastembed internals the contract relies on still exist and behave as written against.

If a fastembed release moves any of them, these fail with the name of what moved, before the
fused pass or token counting can silently produce other vectors or other counts.
"""

from __future__ import annotations

import os
import threading
from importlib.metadata import version
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.embedding.dense import FastembedDenseEmbedder
from rag_runtime.embedding.fastembed_internals import (
    SUPPORTED_FASTEMBED,
    embed_one,
    model_directory,
    model_tokenizer,
    onnx_session,
    post_process,
    replace_onnx_session,
    tokenize,
    truncating_tokenizer,
)
from rag_runtime.embedding.sparse import to_sparse_data

# Every test here reads the offline-built models (make models).
pytestmark = pytest.mark.models


def test_the_installed_fastembed_is_the_series_the_internals_were_checked_against() -> None:
    major, minor = (int(part) for part in version("fastembed").split(".")[:2])
    assert (major, minor) == SUPPORTED_FASTEMBED


def test_tokenizer_is_the_models_own_with_its_truncation(embedder: ContractEmbedder) -> None:
    assert isinstance(embedder.dense, FastembedDenseEmbedder)
    tokenizer = model_tokenizer(embedder.dense.model)
    assert tokenizer.truncation is not None
    assert tokenizer.truncation["max_length"] == 256
    assert tokenizer.encode("hello world").tokens == ["[CLS]", "hello", "world", "[SEP]"]


def test_the_sparse_models_truncating_tokenizer_is_bm42s_own(embedder: ContractEmbedder) -> None:
    assert embedder.sparse is not None
    tokenizer = truncating_tokenizer(embedder.sparse.model)
    assert tokenizer is not None
    assert tokenizer.truncation is not None
    assert tokenizer.truncation["max_length"] == 256
    assert len(tokenizer.encode("protein " * 600).ids) == 256


def test_one_session_run_post_processed_twice_equals_fastembeds_public_embed(embedder: ContractEmbedder) -> None:
    assert isinstance(embedder.dense, FastembedDenseEmbedder)
    assert embedder.sparse is not None
    texts = ["Aarhus is a city in Denmark.", "Mitochondria produce ATP for the cell."]
    encoded = tokenize(embedder.dense.model, texts)
    input_ids = np.array([e.ids for e in encoded], dtype=np.int64)
    attention_mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
    session = onnx_session(embedder.sparse.model)
    hidden, attention = session.run(
        ["last_hidden_state", "attention_6"],
        {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": np.zeros_like(input_ids)},
    )
    dense = list(post_process(embedder.dense.model, hidden, attention_mask, input_ids))
    sparse = [
        to_sparse_data(vector) for vector in post_process(embedder.sparse.model, attention, attention_mask, input_ids)
    ]
    public_dense = list(embedder.dense.model.embed(texts))
    public_sparse = [to_sparse_data(vector) for vector in embedder.sparse.model.embed(texts)]
    np.testing.assert_allclose(np.array(dense), np.array(public_dense), atol=1e-5)
    for ours, theirs in zip(sparse, public_sparse, strict=True):
        assert ours.indices == theirs.indices
        np.testing.assert_allclose(ours.values, theirs.values, atol=1e-5)


def test_one_texts_forward_pass_is_fastembeds_public_embed_bit_for_bit(embedder: ContractEmbedder) -> None:
    assert isinstance(embedder.dense, FastembedDenseEmbedder)
    model = embedder.dense.model
    for text in ["query: a", "Aarhus is a city in Denmark.", "Mitochondria produce ATP for the cell. " * 80]:
        ours = embed_one(model, text)
        theirs = next(iter(model.embed([text])))
        assert ours.dtype == theirs.dtype
        assert np.array_equal(ours, theirs)


def test_a_query_runs_one_forward_pass_without_fastembeds_batching(
    embedder: ContractEmbedder, monkeypatch: Any
) -> None:
    model = cast(FastembedDenseEmbedder, embedder.query_dense).model
    batched: list[object] = []
    public_embed = model.embed

    def spy(*args: Any, **kwargs: Any) -> Any:
        batched.append(args)
        return public_embed(*args, **kwargs)

    monkeypatch.setattr(model, "embed", spy)
    vectors = embedder.embed_query("vector search engine", with_sparse=False)
    assert batched == []
    prefixed = f"{embedder.settings.embedding_prefix_query}vector search engine"
    assert vectors.dense == next(iter(public_embed([prefixed]))).tolist()


def test_model_directory_is_where_a_lazily_loaded_model_has_its_files() -> None:
    from fastembed import TextEmbedding

    models_dir = Path(os.environ["LOCAL_MODELS_DIR"])
    folder = models_dir / "sentence-transformers__all-MiniLM-L6-v2"
    lazy = TextEmbedding("sentence-transformers/all-MiniLM-L6-v2", specific_model_path=str(folder), lazy_load=True)
    assert model_directory(lazy) == folder
    assert (model_directory(lazy) / "model.onnx").is_file()


class CountingSession:
    """An ONNX session that counts its runs and hands them to the real one."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.runs = 0

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.runs += 1
        return self.inner.run(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_lazily_built_model_runs_the_session_it_is_given() -> None:
    import onnxruntime as ort
    from fastembed import TextEmbedding

    folder = Path(os.environ["LOCAL_MODELS_DIR"]) / "sentence-transformers__all-MiniLM-L6-v2"
    name = "sentence-transformers/all-MiniLM-L6-v2"
    eager = list(TextEmbedding(name, specific_model_path=str(folder), threads=1).embed(["Aarhus is a city."]))
    lazy = TextEmbedding(name, specific_model_path=str(folder), threads=1, lazy_load=True)
    lazy.token_count("")  # the tokenizer alone
    assert onnx_session(lazy) is None
    counting = CountingSession(ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"]))
    replace_onnx_session(lazy, counting)
    vectors = list(lazy.embed(["Aarhus is a city."]))
    assert onnx_session(lazy) is counting  # fastembed did not load a session of its own
    assert counting.runs == 1
    np.testing.assert_allclose(np.array(vectors), np.array(eager), atol=1e-6)


class RecordingSession:
    """An ONNX Runtime session that notes each run in a shared event list."""

    def __init__(self, session: Any, events: list[str]) -> None:
        self.session = session
        self.events = events

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.events.append("forward pass")
        return self.session.run(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


def test_on_model_run_is_called_just_before_the_dense_forward_pass(
    embedder: ContractEmbedder,
) -> None:
    model = cast(FastembedDenseEmbedder, embedder.query_dense).model
    original = onnx_session(model)
    events: list[str] = []
    signalled_from: list[int] = []

    def on_model_run() -> None:
        events.append("signal")
        signalled_from.append(threading.get_ident())

    replace_onnx_session(model, RecordingSession(original, events))
    try:
        signalled = embedder.embed_query("vector search engine", on_model_run=on_model_run)
        assert events == ["signal", "forward pass"]
        # Later runs without a callback, on this thread or another, signal nothing.
        plain = embedder.embed_query("vector search engine")
        assert events == ["signal", "forward pass", "forward pass"]
    finally:
        replace_onnx_session(model, original)
    assert signalled_from == [threading.get_ident()]  # from the embedding's own thread
    assert signalled == plain  # the same vectors, bit for bit
    assert signalled.sparse == embedder.embed_sparse_query("vector search engine")

"""Every use of fastembed internals, in one place (checked against fastembed 0.9.x, pinned).

fastembed has no public API for six things the contract needs: the loaded model's tokenizer (to
count tokens exactly as the model will), running its ONNX session once while post-processing
the outputs for two models (the fused dense + BM42 pass), where a downloaded model's files
are (the int8 query copy is built from them), the int8 query copy's session options, a
signal just before a query's forward pass (so a search sends its term legs while the model
runs; it relies on fastembed calling the session's ``run`` on the calling thread), and one
text's forward pass without the batching generator of ``embed`` (a query's vector ~0.1 ms
sooner). These helpers are the only code that touches fastembed's private attributes;
``tests/embedding/test_fastembed_internals.py`` fails loudly when a fastembed release changes
them, and shared-contract pins ``fastembed>=0.9.1,<0.10``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

SUPPORTED_FASTEMBED = (0, 9)

T = TypeVar("T")

# The callback the current thread's next ONNX run calls first (signal_before_run).
_before_run = threading.local()
_wrapping = threading.Lock()


def model_tokenizer(model: Any) -> Tokenizer:
    """The tokenizer of a loaded ``TextEmbedding`` / ``SparseTextEmbedding`` (with its truncation)."""
    tokenizer: Tokenizer | None = model.model.tokenizer
    if tokenizer is None:
        raise RuntimeError("fastembed model has no tokenizer loaded")
    return tokenizer


def truncating_tokenizer(model: Any) -> Tokenizer | None:
    """The tokenizer of a loaded transformer ``SparseTextEmbedding`` (BM42, SPLADE, miniCOIL) when it
    cuts long inputs; None for a model that reads any length (BM25 splits words itself)."""
    from tokenizers import Tokenizer

    tokenizer = getattr(model.model, "tokenizer", None)
    if isinstance(tokenizer, Tokenizer) and tokenizer.truncation:
        return tokenizer
    return None


def onnx_session(model: Any) -> Any:
    """The ``onnxruntime.InferenceSession`` of a fastembed model (None while one built with
    ``lazy_load`` has not loaded it)."""
    return getattr(model.model, "model", None)


def replace_onnx_session(model: Any, session: Any) -> None:
    """Run a fastembed model on ``session`` (its graph with other session options: fastembed exposes
    none but the memory arena). Given to a model built with ``lazy_load``, it is the only session:
    fastembed loads its own only while it has none."""
    model.model.model = session


def model_directory(model: Any) -> Path:
    """Where a ``TextEmbedding`` (loaded or ``lazy_load``) has its files: its offline build or the
    download in the fastembed cache."""
    return Path(model.model._model_dir)


def tokenize(model: Any, texts: list[str]) -> list[Encoding]:
    """The model's own tokenization of ``texts`` (its padding and truncation)."""
    encodings: list[Encoding] = model.model.tokenize(texts)
    return encodings


def post_process(
    model: Any, output: np.ndarray[Any, Any], attention_mask: np.ndarray[Any, Any], input_ids: np.ndarray[Any, Any]
) -> Any:
    """fastembed's own post-processing of one ONNX output (pooling, normalising, BM42 weighting)."""
    from fastembed.common.onnx_model import OnnxOutputContext

    context = OnnxOutputContext(model_output=output, attention_mask=attention_mask, input_ids=input_ids)
    return model.model._post_process_onnx_output(context)


def embed_one(model: Any, text: str) -> np.ndarray[Any, Any]:
    """``text``'s vector from a loaded ``TextEmbedding``: the model's own ``onnx_embed`` (tokenizing,
    inputs, session run) and post-processing, what ``embed`` runs per batch, without its batching
    generator. The same vector, bit for bit."""
    context = model.model.onnx_embed([text])
    vector: np.ndarray[Any, Any] = next(iter(model.model._post_process_onnx_output(context)))
    return vector


class _SignallingSession:
    """An ONNX Runtime session that, before each run, calls the calling thread's pending callback."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def run(self, *args: Any, **kwargs: Any) -> Any:
        callback: Callable[[], None] | None = getattr(_before_run, "callback", None)
        if callback is not None:
            _before_run.callback = None
            callback()
        return self.session.run(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


def signal_before_run(model: Any, callback: Callable[[], None], embed: Callable[[], T]) -> T:
    """``embed()``, which runs ``model``'s ONNX session on this thread, with ``callback`` called just
    before the first run (after tokenizing): the session is wrapped once so that its ``run`` calls
    this thread's pending callback first. A model whose session is not loaded yet (``lazy_load``)
    gets the callback at once."""
    session = onnx_session(model)
    if session is None:
        callback()
        return embed()
    if not isinstance(session, _SignallingSession):
        with _wrapping:
            session = onnx_session(model)
            if not isinstance(session, _SignallingSession):
                replace_onnx_session(model, _SignallingSession(session))
    _before_run.callback = callback
    try:
        return embed()
    finally:
        _before_run.callback = None

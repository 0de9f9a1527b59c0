"""The query-side int8 copy of an in-process dense model (QUERY_EMBEDDING_QUANTIZATION).

One short query on 2 cores spends most of its search time in the dense model's fp32 forward pass
(MiniLM: 8-10 ms of a ~25 ms /search on one thread). The same network with int8 weights
(per-channel, dynamic int8 activations, ONNX Runtime's VNNI/AMX kernels) takes about half that,
and its query vectors stay at cosine 0.984 or more to the fp32 ones (mean 0.994 over SciFact's
test queries; ``python -m benchmarks.stages`` measures both). Documents are never embedded with
it: stored vectors stay the contract's fp32 vectors, so a collection is the same with or without
it, and the quality it costs is measured (docs/benchmarks.md).

A BERT encoder is first rebuilt on ONNX Runtime's fused attention (:mod:`.bert_fusion`), which takes
another ~10 % off the int8 pass; any other graph is quantized as it is.

The copy is built once per source model file and build recipe and kept beside the offline builds
(``<LOCAL_MODELS_DIR>/int8-query/<model>-<sha256 prefix>-<recipe>/``; the retrieval image builds it
in) or, where that directory is read-only or unset, in the fastembed cache (FASTEMBED_CACHE_PATH).
Rebuilding and quantizing load the whole ONNX graph (~0.8 GB peak for MiniLM), so they run in a
child process (:mod:`.int8_build`): the service never imports ``onnx`` and keeps none of that memory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final, Literal

from rag_runtime.embedding.dense import FastembedDenseEmbedder, load_fastembed
from rag_runtime.embedding.fastembed_internals import model_directory, replace_onnx_session
from shared_contract.embedding_models import BUILD_MANIFEST
from shared_contract.errors import ContractConfigError, ModelUnavailableError

logger = logging.getLogger(__name__)

QueryQuantization = Literal["auto", "int8", "none"]

# Dense models whose int8 query copy was measured against fp32 queries on the benchmarks
# (docs/benchmarks.md): QUERY_EMBEDDING_QUANTIZATION=auto quantizes these only.
INT8_QUERY_MEASURED: Final = frozenset({"sentence-transformers/all-MiniLM-L6-v2"})

CACHE_FOLDER: Final = "int8-query"
MARKER: Final = "int8-query.json"
# Weight-only node types: MatMul/Gemm against a stored weight, and the embedding tables (Gather).
QUANTIZED_OPS: Final = ("MatMul", "Gemm", "Gather")
_QUANTIZE_TIMEOUT_S: Final = 600
# The child's entry point (never imported by the services: it imports ``onnx``).
BUILD_MODULE: Final = "rag_runtime.embedding.int8_build"
PLAIN_METHOD: Final = "onnxruntime quantize_dynamic: QInt8 weights, per channel, " + "/".join(QUANTIZED_OPS)
FUSED_METHOD: Final = f"BERT rebuilt on com.microsoft Attention + BiasGelu (bert_fusion), then {PLAIN_METHOD}/Attention"
# The child's stdout: the method it used (kept in the copy's marker) and why a graph was not fused.
METHOD_PREFIX: Final = "method: "
UNFUSED_PREFIX: Final = "unfused: "
# Part of a copy's folder name: a new recipe builds a new copy instead of reusing the old one.
RECIPE_VERSION: Final = "r2"
# ONNX Runtime fuses each residual Add + LayerNorm into one SkipLayerNormalization; on a query's few
# tokens that kernel made the int8 pass ~0.6 ms slower (2.8 vs 3.4 ms) than the unfused ops, at the
# same vectors (cosine to fp32 queries unchanged; docs/benchmarks.md). Documents (long batches)
# gain nothing from it, so only the query copy's session leaves it out.
QUERY_DISABLED_OPTIMIZERS: Final = ("SkipLayerNormFusion",)
DISABLED_OPTIMIZERS_KEY: Final = "optimization.disable_specified_optimizers"


def query_int8_enabled(choice: QueryQuantization, *, provider: str, model_name: str) -> bool:
    """Whether queries run on the int8 copy: ``auto`` for a measured fastembed model, ``int8`` for
    any fastembed model, ``none`` never. ``int8`` beside another provider is a configuration error."""
    if choice == "none":
        return False
    if provider != "fastembed":
        if choice == "int8":
            raise ContractConfigError(
                "QUERY_EMBEDDING_QUANTIZATION",
                f"int8 needs EMBEDDING_PROVIDER=fastembed (the model runs in this process), not {provider}",
            )
        return False
    return choice == "int8" or model_name in INT8_QUERY_MEASURED


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def int8_model_dir(source_dir: Path, model_file: str, roots: Sequence[Path]) -> Path:
    """A directory fastembed loads like ``source_dir``, with ``model_file`` quantized to int8.

    A complete copy of this exact source file under any of ``roots`` is reused (a read-only
    LOCAL_MODELS_DIR may hold one built with the image); otherwise it is built under the first root
    that takes the writes: under a temporary name, then renamed into place, so a reader never sees
    half a copy (two processes building at once both succeed; one rename wins). Raises
    ModelUnavailableError when no root can hold it or the model cannot be quantized.
    """
    source = source_dir / model_file
    if not source.is_file():
        raise ModelUnavailableError(f"no {model_file} in {source_dir} to quantize for queries")
    folder = f"{source_dir.name}-{file_sha256(source)[:16]}-{RECIPE_VERSION}"
    for root in roots:
        if (root / CACHE_FOLDER / folder / MARKER).is_file():
            return root / CACHE_FOLDER / folder
    failures: list[str] = []
    for root in roots:
        try:
            return _build(source_dir, model_file, root / CACHE_FOLDER / folder)
        except OSError as exc:  # this root does not take writes: the next one may
            failures.append(f"{root}: {exc}")
    raise ModelUnavailableError(
        f"could not write the int8 query model ({'; '.join(failures) or 'no directory to write to'}); set "
        "FASTEMBED_CACHE_PATH to a writable directory, or QUERY_EMBEDDING_QUANTIZATION=none"
    )


def _build(source_dir: Path, model_file: str, target: Path) -> Path:
    source = source_dir / model_file
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    try:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(source_dir, staging, ignore=_model_files(source_dir, model_file))
        method = _quantize_in_child(source, staging / model_file)
        (staging / MARKER).write_text(
            json.dumps({"source": str(source), "method": method}, indent=2) + "\n", encoding="utf-8"
        )
        try:
            staging.rename(target)
        except OSError:
            if not (target / MARKER).is_file():  # not another process's finished copy: a real failure
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _model_files(source_dir: Path, model_file: str) -> Callable[[str, list[str]], Iterable[str]]:
    """copytree's ``ignore``: the model file itself (written quantized), its external data, and the
    offline build's manifest (its checksums are the fp32 file's)."""
    model = (source_dir / model_file).resolve()

    def ignore(directory: str, names: list[str]) -> list[str]:
        return [
            name
            for name in names
            if (Path(directory) / name).resolve() == model or name.endswith(".onnx_data") or name == BUILD_MANIFEST
        ]

    return ignore


def _quantize_in_child(source: Path, target: Path) -> str:
    """Quantize in a child process; returns the method it reports."""
    command = [sys.executable, "-m", BUILD_MODULE, str(source), str(target)]
    try:
        # Fixed argv (this interpreter, this module, two paths): no shell, nothing from a request.
        result = subprocess.run(  # noqa: S603
            command, capture_output=True, text=True, timeout=_QUANTIZE_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ModelUnavailableError(f"quantizing {source} for queries took over {_QUANTIZE_TIMEOUT_S} s") from exc
    if result.returncode != 0 or not target.is_file():
        detail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ModelUnavailableError(
            f"quantizing {source} for queries failed ({detail[0][:300]}); QUERY_EMBEDDING_QUANTIZATION=none "
            "runs queries on the fp32 model"
        )
    lines = result.stdout.splitlines()
    reported = [line.removeprefix(METHOD_PREFIX) for line in lines if line.startswith(METHOD_PREFIX)]
    if not reported:
        raise ModelUnavailableError(f"quantizing {source} for queries reported no method: {BUILD_MODULE} changed?")
    method = reported[-1]
    if method != FUSED_METHOD:
        reasons = [line.removeprefix(UNFUSED_PREFIX) for line in lines if line.startswith(UNFUSED_PREFIX)]
        logger.warning("int8 query copy of %s built without fused attention: %s", source, "; ".join(reasons)[:300])
    return method


class Int8QueryEmbedder(FastembedDenseEmbedder):
    """A fastembed dense model run on its int8 copy: for query vectors only, never for documents."""

    def warm_up(self) -> None:
        if self.loaded:
            return
        from fastembed import TextEmbedding

        directory = self.load_dir()
        # Loaded lazily: fastembed's own session would be built, replaced and still hold ~20 MB.
        model = load_fastembed(
            TextEmbedding,
            self.model_name,
            model_dir=directory,
            cache_dir=self._cache_dir,
            threads=self._threads,
            tokenizer_only=True,
        )
        replace_onnx_session(model, query_session(directory / fastembed_model_file(self.model_name), self._threads))
        self._model = model

    def load_dir(self) -> Path:
        from fastembed import TextEmbedding

        source_dir = self.model_dir
        if source_dir is None:
            # Downloaded by name (a model hub is reachable): fetch it without loading its session.
            hub_model = load_fastembed(
                partial(TextEmbedding, lazy_load=True),
                self.model_name,
                model_dir=None,
                cache_dir=self._cache_dir,
                threads=None,
            )
            source_dir = model_directory(hub_model)
        return int8_model_dir(
            source_dir, fastembed_model_file(self.model_name), int8_roots(self.model_dir, self._cache_dir)
        )


def query_session(path: Path, threads: int | None, disabled: Sequence[str] = QUERY_DISABLED_OPTIMIZERS) -> Any:
    """An ONNX Runtime session for query-sized inputs: fastembed's options (all graph optimizations,
    ``threads`` when set) less the ``disabled`` optimizers."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
    if disabled:
        options.add_session_config_entry(DISABLED_OPTIMIZERS_KEY, ",".join(disabled))
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def int8_roots(offline_build: Path | None, fastembed_cache_path: Path | None) -> list[Path]:
    """Where int8 copies are looked for and built: beside the model's offline build (LOCAL_MODELS_DIR;
    built into the image), then the fastembed cache (FASTEMBED_CACHE_PATH, else fastembed's default)."""
    configured = fastembed_cache_path if fastembed_cache_path not in (None, Path()) else None
    from_env = os.environ.get("FASTEMBED_CACHE_PATH")
    cache = configured or (Path(from_env) if from_env else Path(tempfile.gettempdir()) / "fastembed_cache")
    return [*([offline_build.parent] if offline_build is not None else []), cache]


def fastembed_model_file(model_name: str) -> str:
    """The ONNX file fastembed loads for ``model_name`` (relative to its directory)."""
    from fastembed import TextEmbedding

    for item in TextEmbedding.list_supported_models():
        if str(item["model"]).lower() == model_name.lower():
            return str(item["model_file"])
    raise ModelUnavailableError(f"fastembed does not know {model_name}: no int8 query copy can be built")


def prebuild() -> Path:
    """Build the configured fastembed dense model's int8 copy into LOCAL_MODELS_DIR (an image build
    step, so a read-only container never quantizes at start-up)."""
    from shared_contract.embedding_models import local_model_dir
    from shared_contract.settings import ContractSettings, load_settings

    settings = load_settings(ContractSettings)
    source_dir = local_model_dir(settings.local_models_dir, settings.embedding_model)
    if settings.embedding_provider != "fastembed" or source_dir is None or settings.local_models_dir is None:
        raise ModelUnavailableError("--prebuild needs LOCAL_MODELS_DIR with the offline build of a fastembed model")
    return int8_model_dir(source_dir, fastembed_model_file(settings.embedding_model), [settings.local_models_dir])

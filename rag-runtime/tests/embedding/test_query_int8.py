"""The int8 query copy: when it is used, how it is built and cached, and what it may never change."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rag_runtime.embedding import ContractEmbedder
from rag_runtime.embedding.fastembed_internals import onnx_session
from rag_runtime.embedding.query_int8 import (
    DISABLED_OPTIMIZERS_KEY,
    FUSED_METHOD,
    MARKER,
    PLAIN_METHOD,
    Int8QueryEmbedder,
    int8_model_dir,
    int8_roots,
    query_int8_enabled,
)
from shared_contract import ContractSettings, load_settings
from shared_contract.errors import ContractConfigError, ModelUnavailableError

# Every test here reads the offline-built models (make models).
pytestmark = pytest.mark.models

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def write_tiny_model(directory: Path, seed: int) -> Path:
    """A one-MatMul ONNX model with a stored weight, beside a tokenizer file, as a model folder holds."""
    directory.mkdir(parents=True)
    weight = np.random.default_rng(seed).standard_normal((8, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="project")],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        initializer=[numpy_helper.from_array(weight, name="w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(directory / "model.onnx"))
    (directory / "tokenizer.json").write_text('{"tiny": true}', encoding="utf-8")
    return directory


def test_auto_quantizes_the_measured_fastembed_models_only() -> None:
    assert query_int8_enabled("auto", provider="fastembed", model_name=MINILM)
    assert not query_int8_enabled("auto", provider="fastembed", model_name="BAAI/bge-small-en-v1.5")
    assert not query_int8_enabled("auto", provider="tei", model_name=MINILM)
    assert query_int8_enabled("int8", provider="fastembed", model_name="BAAI/bge-small-en-v1.5")
    assert not query_int8_enabled("none", provider="fastembed", model_name=MINILM)


def test_int8_beside_a_model_that_does_not_run_here_is_a_configuration_error() -> None:
    with pytest.raises(ContractConfigError, match="QUERY_EMBEDDING_QUANTIZATION"):
        query_int8_enabled("int8", provider="openai-compat", model_name=MINILM)


def test_the_copy_holds_int8_weights_and_the_models_other_files(tmp_path: Path) -> None:
    source = write_tiny_model(tmp_path / "org__tiny", seed=1)

    copy = int8_model_dir(source, "model.onnx", [tmp_path / "cache"])

    quantized = onnx.load(str(copy / "model.onnx"))
    assert {initializer.data_type for initializer in quantized.graph.initializer} >= {TensorProto.INT8}
    assert (copy / "tokenizer.json").read_text(encoding="utf-8") == '{"tiny": true}'
    assert (copy / MARKER).is_file()
    assert copy.parent == tmp_path / "cache" / "int8-query"
    assert not [path for path in copy.parent.iterdir() if ".tmp-" in path.name]


def test_a_graph_that_is_not_a_bert_encoder_is_quantized_as_it_is_with_a_warning_and_the_marker_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = write_tiny_model(tmp_path / "org__tiny", seed=1)
    (source / "config.json").write_text('{"num_attention_heads": 2}', encoding="utf-8")

    with caplog.at_level(logging.WARNING, logger="rag_runtime.embedding.query_int8"):
        copy = int8_model_dir(source, "model.onnx", [tmp_path / "cache"])

    assert "without fused attention: inputs ['x']" in caplog.text
    assert json.loads((copy / MARKER).read_text(encoding="utf-8"))["method"] == PLAIN_METHOD
    assert [node.op_type for node in onnx.load(str(copy / "model.onnx")).graph.node].count("MatMulInteger") == 1


def test_the_copy_is_built_once_per_source_file(tmp_path: Path) -> None:
    source = write_tiny_model(tmp_path / "org__tiny", seed=1)
    first = int8_model_dir(source, "model.onnx", [tmp_path / "cache"])
    built_at = (first / "model.onnx").stat().st_mtime_ns

    again = int8_model_dir(source, "model.onnx", [tmp_path / "cache"])
    other = int8_model_dir(write_tiny_model(tmp_path / "b" / "org__tiny", seed=2), "model.onnx", [tmp_path / "cache"])

    assert again == first
    assert (again / "model.onnx").stat().st_mtime_ns == built_at
    assert other != first


def test_a_model_that_cannot_be_quantized_is_a_typed_error_and_leaves_no_copy(tmp_path: Path) -> None:
    source = tmp_path / "org__broken"
    source.mkdir()
    (source / "model.onnx").write_bytes(b"not an onnx graph")

    with pytest.raises(ModelUnavailableError, match="QUERY_EMBEDDING_QUANTIZATION=none"):
        int8_model_dir(source, "model.onnx", [tmp_path / "cache"])
    assert list((tmp_path / "cache" / "int8-query").iterdir()) == []


def test_an_unwritable_cache_is_a_typed_error_naming_the_way_out(tmp_path: Path) -> None:
    source = write_tiny_model(tmp_path / "org__tiny", seed=1)
    blocked = tmp_path / "cache-is-a-file"
    blocked.write_text("", encoding="utf-8")

    with pytest.raises(ModelUnavailableError, match="FASTEMBED_CACHE_PATH"):
        int8_model_dir(source, "model.onnx", [blocked])


def test_a_root_that_takes_no_writes_leaves_the_copy_to_the_next(tmp_path: Path) -> None:
    source = write_tiny_model(tmp_path / "org__tiny", seed=1)
    read_only_models = tmp_path / "models-is-a-file"
    read_only_models.write_text("", encoding="utf-8")

    copy = int8_model_dir(source, "model.onnx", [read_only_models, tmp_path / "cache"])

    assert copy.parent == tmp_path / "cache" / "int8-query"


def test_a_copy_under_any_root_is_reused_before_building_another(tmp_path: Path) -> None:
    source = write_tiny_model(tmp_path / "org__tiny", seed=1)
    prebuilt = int8_model_dir(source, "model.onnx", [tmp_path / "image-models"])

    found = int8_model_dir(source, "model.onnx", [tmp_path / "cache", tmp_path / "image-models"])

    assert found == prebuilt
    assert not (tmp_path / "cache").exists()


def test_copies_go_beside_the_offline_builds_then_into_the_fastembed_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = tmp_path / "models"
    build = models / "org__tiny"  # the model's offline build under LOCAL_MODELS_DIR
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.delenv("FASTEMBED_CACHE_PATH", raising=False)
    assert int8_roots(build, None) == [models, tmp_path / "tmp" / "fastembed_cache"]
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", "")  # compose passes unset variables as empty
    assert int8_roots(build, None) == [models, tmp_path / "tmp" / "fastembed_cache"]
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(tmp_path / "env-cache"))
    assert int8_roots(None, None) == [tmp_path / "env-cache"]
    assert int8_roots(build, tmp_path / "configured") == [models, tmp_path / "configured"]


@pytest.fixture(scope="module")
def int8_settings(tmp_path_factory: pytest.TempPathFactory) -> ContractSettings:
    return load_settings(
        ContractSettings, qdrant_uri=":memory:", fastembed_cache_path=tmp_path_factory.mktemp("fastembed")
    )


@pytest.fixture(scope="module")
def int8_embedder(int8_settings: ContractSettings) -> ContractEmbedder:
    instance = ContractEmbedder(int8_settings, query_int8=True)
    instance.warm_up()
    return instance


QUERIES = [
    "Which gene variants raise the risk of type 2 diabetes?",
    "Does vitamin D supplementation prevent fractures in older adults?",
    "Hvem vant stortingsvalget i 2021?",
    "invoice total due date",
]
PASSAGES = [
    "Variants in TCF7L2 are the strongest common genetic risk factor for type 2 diabetes.",
    "In adults over 65, daily vitamin D did not lower the rate of hip fractures.",
    "Arbeiderpartiet vant stortingsvalget i 2021, og Jonas Gahr Støre ble statsminister.",
    "The invoice total of 1,250 EUR is due on 30 June.",
]


def test_int8_query_vectors_stay_close_to_the_fp32_ones_and_rank_the_same(
    embedder: ContractEmbedder, int8_embedder: ContractEmbedder
) -> None:
    passages = np.array(embedder.embed_documents(PASSAGES).dense)
    for index, query in enumerate(QUERIES):
        fp32 = np.array(embedder.embed_query(query).dense)
        int8 = np.array(int8_embedder.embed_query(query).dense)
        assert not np.array_equal(fp32, int8)  # the copy really runs
        assert float(fp32 @ int8) > 0.98
        assert int(np.argmax(passages @ int8)) == int(np.argmax(passages @ fp32)) == index


def test_documents_keep_the_fp32_vectors_beside_an_int8_query_model(
    embedder: ContractEmbedder, int8_settings: ContractSettings
) -> None:
    int8_embedder = ContractEmbedder(int8_settings, query_int8=True)
    int8_embedder.warm_up()
    assert isinstance(int8_embedder.query_dense, Int8QueryEmbedder)
    fused = int8_embedder.embed_documents(PASSAGES, with_sparse=True)
    # The fused pass runs the sparse graph: the fp32 dense model is not even loaded for it.
    assert not int8_embedder.dense.loaded  # type: ignore[attr-defined]
    assert fused == embedder.embed_documents(PASSAGES, with_sparse=True)

    assert int8_embedder.embed_documents(PASSAGES).dense == embedder.embed_documents(PASSAGES).dense
    assert int8_embedder.dense.loaded  # type: ignore[attr-defined]


def test_tokens_are_counted_with_the_same_tokenizer_beside_an_int8_query_model(
    embedder: ContractEmbedder, int8_embedder: ContractEmbedder
) -> None:
    text = "Arbeiderpartiet vant stortingsvalget i 2021. " * 20
    assert int8_embedder.count_tokens(text) == embedder.count_tokens(text)
    assert int8_embedder.max_tokens == embedder.max_tokens == 256


def test_prebuild_puts_the_copy_beside_the_offline_builds_where_the_service_finds_it(tmp_path: Path) -> None:
    # The image build step: LOCAL_MODELS_DIR holds the offline builds (linked here, not copied).
    built = Path(os.environ["LOCAL_MODELS_DIR"]) / "sentence-transformers__all-MiniLM-L6-v2"
    models = tmp_path / "models"
    (models / built.name).mkdir(parents=True)
    for path in built.iterdir():
        (models / built.name / path.name).symlink_to(path)
    environment = {**os.environ, "LOCAL_MODELS_DIR": str(models)}

    result = subprocess.run(
        [sys.executable, "-m", "rag_runtime.embedding.int8_build", "--prebuild"],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )

    assert result.returncode == 0, result.stderr[-2000:]
    copies = list((models / "int8-query").iterdir())
    assert [copy.name.startswith(built.name) for copy in copies] == [True]
    found = int8_model_dir(built, "model.onnx", [tmp_path / "cache", models])
    assert found == copies[0]


def test_the_minilm_copy_runs_fused_int8_attention_and_its_marker_says_so(int8_embedder: ContractEmbedder) -> None:
    assert isinstance(int8_embedder.query_dense, Int8QueryEmbedder)
    copy = int8_embedder.query_dense.load_dir()

    ops = [node.op_type for node in onnx.load(str(copy / "model.onnx")).graph.node]
    assert ops.count("QAttention") == 6
    assert "Softmax" not in ops
    assert json.loads((copy / MARKER).read_text(encoding="utf-8"))["method"] == FUSED_METHOD


def test_the_query_copys_session_leaves_out_the_skip_layer_norm_fusion(int8_settings: ContractSettings) -> None:
    # dense_threads: what the retrieval agent passes (QUERY_EMBEDDING_THREADS), as fastembed would set it.
    instance = ContractEmbedder(int8_settings, query_int8=True, dense_threads=1)
    instance.warm_up()
    assert isinstance(instance.query_dense, Int8QueryEmbedder)
    options = onnx_session(instance.query_dense.model).get_session_options()
    assert options.get_session_config_entry(DISABLED_OPTIMIZERS_KEY) == "SkipLayerNormFusion"
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (1, 1)

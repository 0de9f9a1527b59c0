"""The BERT rebuild on fused attention: the same network as the export, or refused."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rag_runtime.embedding.bert_fusion import (
    NotFusableError,
    attention_heads,
    check_equivalent,
    fused_model,
    read_encoder,
)

# Every test here reads the offline-built models (make models).
pytestmark = pytest.mark.models

MINILM_DIR = "sentence-transformers__all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    directory = Path(os.environ["LOCAL_MODELS_DIR"]) / MINILM_DIR
    if not (directory / "model.onnx").is_file():
        pytest.fail(f"offline models missing in {directory.parent}: run `make models`")
    return directory


@pytest.fixture(scope="module")
def exported(minilm_dir: Path) -> onnx.ModelProto:
    return onnx.load(str(minilm_dir / "model.onnx"))


def test_the_rebuilt_encoder_computes_what_the_export_computes_on_a_padded_batch(
    exported: onnx.ModelProto, minilm_dir: Path
) -> None:
    fused = fused_model(exported, attention_heads(minilm_dir))

    ops = [node.op_type for node in fused.graph.node]
    assert ops.count("Attention") == 6
    assert ops.count("BiasGelu") == 6
    assert "Softmax" not in ops
    assert [value.name for value in fused.graph.input] == [value.name for value in exported.graph.input]
    assert fused.graph.output[0].name == exported.graph.output[0].name
    assert check_equivalent(exported, fused) < 1e-4


def test_the_weights_are_read_by_structure_with_query_key_value_in_order(exported: onnx.ModelProto) -> None:
    encoder = read_encoder(exported)

    assert len(encoder.layers) == 6
    assert encoder.word.shape == (30522, 384)
    assert encoder.position.shape == (512, 384)
    assert encoder.token_type.shape == (2, 384)
    initializers = {tensor.name: numpy_helper.to_array(tensor) for tensor in exported.graph.initializer}
    first = encoder.layers[0]
    for offset, role in enumerate(("query", "key", "value")):
        bias = initializers[f"inner.encoder.layer.0.attention.self.{role}.bias"]
        assert np.array_equal(first.qkv_bias[offset * 384 : (offset + 1) * 384], bias)
    assert first.up_weight.shape == (384, 1536)
    assert first.down_weight.shape == (1536, 384)


def test_a_rebuild_that_computes_something_else_is_refused(exported: onnx.ModelProto) -> None:
    # Six heads where the model has twelve: every weight in place, a different network.
    wrong = fused_model(exported, 6)

    with pytest.raises(NotFusableError, match="differs from the source"):
        check_equivalent(exported, wrong)


def test_a_rebuilt_graph_the_runtime_cannot_run_is_refused(exported: onnx.ModelProto) -> None:
    fused = fused_model(exported, 12)
    attention = next(node for node in fused.graph.node if node.op_type == "Attention")
    heads = next(attribute for attribute in attention.attribute if attribute.name == "num_heads")
    heads.i = 7  # does not divide the hidden size

    with pytest.raises(NotFusableError, match="could not run"):
        check_equivalent(exported, fused)


def test_a_graph_that_is_not_a_bert_encoder_is_not_fusable() -> None:
    weight = np.ones((8, 8), dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["input_ids", "w"], ["y"])],
        "tiny",
        [
            helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 8])
            for name in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        initializer=[numpy_helper.from_array(weight, name="w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    with pytest.raises(NotFusableError, match="LayerNormalization"):
        fused_model(model, 12)


def test_a_model_folder_without_a_head_count_is_not_fusable(tmp_path: Path) -> None:
    with pytest.raises(NotFusableError, match="num_attention_heads"):
        attention_heads(tmp_path)

"""A BERT encoder's ONNX graph rebuilt on ONNX Runtime's fused attention, for the int8 query copy.

An exported BERT runs each attention block as ~16 small ops (three projections, reshapes,
transposes, scaled scores, mask, softmax); on a query's ~20 tokens the time between those kernels
is a large part of the pass, and ONNX Runtime's own attention fusion does not recognise the mask
subgraph of recent exports. This module reads the weights out of the exported graph by its
structure (never by tensor names, which differ between exporters) and writes the same network
with one ``com.microsoft`` ``Attention`` node per layer (which ``quantize_dynamic`` turns into
``QAttention``) and ``BiasGelu``: MiniLM's int8 query pass 2.1-2.6 -> 1.9-2.2 ms (docs/benchmarks.md).

Anything that does not have the expected shape raises :class:`NotFusableError`, and a rebuilt graph
is used only after it reproduced the source graph's output on a padded probe batch
(:func:`check_equivalent`); the caller then quantizes the source graph as it is. Only the int8 build's
child process imports this module (it imports ``onnx``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# The largest difference from the source graph's output a rebuilt fp32 graph may show (measured:
# 2e-6 on MiniLM); an unrecognised variant (another GELU, another scale) is far above it.
EQUIVALENCE_TOLERANCE: Final = 1e-3
MS_DOMAIN: Final = "com.microsoft"
_PASS_THROUGH: Final = frozenset({"Add", "Reshape", "Transpose", "Mul", "Div", "Cast", "Identity"})


class NotFusableError(ValueError):
    """The graph is not an encoder this module can rebuild; it is quantized as it is."""


@dataclass(frozen=True, slots=True)
class Norm:
    scale: np.ndarray
    bias: np.ndarray
    epsilon: float


@dataclass(frozen=True, slots=True)
class Layer:
    qkv_weight: np.ndarray  # [hidden, 3 * hidden]: query, key, value projections side by side
    qkv_bias: np.ndarray
    out_weight: np.ndarray
    out_bias: np.ndarray
    attention_norm: Norm
    up_weight: np.ndarray
    up_bias: np.ndarray
    down_weight: np.ndarray
    down_bias: np.ndarray
    output_norm: Norm


@dataclass(frozen=True, slots=True)
class Encoder:
    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    embedding_norm: Norm
    layers: list[Layer]


class _Graph:
    """Lookups over one graph: producers, consumers and constant values (initializers and Constant nodes)."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.graph = graph
        self.constants: dict[str, np.ndarray] = {
            tensor.name: numpy_helper.to_array(tensor) for tensor in graph.initializer
        }
        self.producer: dict[str, onnx.NodeProto] = {}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
                self.constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
                continue
            for output in node.output:
                self.producer[output] = node
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)

    def only_consumer(self, name: str) -> onnx.NodeProto:
        found = self.consumers.get(name, [])
        if len(found) != 1:
            raise NotFusableError(f"{name} feeds {len(found)} nodes, expected one")
        return found[0]

    def weight_of(self, node: onnx.NodeProto) -> np.ndarray | None:
        """The stored 2-D right-hand side of a MatMul, else None (a MatMul of two activations)."""
        value = self.constants.get(node.input[1]) if node.op_type == "MatMul" else None
        return value if value is not None and value.ndim == 2 else None

    def stored_weight(self, node: onnx.NodeProto) -> np.ndarray:
        weight = self.weight_of(node)
        if weight is None:
            raise NotFusableError(f"{node.name} has no stored weight")
        return weight

    def bias_after(self, node: onnx.NodeProto) -> tuple[np.ndarray, onnx.NodeProto]:
        """The 1-D constant added right after ``node`` (either operand order), and that Add."""
        add = self.only_consumer(node.output[0])
        if add.op_type != "Add":
            raise NotFusableError(f"{node.name} is not followed by a bias Add")
        for name in add.input:
            value = self.constants.get(name)
            if value is not None and value.ndim == 1:
                return value, add
        raise NotFusableError(f"the Add after {node.name} adds no 1-D constant")

    def norm(self, node: onnx.NodeProto) -> Norm:
        attributes = {attribute.name: helper.get_attribute_value(attribute) for attribute in node.attribute}
        operands = list(node.input[1:3])
        scale = self.constants.get(operands[0]) if len(operands) == 2 else None
        bias = self.constants.get(operands[1]) if len(operands) == 2 else None
        if attributes.get("axis", -1) not in (-1, 2) or scale is None or bias is None:
            raise NotFusableError(f"{node.name} does not normalise the hidden axis with a stored scale and bias")
        return Norm(scale, bias, float(attributes.get("epsilon", 1e-5)))

    def other_input(self, add: onnx.NodeProto, known: str) -> str:
        if add.op_type != "Add" or known not in add.input:
            raise NotFusableError(f"{add.name} is not the residual Add over {known}")
        return str(add.input[1] if add.input[0] == known else add.input[0])

    def activation_matmul_reached(self, start: onnx.NodeProto) -> tuple[onnx.NodeProto, int]:
        """Follow ``start``'s output through reshapes, transposes, biases and scales to the MatMul of
        two activations it feeds, and the operand it is there."""
        node = start
        for _ in range(8):
            consumer = self.only_consumer(node.output[0])
            if consumer.op_type == "MatMul" and self.weight_of(consumer) is None:
                return consumer, list(consumer.input).index(node.output[0])
            if consumer.op_type not in _PASS_THROUGH:
                raise NotFusableError(f"{consumer.op_type} between a projection and the attention scores")
            node = consumer
        raise NotFusableError(f"no attention MatMul after {start.name}")


def _gathered_tables(graph: _Graph, name: str) -> list[tuple[np.ndarray, str]]:
    """The embedding tables summed into ``name`` and the index tensor each is gathered with."""
    node = graph.producer.get(name)
    if node is None:
        raise NotFusableError(f"{name} is not computed in the graph")
    if node.op_type == "Add":
        return [*_gathered_tables(graph, node.input[0]), *_gathered_tables(graph, node.input[1])]
    table = graph.constants.get(node.input[0]) if node.op_type == "Gather" else None
    if table is None or table.ndim != 2:
        raise NotFusableError(f"{node.op_type} where the embeddings should be gathered")
    return [(table, node.input[1])]


def _layer(graph: _Graph, hidden: str, attention_norm: onnx.NodeProto, output_norm: onnx.NodeProto) -> Layer:
    projections = [node for node in graph.consumers.get(hidden, []) if graph.weight_of(node) is not None]
    if len(projections) != 3:
        raise NotFusableError(f"{len(projections)} projections of one layer's input, expected query, key, value")
    # Query and key meet in the scores MatMul (operands 0 and 1) that feeds the softmax; value is
    # weighted by its output.
    roles: dict[str, onnx.NodeProto] = {}
    for projection in projections:
        matmul, operand = graph.activation_matmul_reached(projection)
        if _feeds_softmax(graph, matmul):
            roles["query" if operand == 0 else "key"] = projection
        else:
            roles["value"] = projection
    if set(roles) != {"query", "key", "value"}:
        raise NotFusableError("query, key and value could not be told apart")
    weighted = _weighted_values(graph, roles["value"])
    out = _next_weight_matmul(graph, weighted)
    out_bias, out_add = graph.bias_after(out)
    residual = graph.only_consumer(out_add.output[0])
    if graph.other_input(residual, out_add.output[0]) != hidden or residual.output[0] != attention_norm.input[0]:
        raise NotFusableError("the attention output does not reach its norm through one residual Add")
    normed = attention_norm.output[0]
    ups = [node for node in graph.consumers.get(normed, []) if graph.weight_of(node) is not None]
    if len(ups) != 1:
        raise NotFusableError("the feed-forward block has no single input projection")
    up_bias, _ = graph.bias_after(ups[0])
    down_residual = graph.producer.get(output_norm.input[0])
    if down_residual is None:
        raise NotFusableError("the layer's output norm has no residual Add before it")
    down_add = graph.producer.get(graph.other_input(down_residual, normed))
    if down_add is None or down_add.op_type != "Add":
        raise NotFusableError("the feed-forward output has no bias Add")
    down = next((graph.producer.get(name) for name in down_add.input if name in graph.producer), None)
    if down is None or graph.weight_of(down) is None:
        raise NotFusableError("the feed-forward block has no output projection")
    down_bias, _ = graph.bias_after(down)
    order = [roles["query"], roles["key"], roles["value"]]
    return Layer(
        qkv_weight=np.concatenate([graph.stored_weight(node) for node in order], axis=1),
        qkv_bias=np.concatenate([graph.bias_after(node)[0] for node in order]),
        out_weight=graph.stored_weight(out),
        out_bias=out_bias,
        attention_norm=graph.norm(attention_norm),
        up_weight=graph.stored_weight(ups[0]),
        up_bias=up_bias,
        down_weight=graph.stored_weight(down),
        down_bias=down_bias,
        output_norm=graph.norm(output_norm),
    )


def _feeds_softmax(graph: _Graph, matmul: onnx.NodeProto) -> bool:
    """Whether the attention MatMul's output reaches a Softmax through scale and mask ops (the scores)."""
    node = matmul
    for _ in range(6):
        consumers = graph.consumers.get(node.output[0], [])
        if len(consumers) != 1:
            return False
        node = consumers[0]
        if node.op_type == "Softmax":
            return True
        if node.op_type not in ("Mul", "Div", "Add", "Where", "Cast"):
            return False
    return False


def _weighted_values(graph: _Graph, value: onnx.NodeProto) -> onnx.NodeProto:
    matmul, operand = graph.activation_matmul_reached(value)
    probabilities = graph.producer.get(matmul.input[0])
    if operand != 1 or probabilities is None or probabilities.op_type != "Softmax":
        raise NotFusableError("the value projection is not weighted by the attention probabilities")
    return matmul


def _next_weight_matmul(graph: _Graph, start: onnx.NodeProto) -> onnx.NodeProto:
    node = start
    for _ in range(4):
        node = graph.only_consumer(node.output[0])
        if graph.weight_of(node) is not None:
            return node
        if node.op_type not in ("Transpose", "Reshape"):
            raise NotFusableError(f"{node.op_type} between the attention and its output projection")
    raise NotFusableError("no output projection after the attention")


def read_encoder(model: onnx.ModelProto) -> Encoder:
    """The weights of a BERT-style encoder (embeddings, post-norm layers) read from its exported graph."""
    graph = _Graph(model.graph)
    norms = [node for node in model.graph.node if node.op_type == "LayerNormalization"]
    if len(norms) < 3 or len(norms) % 2 == 0:
        raise NotFusableError(f"{len(norms)} LayerNormalization nodes: not an embedding norm plus two per layer")
    if model.graph.output[0].name != norms[-1].output[0]:
        raise NotFusableError("the first output is not the last layer's normalised hidden state")
    tables = _gathered_tables(graph, norms[0].input[0])
    by_index = {index: table for table, index in tables}
    if len(tables) != 3 or not {"input_ids", "token_type_ids"} <= set(by_index):
        raise NotFusableError("the embeddings are not word + position + token type tables")
    positions = [table for table, index in tables if index not in ("input_ids", "token_type_ids")]
    if len(positions) != 1:
        raise NotFusableError("no position embedding table beside the word and token type tables")
    layers = [
        _layer(graph, norms[2 * index].output[0], norms[2 * index + 1], norms[2 * index + 2])
        for index in range(len(norms) // 2)
    ]
    return Encoder(
        word=by_index["input_ids"],
        position=positions[0],
        token_type=by_index["token_type_ids"],
        embedding_norm=graph.norm(norms[0]),
        layers=layers,
    )


def fused_model(source: onnx.ModelProto, num_heads: int) -> onnx.ModelProto:
    """``source`` rebuilt with one ``Attention`` and one ``BiasGelu`` per layer (fp32, same inputs and
    first output). Positions are 0..n-1, as BERT's absolute position embeddings count them."""
    names = {value.name for value in source.graph.input}
    if names != {"input_ids", "attention_mask", "token_type_ids"}:
        raise NotFusableError(f"inputs {sorted(names)}, expected input_ids, attention_mask, token_type_ids")
    encoder = read_encoder(source)
    hidden = encoder.word.shape[1]
    if hidden % num_heads:
        raise NotFusableError(f"{num_heads} heads do not divide the hidden size {hidden}")
    weights: list[onnx.TensorProto] = []

    def stored(name: str, value: np.ndarray) -> str:
        weights.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def norm(x: str, values: Norm, out: str) -> onnx.NodeProto:
        return helper.make_node(
            "LayerNormalization",
            [x, stored(f"{out}.scale", values.scale), stored(f"{out}.bias", values.bias)],
            [out],
            axis=-1,
            epsilon=values.epsilon,
        )

    zero = stored("zero", np.array([0], dtype=np.int64))
    nodes = [
        helper.make_node("Shape", ["input_ids"], ["length"], start=1, end=2),
        helper.make_node("Gather", [stored("word", encoder.word), "input_ids"], ["words"], name="embed_words"),
        helper.make_node(
            "Gather", [stored("token_type", encoder.token_type), "token_type_ids"], ["types"], name="embed_types"
        ),
        helper.make_node("Slice", [stored("position", encoder.position), zero, "length", zero], ["positions"]),
        helper.make_node("Add", ["words", "types"], ["words_types"]),
        helper.make_node("Add", ["words_types", "positions"], ["embedded"]),
        norm("embedded", encoder.embedding_norm, "hidden0"),
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.INT32),
    ]
    state = "hidden0"
    last = len(encoder.layers) - 1
    for index, layer in enumerate(encoder.layers):
        p = f"layer{index}"
        nodes += [
            helper.make_node(
                "Attention",
                [state, stored(f"{p}.qkv", layer.qkv_weight), stored(f"{p}.qkv_bias", layer.qkv_bias), "mask"],
                [f"{p}.attention"],
                domain=MS_DOMAIN,
                num_heads=num_heads,
                name=f"{p}_attention",
            ),
            helper.make_node(
                "MatMul", [f"{p}.attention", stored(f"{p}.out", layer.out_weight)], [f"{p}.projected"], name=f"{p}_out"
            ),
            helper.make_node("Add", [f"{p}.projected", stored(f"{p}.out_bias", layer.out_bias)], [f"{p}.biased"]),
            helper.make_node("Add", [f"{p}.biased", state], [f"{p}.residual"]),
            norm(f"{p}.residual", layer.attention_norm, f"{p}.attended"),
            helper.make_node(
                "MatMul", [f"{p}.attended", stored(f"{p}.up", layer.up_weight)], [f"{p}.up_out"], name=f"{p}_up"
            ),
            helper.make_node(
                "BiasGelu", [f"{p}.up_out", stored(f"{p}.up_bias", layer.up_bias)], [f"{p}.gelu"], domain=MS_DOMAIN
            ),
            helper.make_node(
                "MatMul", [f"{p}.gelu", stored(f"{p}.down", layer.down_weight)], [f"{p}.down_out"], name=f"{p}_down"
            ),
            helper.make_node("Add", [f"{p}.down_out", stored(f"{p}.down_bias", layer.down_bias)], [f"{p}.down_biased"]),
            helper.make_node("Add", [f"{p}.down_biased", f"{p}.attended"], [f"{p}.ffn_residual"]),
        ]
        state = source.graph.output[0].name if index == last else f"hidden{index + 1}"
        nodes.append(norm(f"{p}.ffn_residual", layer.output_norm, state))
    graph = helper.make_graph(
        nodes, "bert_fused_attention", list(source.graph.input), [source.graph.output[0]], weights
    )
    opset = max((entry.version for entry in source.opset_import if entry.domain in ("", "ai.onnx")), default=17)
    fused = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", max(opset, 17)), helper.make_opsetid(MS_DOMAIN, 1)]
    )
    fused.ir_version = source.ir_version
    return fused


def check_equivalent(
    source: onnx.ModelProto, fused: onnx.ModelProto, *, tolerance: float = EQUIVALENCE_TOLERANCE
) -> float:
    """The largest output difference on a padded batch of two probe sequences (positions the mask
    hides are not compared); raises NotFusableError above ``tolerance``."""
    import onnxruntime as ort

    vocabulary = int(next(t.dims[0] for t in fused.graph.initializer if t.name == "word"))
    rng = np.random.default_rng(0)
    lengths = (7, 13)
    ids = np.zeros((2, max(lengths)), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(1000, min(vocabulary, 20000), size=length)
        mask[row, :length] = 1
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    outputs: list[Any] = []
    for model in (source, fused):
        try:
            session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            outputs.append(session.run(None, feeds)[0])
        except _ort_errors() as exc:
            raise NotFusableError(f"ONNX Runtime could not run the {model.graph.name} graph: {exc}") from exc
    difference = max(float(np.abs(outputs[0][row, :n] - outputs[1][row, :n]).max()) for row, n in enumerate(lengths))
    if not difference <= tolerance:
        raise NotFusableError(f"the rebuilt graph differs from the source by {difference:.2e}")
    return difference


def _ort_errors() -> tuple[type[Exception], ...]:
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    return (
        state.Fail,
        state.InvalidArgument,
        state.InvalidGraph,
        state.InvalidProtobuf,
        state.NotImplemented,
        state.RuntimeException,
    )


def attention_heads(model_dir: Path) -> int:
    """``num_attention_heads`` from the model folder's config.json (the graph does not state it)."""
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        return int(config["num_attention_heads"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NotFusableError(f"no num_attention_heads in {model_dir / 'config.json'}: {exc}") from exc

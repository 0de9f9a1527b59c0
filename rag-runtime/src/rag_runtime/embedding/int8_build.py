"""Builds int8 query copies (:mod:`.query_int8`) in a process of their own.

``python -m rag_runtime.embedding.int8_build SOURCE TARGET`` quantizes one ONNX file (the child
:func:`~rag_runtime.embedding.query_int8.int8_model_dir` starts) and prints the method it used
and, when the graph was not rebuilt on fused attention, why. ``--prebuild`` builds the configured
dense model's copy into LOCAL_MODELS_DIR (the retrieval image's build step). Only this module and
:mod:`.bert_fusion` import ``onnx``, and the services never import either.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rag_runtime.embedding.query_int8 import (
    FUSED_METHOD,
    METHOD_PREFIX,
    PLAIN_METHOD,
    QUANTIZED_OPS,
    UNFUSED_PREFIX,
    prebuild,
)


def quantize(source: Path, target: Path) -> str:
    """Write ``source`` with per-channel int8 weights on every MatMul/Gemm/Gather that reads a stored
    weight (activations stay float, quantized on the fly) to ``target``; a BERT encoder is first
    rebuilt on fused attention (:mod:`.bert_fusion`), whose projections are quantized too. Returns
    the method used."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from rag_runtime.embedding.bert_fusion import (
        NotFusableError,
        attention_heads,
        check_equivalent,
        fused_model,
    )

    model = onnx.load(str(source))
    method = FUSED_METHOD
    try:
        fused = fused_model(model, attention_heads(source.parent))
        check_equivalent(model, fused)
        model = fused
    except NotFusableError as exc:
        sys.stdout.write(f"{UNFUSED_PREFIX}{exc}\n")
        method = PLAIN_METHOD
    ops = (*QUANTIZED_OPS, "Attention")
    stored = {initializer.name for initializer in model.graph.initializer}
    nodes = [
        node.name for node in model.graph.node if node.op_type in ops and any(name in stored for name in node.input)
    ]
    quantize_dynamic(
        model,
        target,
        op_types_to_quantize=list(ops),
        weight_type=QuantType.QInt8,
        per_channel=True,
        nodes_to_quantize=nodes,
        # The contrib ops' outputs have no inferred type; every tensor here is float.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return method


def main(argv: list[str]) -> int:
    if argv == ["--prebuild"]:
        sys.stdout.write(f"int8 query model: {prebuild()}\n")
        return 0
    if len(argv) != 2:
        sys.stderr.write("usage: python -m rag_runtime.embedding.int8_build (SOURCE TARGET | --prebuild)\n")
        return 2
    method = quantize(Path(argv[0]), Path(argv[1]))
    sys.stdout.write(f"{METHOD_PREFIX}{method}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

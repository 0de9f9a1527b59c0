"""Builds int8 query copies (:mod:`.query_int8`) in a process of their own.

``python -m shared_contract.embedding.int8_build SOURCE TARGET`` quantizes one ONNX file (the child
:func:`~shared_contract.embedding.query_int8.int8_model_dir` starts); ``--prebuild`` builds the
configured dense model's copy into LOCAL_MODELS_DIR (the retrieval image's build step). Only this
module imports ``onnx``, and the services never import this module.
"""

from __future__ import annotations

import sys
from pathlib import Path

from shared_contract.embedding.query_int8 import QUANTIZED_OPS, prebuild


def quantize(source: Path, target: Path) -> None:
    """Write ``source`` with per-channel int8 weights on every MatMul/Gemm/Gather that reads a stored
    weight (activations stay float, quantized on the fly) to ``target``."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(source), load_external_data=False).graph
    stored = {initializer.name for initializer in graph.initializer}
    nodes = [
        node.name for node in graph.node if node.op_type in QUANTIZED_OPS and any(name in stored for name in node.input)
    ]
    quantize_dynamic(source, target, weight_type=QuantType.QInt8, per_channel=True, nodes_to_quantize=nodes)


def main(argv: list[str]) -> int:
    if argv == ["--prebuild"]:
        sys.stdout.write(f"int8 query model: {prebuild()}\n")
        return 0
    if len(argv) != 2:
        sys.stderr.write("usage: python -m shared_contract.embedding.int8_build (SOURCE TARGET | --prebuild)\n")
        return 2
    quantize(Path(argv[0]), Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

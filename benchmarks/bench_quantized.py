"""Quantized models as onnxruntime's quantization tools write them, against onnxruntime.

    python benchmarks/bench_quantized.py                       # 1 thread, thread time
    python benchmarks/bench_quantized.py --threads 2 --clock wall
    python benchmarks/bench_quantized.py --only qconv,resnet8

Cases:

- ``qconv``: single QLinearConv nodes (u8 activations, s8 per-channel weights, zero points 128
  and 0): 64->64 3x3 on 56x56, 128->128 3x3 stride 2 on 28x28, 256->256 1x1 on 14x14, and a
  depthwise 3x3 of 96 channels on 56x56 (and mobilenet_v2's stride-2 one on 112x112 and one of
  576 channels on 14x14); mobilenet_v2's first expansion (1x1 16->96 on 112x112, few input
  channels over a large map) and a projection (1x1 144->24 on 56x56).
- ``resnet8``, ``mobilenet_v2``: the zoo's ONNX twins, pre-processed
  (``quant_pre_process``: batch norms folded) and quantized by ``quantize_static`` (per-channel
  s8 weights, u8 activations, a random calibration reader) in both formats: QOperator
  (QLinearConv and onnxruntime's com.microsoft QLinear ops) and QDQ
  (DequantizeLinear -> Conv -> QuantizeLinear, which onnxruntime fuses into its int8 kernels).
- ``bert``: a 2-layer BERT encoder (hidden 256) quantized by ``quantize_dynamic``
  (DynamicQuantizeLinear + MatMulInteger for every linear layer), 1x128 tokens.

Every model is compiled with ``ember.compile(model, threads=, input_shapes=)`` and called as a
user does (numpy in, numpy out); onnxruntime runs the same file. All runners of one thread
count are timed interleaved (``_timing.interleave``); outputs are checked against onnxruntime
first (``diff``: the largest difference, in units of the quantized output or, for float
outputs, absolute). Columns: microseconds per call (median) and ember / onnxruntime. JSON goes
to bench_results/quantized.json in the cache directory.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _report import open_results, results_path, table  # noqa: E402
from _systems import Runner, call_runner, compare_options, ort_session  # noqa: E402
from _timing import interleave  # noqa: E402

DEFAULT_JSON = results_path("quantized.json")
QCONV_SHAPES = [  # (name, C, O, H, kernel, stride, groups)
    ("3x3 64->64 56x56", 64, 64, 56, 3, 1, 1),
    ("3x3/2 128->128 28x28", 128, 128, 28, 3, 2, 1),
    ("1x1 256->256 14x14", 256, 256, 14, 1, 1, 1),
    ("dw 3x3 96 56x56", 96, 96, 56, 3, 1, 96),
    ("dw 3x3/2 96 112x112", 96, 96, 112, 3, 2, 96),
    ("dw 3x3 576 14x14", 576, 576, 14, 3, 1, 576),
    ("1x1 16->96 112x112", 16, 96, 112, 1, 1, 1),
    ("1x1 144->24 56x56", 144, 24, 56, 1, 1, 1),
]


@dataclass
class Case:
    """One model and its feeds (by input name)."""

    name: str
    model: Any
    feeds: dict[str, np.ndarray]
    runners: list[Runner] = field(default_factory=list)


def qlinear_conv(c: int, o: int, h: int, k: int, stride: int, groups: int) -> Any:
    """One QLinearConv node, as quantize_static writes it (per-channel s8 weights)."""
    from onnx import TensorProto as TP
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(c + o + h)
    inits = {"xs": np.array(0.02, "float32"), "xz": np.array(128, "uint8"),
             "w": rng.integers(-127, 128, (o, c // groups, k, k)).astype("int8"),
             "ws": rng.uniform(0.001, 0.01, o).astype("float32"), "wz": np.zeros(o, "int8"),
             "ys": np.array(0.5, "float32"), "yz": np.array(128, "uint8"),
             "bias": rng.integers(-1000, 1000, o).astype("int32")}
    pad = k // 2
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"],
                            ["y"], pads=[pad] * 4, strides=[stride] * 2, group=groups)
    graph = helper.make_graph(
        [node], "qconv", [helper.make_tensor_value_info("x", TP.UINT8, [1, c, h, h])],
        [helper.make_tensor_value_info("y", TP.UINT8, None)],
        [numpy_helper.from_array(v, n) for n, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


class _Calibration:
    """quantize_static's calibration reader: a few random inputs."""

    def __init__(self, name: str, shape: list[int], count: int = 4) -> None:
        rng = np.random.default_rng(0)
        self._data = iter([{name: rng.standard_normal(shape).astype("float32")}
                           for _ in range(count)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._data, None)


def quantize_static_twin(name: str, fmt: str) -> tuple[Any, dict[str, np.ndarray]]:
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from ember.relay.testing.twins import onnx_twin

    reader_type = type("Reader", (_Calibration, CalibrationDataReader), {})
    model = onnx_twin(name)[0]
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    with tempfile.TemporaryDirectory() as tmp:
        src, pre, dst = (os.path.join(tmp, f) for f in ("m.onnx", "pre.onnx", "q.onnx"))
        onnx.save(model, src)
        quant_pre_process(src, pre, skip_symbolic_shape=True)
        quantize_static(pre, dst, reader_type(inp.name, shape),
                        quant_format=getattr(QuantFormat, fmt), per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        quantized = onnx.load(dst)
    x = np.random.default_rng(1).standard_normal(shape).astype("float32")
    return quantized, {inp.name: x}


def quantize_dynamic_bert() -> tuple[Any, dict[str, np.ndarray]]:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from ember.relay.testing import exported_transformers as tx

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "q.onnx")
        onnx.save(tx.bert(), src)
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
        quantized = onnx.load(dst)
    return quantized, tx.token_feeds(1, 128, seed=1)


def _cases(only: set[str]) -> list[Case]:
    cases = []
    if not only or "qconv" in only:
        rng = np.random.default_rng(2)
        for name, c, o, h, k, s, g in QCONV_SHAPES:
            x = rng.integers(0, 256, (1, c, h, h)).astype("uint8")
            cases.append(Case(f"QLinearConv {name}", qlinear_conv(c, o, h, k, s, g), {"x": x}))
    for twin in ("resnet8", "mobilenet_v2"):
        if not only or twin in only:
            for fmt in ("QOperator", "QDQ"):
                cases.append(Case(f"{twin} {fmt}", *quantize_static_twin(twin, fmt)))
    if not only or "bert" in only:
        cases.append(Case("bert quantize_dynamic 1x128", *quantize_dynamic_bert()))
    return cases


def _diff(case: Case) -> float:
    got, want = case.runners[0].outputs(), case.runners[1].outputs()
    return max(float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max(initial=0))
               for g, w in zip(got, want))


def main() -> None:
    opts = compare_options(__doc__.split("\n")[0], "qconv,resnet8,mobilenet_v2,bert",
                           DEFAULT_JSON)
    import ember

    clock, only = opts.clock, opts.only
    rows: list[list[Any]] = []
    cases = _cases(only)
    for threads in opts.threads:
        for case in cases:
            shapes = {k: v.shape for k, v in case.feeds.items()}
            model = ember.compile(case.model, threads=threads, input_shapes=shapes)
            session = ort_session(case.model, threads)
            args, feeds = list(case.feeds.values()), case.feeds
            case.runners = [call_runner("ember", threads, lambda m=model, a=args: m(*a)),
                            call_runner("onnxruntime", threads,
                                        lambda s=session, f=feeds: s.run(None, f))]
        timings = interleave([r for c in cases for r in c.runners], opts.min_time, opts.rounds,
                             clock)
        for i, case in enumerate(cases):
            ours, theirs = (t.median * 1e6 for t in timings[2 * i:2 * i + 2])
            rows.append([case.name, threads, ours, theirs, ours / theirs, _diff(case)])
    heads = ["model", "thr", "ember", "ort", "ember/ort", "diff"]
    print(f"quantized models, ember {ember.__version__}, clock {opts.clock_name}, {opts.rounds} "
          "rounds interleaved (microseconds per call)")
    print(table(rows, heads))
    with open_results(opts.json) as f:
        json.dump([dict(zip(heads, r)) for r in rows], f, indent=1)


if __name__ == "__main__":
    main()

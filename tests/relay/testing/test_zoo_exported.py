"""The zoo models written as exporters write them (``exported.py``): MobileNetV3 small and
large, EfficientNet-B0 and -lite0, the DBNet text detector, YOLOv8n, ViT-tiny and a GPT-2-style
decoder. Each ONNX twin spells its activations out (Clip/Div, Sigmoid/Mul, Erf, Tanh/Pow,
ReduceMean layer norms) and folds batch norms into conv biases; ember imports the twin,
recognises the spelled-out forms (no clip, erf, tanh or layer-norm arithmetic is left after
``relay.optimize``) and matches onnxruntime. Small configurations by default, full size with
``-m slow``. Tolerance: rtol 1e-4 and atol 1e-5 times the output's scale (at least 1).
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import ember
from ember import relay
from ember.ir.visitor import post_order
from ember.relay.testing import dbnet, efficientnet, gpt2, mobilenet_v3, onnx_twin, vit, yolov8
from ember.testing import find_c_compiler

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
IMG32 = {"image_shape": (3, 32, 32), "num_classes": 10}
# id -> (zoo name, small kwargs, full kwargs, ops allowed after optimize besides the usual)
CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any], set[str]]] = {
    "mobilenet_v3_large": ("mobilenet_v3", {"alpha": 0.5, **IMG32}, {}, set()),
    "mobilenet_v3_small": ("mobilenet_v3", {"mode": "small", "alpha": 0.5, **IMG32},
                           {"mode": "small"}, set()),
    "ocr_cls": ("mobilenet_v3", {"mode": "small", "alpha": 0.35, "image_shape": (3, 48, 96),
                                 "num_classes": 2},
                {"mode": "small", "alpha": 0.35, "image_shape": (3, 48, 192),
                 "num_classes": 2}, set()),
    # the squeeze convs of 4, 6, 10, 20, 28 channels stay NCHW: SiLU fused with them by FuseOps
    "efficientnet_b0": ("efficientnet", {"alpha": 0.5, **IMG32}, {}, {"nn.silu"}),
    "efficientnet_lite0": ("efficientnet", {"variant": "lite0", "alpha": 0.5, **IMG32},
                           {"variant": "lite0"}, set()),
    # the head's last transposed conv (one channel) and its sigmoid
    "dbnet": ("dbnet", {"image_shape": (3, 64, 64), "alpha": 0.35}, {}, {"sigmoid"}),
    # the box decoding and the class scores' sigmoid
    "yolov8n": ("yolov8", {"image_shape": (3, 64, 64), "num_classes": 8, "width": 0.125},
                {}, {"sigmoid", "divide"}),
    "vit_tiny": ("vit", {"image_size": 32, "patch": 8, "dim": 48, "depth": 2,
                         "num_classes": 10}, {}, set()),
    "gpt2": ("gpt2", {"seq_len": 16, "hidden": 32, "num_heads": 2, "num_layers": 2,
                      "vocab_size": 64}, {}, set()),
}
# what exporters spell out: none of it may be left after relay.optimize
SPELLED = {"clip", "erf", "tanh", "power", "mean", "sqrt", "exp", "maximum", "minimum",
           "sigmoid", "divide", "nn.hardswish", "nn.hardsigmoid", "nn.silu", "nn.gelu"}
SLOW = ("mobilenet_v3_large", "ocr_cls", "efficientnet_b0")  # their family runs by default
PARAMS = [pytest.param(k, CASES[k], id=k) for k in CASES]
COMPILED = [pytest.param(k, CASES[k], id=k, marks=pytest.mark.slow if k in SLOW else ())
            for k in CASES]
FULL = [pytest.param(k, CASES[k], id=f"{k}-full", marks=pytest.mark.slow) for k in CASES]


def _input(model: Any, seed: int = 0) -> tuple[str, np.ndarray]:
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    rng = np.random.default_rng(seed)
    if inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
        return inp.name, rng.uniform(-1, 1, shape).astype("float32")
    return inp.name, rng.integers(0, 16, shape).astype("int32")  # token ids


def _onnxruntime(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _ember(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    from ember.contrib import graph_executor

    mod, params = relay.frontend.from_onnx(model)
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input(**feeds)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


def _check_against_onnxruntime(name: str, kwargs: dict[str, Any]) -> None:
    model, _, _ = onnx_twin(name, **kwargs)
    onnx.checker.check_model(model)
    key, x = _input(model)
    want, got = _onnxruntime(model, {key: x}), _ember(model, {key: x})
    assert len(got) == len(want)
    for g, w in zip(got, want):
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * scale)


@needs_cc
@pytest.mark.parametrize("case,spec", COMPILED)
def test_twin_imports_and_matches_onnxruntime(case, spec):
    _check_against_onnxruntime(spec[0], spec[1])


@needs_cc
@pytest.mark.parametrize("case,spec", FULL)
def test_full_size_twin_matches_onnxruntime(case, spec):
    _check_against_onnxruntime(spec[0], spec[2])


@pytest.mark.parametrize("case,spec", PARAMS)
def test_nothing_spelled_out_is_left_after_optimize(case, spec):
    name, kwargs, _, allowed = spec
    model, _, _ = onnx_twin(name, **kwargs)
    mod, params = relay.frontend.from_onnx(model)
    with ember.transform.PassContext(opt_level=3):
        opt, _ = relay.optimize(mod, "llvm", params=params)
    ops = Counter(n.op.name for f in opt.functions.values() for n in post_order(f)
                  if isinstance(n, relay.Call) and isinstance(n.op, ember.ir.Op))
    left = {op: n for op, n in ops.items() if op in SPELLED - allowed}
    assert not left, f"{case}: spelled-out ops left after optimize: {left}"


def _node_types(model: Any) -> Counter:
    return Counter(n.op_type for n in model.graph.node)


def test_twins_are_written_as_exporters_write_them():
    types = _node_types(onnx_twin("mobilenet_v3", **CASES["mobilenet_v3_small"][1])[0])
    assert types["Clip"] and types["Div"] and not types["HardSwish"] + types["HardSigmoid"]
    assert not types["BatchNormalization"] + types["Reshape"]  # bias folded into each Conv
    model = onnx_twin("efficientnet", **CASES["efficientnet_b0"][1])[0]
    assert all(len(n.input) == 3 for n in model.graph.node if n.op_type == "Conv")
    types = _node_types(model)
    assert types["Sigmoid"] == types["Mul"] > 0  # x * sigmoid(x), and SE's x * sigmoid(s)
    types = _node_types(onnx_twin("vit", **CASES["vit_tiny"][1])[0])
    assert types["Erf"] and types["ReduceMean"] and types["Pow"] and types["Sqrt"]
    types = _node_types(onnx_twin("gpt2", **CASES["gpt2"][1])[0])
    assert types["Tanh"] and types["Where"] and not types["LayerNormalization"]
    types = _node_types(onnx_twin("yolov8", **CASES["yolov8n"][1])[0])
    assert types["Split"] and types["Resize"] and types["MaxPool"] == 3 and types["Softmax"]
    types = _node_types(onnx_twin("dbnet", **CASES["dbnet"][1])[0])
    assert types["ConvTranspose"] == 2 and types["Resize"] == 6


@pytest.mark.parametrize("make,match", [
    (lambda: mobilenet_v3.get_workload(mode="tiny"), "mode must be one of large, small"),
    (lambda: mobilenet_v3.get_workload(image_shape=(3, 16, 16)), "H, W >= 32"),
    (lambda: efficientnet.get_workload(variant="b7"), "variant must be one of b0, lite0"),
    (lambda: efficientnet.get_workload(alpha=0), "alpha must be positive"),
    (lambda: dbnet.get_workload(image_shape=(3, 100, 100)), "multiples of 32"),
    (lambda: yolov8.get_workload(image_shape=(3, 640, 600)), "multiples of 32"),
    (lambda: yolov8.get_workload(width=0), "must be positive"),
    (lambda: vit.get_workload(image_size=30), "multiple of patch"),
    (lambda: vit.get_workload(dim=100, heads=3), "dim \\(100\\) of heads \\(3\\)"),
    (lambda: gpt2.get_workload(hidden=100, num_heads=3), "multiple of num_heads"),
    (lambda: gpt2.get_workload(vocab_size=0), "must be positive"),
])
def test_bad_configurations_are_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()

"""A PaddleOCR-style text detector as paddle2onnx writes it (opset 11), with symbolic batch,
height and width (``p2o.DynamicDimension.*``): BatchNormalization kept, hardswish as
x * HardSigmoid(x, 1/6, 0.5), squeeze-excite blocks with HardSigmoid(0.2, 0.5), an FPN whose
top-down path and head upsample with Resize-11 (nearest, asymmetric, floor; roi '', constant
scales 2x) into a Concat, and a head of two ConvTransposes (the last, to one channel, on the
few-output-channel kernel that writes the interleaved output itself, at run-time sizes).

Compiled with no shapes (the VM), the constant-scale Resizes stay ``image.resize2d`` (size 0:
scaled at run time), not ``dyn.image.resize2d``, so they fuse into the Concat as in the static
build; one build runs at several shapes (heights and widths that are multiples of the
network's stride 16 only, so the FPN's sums line up, but no multiple of a vector width, and
a batch of 2) and matches onnxruntime (float32 rtol/atol 1e-4: conv sums)."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import SUMS, compare, run_ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember import relay
from ember.contrib import cc
from ember.relay.transform.dynamic_to_static import dynamic_ops


def paddle_detector(seed: int = 0, ch: tuple[int, ...] = (8, 16, 24, 32), head: int = 32):
    """x (N, 3, H, W) -> maps (N, 1, 2H, 2W); H and W multiples of 16 (the deepest stride)."""
    rng = np.random.default_rng(seed)
    inits: dict[str, np.ndarray] = {}
    nodes = []
    count = [0]

    def name(prefix):
        count[0] += 1
        return f"{prefix}_{count[0]}"

    def node(op, ins, **attrs):
        out = name(op.lower())
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def const(v):
        k = name("c")
        inits[k] = np.asarray(v)
        return k

    def vec(c, scale, base=0.0):
        return const((base + scale * rng.standard_normal(c)).astype("float32"))

    def conv(x, ci, co, k=3, s=1, g=1, act=None, bn=True):
        fan = ci // g * k * k
        w = const((rng.standard_normal((co, ci // g, k, k)) * np.sqrt(2 / fan)).astype("float32"))
        y = node("Conv", [x, w], kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4,
                 group=g, dilations=[1, 1])
        if bn:
            var = const((1 + 0.1 * rng.random(co)).astype("float32"))
            y = node("BatchNormalization", [y, vec(co, 0.1, 1.0), vec(co, 0.1), vec(co, 0.1),
                                            var], epsilon=1e-5, momentum=0.9)
        if act == "relu":
            y = node("Relu", [y])
        if act == "hswish":
            y = node("Mul", [y, node("HardSigmoid", [y], alpha=1 / 6, beta=0.5)])
        return y

    def se(x, c):
        r = max(c // 4, 8)
        w1 = const((rng.standard_normal((r, c, 1, 1)) * 0.1).astype("float32"))
        w2 = const((rng.standard_normal((c, r, 1, 1)) * 0.1).astype("float32"))
        y = node("Relu", [node("Conv", [node("GlobalAveragePool", [x]), w1, vec(r, 0.1)],
                               kernel_shape=[1, 1])])
        y = node("HardSigmoid", [node("Conv", [y, w2, vec(c, 0.1)], kernel_shape=[1, 1])],
                 alpha=0.2, beta=0.5)
        return node("Mul", [x, y])

    def block(x, ci, co, exp, s, act, use_se):
        y = conv(x, ci, exp, 1, act=act)
        y = conv(y, exp, exp, 3, s, g=exp, act=act)
        if use_se:
            y = se(y, exp)
        y = conv(y, exp, co, 1)
        return node("Add", [x, y]) if s == 1 and ci == co else y

    def up(x):
        return node("Resize", [x, empty, two], mode="nearest",
                    coordinate_transformation_mode="asymmetric", nearest_mode="floor")

    x, c, feats = conv("x", 3, 16, 3, 2, act="hswish"), 16, []
    for i, co in enumerate(ch):
        act = "hswish" if i > 1 else "relu"
        x = block(x, c, co, c * 2, 2 if i > 0 else 1, act, i > 1)
        c = co
        x = block(x, c, c, c * 2, 1, act, i > 1)
        feats.append(x)
    lat = [conv(f, cf, head, 1, bn=False) for f, cf in zip(feats, ch)]
    empty = const(np.zeros(0, "float32"))
    two = const(np.array([1, 1, 2, 2], "float32"))
    top, outs = lat[-1], [lat[-1]]
    for lateral in reversed(lat[:-1]):
        top = node("Add", [lateral, up(top)])
        outs.append(top)
    maps = []
    for i, o in enumerate(outs[::-1]):
        y = conv(o, head, head // 4, 3, bn=False)
        for _ in range(i):
            y = up(y)
        maps.append(y)
    y = conv(node("Concat", maps, axis=1), head, head // 4, 3, act="relu")
    q = head // 4
    w = const((rng.standard_normal((q, q, 2, 2)) * 0.3).astype("float32"))
    y = node("ConvTranspose", [y, w], kernel_shape=[2, 2], strides=[2, 2])
    y = node("Relu", [node("BatchNormalization", [y, vec(q, 0.1, 1.0), vec(q, 0.1),
                                                  vec(q, 0.1), const(np.ones(q, "float32"))])])
    w = const((rng.standard_normal((q, 1, 2, 2)) * 0.3).astype("float32"))
    y = node("Sigmoid", [node("ConvTranspose", [y, w], kernel_shape=[2, 2], strides=[2, 2])])
    nodes[-1].output[0] = "maps"
    dims = ["p2o.DynamicDimension.0", 3, "p2o.DynamicDimension.1", "p2o.DynamicDimension.2"]
    graph = helper.make_graph(nodes, "det", [helper.make_tensor_value_info("x", TP.FLOAT, dims)],
                              [helper.make_tensor_value_info("maps", TP.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    return model


def _source(compiled) -> str:
    lib = compiled.factory.lib
    return "".join(m.get_source() for m in [lib, *lib.imported_modules])


def test_paddle_detector_resizes_are_static_ops_of_run_time_size():
    mod, _ = relay.frontend.from_onnx(paddle_detector())
    assert dynamic_ops(mod) == [], dynamic_ops(mod)
    assert "image.resize2d" in mod.astext()


def test_paddle_detector_without_shapes_matches_onnxruntime_at_several_shapes():
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    model = paddle_detector()
    dynamic = ember.compile(model, threads=1)
    assert dynamic.executor == "vm"
    # the last ConvTranspose as the static build runs it (the few-output-channel kernel
    # writing the interleaved output, where the SIMD level's blocks allow it)
    static = ember.compile(model, threads=1, input_shapes={"x": (1, 3, 48, 80)})
    assert ("transpose_fewoc" in _source(dynamic)) == ("transpose_fewoc" in _source(static))
    rng = np.random.default_rng(1)
    # alternating shapes: each run after another shape reuses (and grows) the plan's memory
    for shape in ((1, 3, 48, 80), (2, 3, 32, 112), (1, 3, 80, 16), (1, 3, 48, 80)):
        x = rng.random(shape, dtype=np.float32)
        got = dynamic(x)
        assert got.shape == (shape[0], 1, 2 * shape[2], 2 * shape[3])
        compare(f"paddle detector {shape}", [got], run_ort(model, {"x": x}), SUMS)

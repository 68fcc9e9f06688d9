"""A LLaMA-style decoder block as torch.onnx.export writes it with a dynamic sequence: RMSNorm
decomposed (Pow, ReduceMean, Sqrt, Reciprocal), rotary embeddings whose cos/sin tables are
sliced to the sequence length read from ``Shape(x)`` (``Slice(table, 0, Gather(Shape(x), 1))``,
which imports as ``dyn.strided_slice``), a causal mask sliced the same way, SwiGLU.

The shape-derived ends (Shape -> Gather -> the slice's end) must be computed by the VM plan's
shape phase, from the arguments' shapes: the fused ``shape_of`` becomes ``vm.shape_of``
(memory_alloc.py), so no kernel reads the data to get a size and the whole block is one
native call, whatever the sequence length. Checked against onnxruntime and against the
static build of the same weights at sequence lengths 1, 5 (not a multiple of any vector width)
and the table's full length."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from _onnx_util import SUMS, compare, run_ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember.api.model import ModelInputError
from ember.runtime.vm import static_plan
from ember.runtime.vm.plan_native import DynamicCall

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "runtime", "vm"))
from _vm_testlib import requires_cc  # noqa: E402
from test_plan_native import context_of, python_calls  # noqa: E402

pytestmark = requires_cc

D, HEADS, FFN, MAXLEN = 16, 2, 24, 12
HD = D // HEADS


class _Graph:
    """Nodes and initializers of one model, named as the exporter names them."""

    def __init__(self) -> None:
        self.nodes: list = []
        self.inits: list = []
        self.rng = np.random.default_rng(0)

    def const(self, name: str, value) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, ins: list[str], out: str | None = None, **attrs) -> str:
        out = out or f"{op.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, ins, [out], name=f"/{op}_{len(self.nodes)}",
                                           **attrs))
        return out

    def weight(self, name: str, rows: int, cols: int) -> str:
        w = self.rng.standard_normal((rows, cols)) / np.sqrt(rows)
        return self.const(name, w.astype("float32"))


def _rms(g: _Graph, x: str, tag: str) -> str:
    p = g.node("Pow", [x, g.const(f"two_{tag}", np.float32(2))])
    m = g.node("ReduceMean", [p], axes=[-1], keepdims=1)
    r = g.node("Reciprocal", [g.node("Sqrt", [g.node("Add", [m, g.const(f"eps_{tag}",
                                                                        np.float32(1e-6))])])])
    gain = g.const(f"g_{tag}", g.rng.uniform(0.5, 1.5, D).astype("float32"))
    return g.node("Mul", [gain, g.node("Mul", [x, r])])


def _heads(g: _Graph, x: str) -> str:
    r = g.node("Reshape", [x, g.const(f"shape_{len(g.nodes)}", np.array([1, -1, HEADS, HD]))])
    return g.node("Transpose", [r], perm=[0, 2, 1, 3])


def _rotary(g: _Graph, x: str, cos: str, sin: str) -> str:
    k = len(g.nodes)
    three = g.const(f"axis3_{k}", np.array([3]))
    x1 = g.node("Slice", [x, g.const(f"b0_{k}", np.array([0])),
                          g.const(f"e0_{k}", np.array([HD // 2])), three])
    x2 = g.node("Slice", [x, g.const(f"b1_{k}", np.array([HD // 2])),
                          g.const(f"e1_{k}", np.array([HD])), three])
    rotated = g.node("Concat", [g.node("Neg", [x2]), x1], axis=3)
    return g.node("Add", [g.node("Mul", [x, cos]), g.node("Mul", [rotated, sin])])


def llama_block(seq: int | None):
    """x (1, seq, D) -> (1, seq, D); ``seq`` None: a symbolic sequence, the rotary tables and
    the mask sliced to it from Shape(x); else static, the tables of exactly ``seq`` rows. The
    weights are the same either way."""
    g = _Graph()
    rows = MAXLEN if seq is None else seq
    pos = np.arange(rows)[:, None] / (10000 ** (np.arange(0, HD, 2) / HD))[None]
    emb = np.concatenate([pos, pos], -1)[None, None]
    cos = g.const("cos", np.cos(emb).astype("float32"))
    sin = g.const("sin", np.sin(emb).astype("float32"))
    mask = g.const("mask", np.triu(np.full((rows, rows), -np.inf, "float32"), 1)[None, None])
    weights = {name: g.weight(f"W_{name}", D, D) for name in "qkvo"}
    w_gate, w_up, w_down = g.weight("W_g", D, FFN), g.weight("W_u", D, FFN), \
        g.weight("W_d", FFN, D)
    if seq is None:  # torch slices its registered buffers to the length read from Shape
        length = g.node("Gather", [g.node("Shape", ["x"]), g.const("one", np.array([1]))],
                        axis=0)
        zero, two = g.const("zero", np.array([0])), g.const("two", np.array([2]))
        cos = g.node("Slice", [cos, zero, length, two])
        sin = g.node("Slice", [sin, zero, length, two])
        mask = g.node("Slice", [g.node("Slice", [mask, zero, length, two]), zero, length,
                                g.const("three", np.array([3]))])
    h = _rms(g, "x", "attn")
    q, k, v = (_heads(g, g.node("MatMul", [h, weights[n]])) for n in "qkv")
    q, k = _rotary(g, q, cos, sin), _rotary(g, k, cos, sin)
    scores = g.node("Div", [g.node("MatMul", [q, g.node("Transpose", [k], perm=[0, 1, 3, 2])]),
                            g.const("scale", np.float32(np.sqrt(HD)))])
    att = g.node("Softmax", [g.node("Add", [scores, mask])], axis=-1)
    o = g.node("Reshape", [g.node("Transpose", [g.node("MatMul", [att, v])], perm=[0, 2, 1, 3]),
                           g.const("merge", np.array([1, -1, D]))])
    x2 = g.node("Add", ["x", g.node("MatMul", [o, weights["o"]])])
    h2 = _rms(g, x2, "ffn")
    gate = g.node("MatMul", [h2, w_gate])
    silu = g.node("Mul", [gate, g.node("Sigmoid", [gate])])
    up = g.node("Mul", [silu, g.node("MatMul", [h2, w_up])])
    g.node("Add", [x2, g.node("MatMul", [up, w_down])], "y")
    dim = "sequence" if seq is None else seq
    graph = helper.make_graph(g.nodes, "llama_block",
                              [helper.make_tensor_value_info("x", TP.FLOAT, [1, dim, D])],
                              [helper.make_tensor_value_info("y", TP.FLOAT, [1, dim, D])],
                              g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 10)
    return model


@pytest.fixture(scope="module")
def dynamic():
    model = llama_block(None)
    return model, ember.compile(model, threads=1)


def _x(seq: int) -> np.ndarray:
    return np.random.default_rng(seq).standard_normal((1, seq, D)).astype("float32")


def test_dynamic_block_matches_onnxruntime_at_every_length(dynamic) -> None:
    model, compiled = dynamic
    for seq in (5, 1, MAXLEN, 7):
        x = _x(seq)
        compare(f"llama block seq={seq}", [compiled(x)], run_ort(model, {"x": x}), SUMS)


def test_dynamic_block_matches_the_static_build_of_the_same_weights(dynamic) -> None:
    _, compiled = dynamic
    static = ember.compile(llama_block(5), threads=1)
    x = _x(5)
    compare("llama block dynamic vs static", [compiled(x)], [static(x)], SUMS)


def test_the_block_is_one_native_call_at_new_lengths(dynamic, monkeypatch) -> None:
    _, compiled = dynamic
    compiled(_x(MAXLEN))
    compiled(_x(MAXLEN))  # buffers at their largest, the native call made
    ctx = context_of(compiled)
    assert isinstance(ctx.native, DynamicCall)
    plan = ctx.native.plan
    assert isinstance(plan, static_plan.StaticPlan)
    # one run of kernels: no check waits for a value a kernel computes (a size read from data)
    assert plan._run_calls is not None and len(plan._segments) == 1, len(plan._segments)
    python = python_calls(compiled, monkeypatch)
    for seq in (3, 1, 11, 3):  # 3 and 11: never seen before this loop
        compiled(_x(seq))
    assert python == []


def test_a_sequence_longer_than_the_tables_is_rejected_by_name(dynamic) -> None:
    # The tables have MAXLEN rows: slicing them to a longer sequence gives MAXLEN rows, which
    # cannot broadcast against the sequence; the error names the input and the operator,
    # never a crash.
    _, compiled = dynamic
    with pytest.raises(ModelInputError, match=r"'x' float32\[1, 15, 16\].*multiply"):
        compiled(_x(MAXLEN + 3))


def test_expand_and_range_to_sizes_read_from_shape_are_one_native_call(monkeypatch) -> None:
    # y = x + Expand(bias, Shape(x)) + Range(0, Shape(x)[1]): the broadcast and the range
    # whose sizes come from Shape (the other two forms of the brief, next to the slice above)
    # stay one native call at every length
    g = _Graph()
    shape = g.node("Shape", ["x"])
    bias = g.node("Expand", [g.const("bias", np.arange(3, dtype="float32").reshape(3, 1)),
                             shape])
    length = g.node("Squeeze", [g.node("Gather", [shape, g.const("one", np.array([1]))],
                                       axis=0)])
    ramp = g.node("Cast", [g.node("Range", [g.const("zero", np.array(0)), length,
                                            g.const("step", np.array(1))])], to=TP.FLOAT)
    g.node("Add", [g.node("Add", ["x", bias]), ramp], "y")
    graph = helper.make_graph(g.nodes, "expand_range",
                              [helper.make_tensor_value_info("x", TP.FLOAT, [3, "n"])],
                              [helper.make_tensor_value_info("y", TP.FLOAT, [3, "n"])],
                              g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 10)
    compiled = ember.compile(model, threads=1)
    big = np.random.default_rng(0).standard_normal((3, 40)).astype("float32")
    compiled(big)
    compiled(big)
    ctx = context_of(compiled)
    assert isinstance(ctx.native, DynamicCall) and len(ctx.native.plan._segments) == 1
    python = python_calls(compiled, monkeypatch)
    for n in (1, 7, 33, 8):
        x = big[:, :n].copy()
        compare(f"expand/range n={n}", [compiled(x)], run_ort(model, {"x": x}), SUMS)
    assert python == []

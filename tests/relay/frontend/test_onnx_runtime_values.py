"""Shapes, axes and counts given at run time (graph inputs, as the ONNX backend node tests
give them): each imports as the op's dynamic form and matches onnxruntime on the VM at several
values from ONE executable (float32 rtol/atol 1e-5, sums 1e-4; integers exactly). Bad values
fail at run time naming the node."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import SUMS, compare, flatten, run_ort
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember import relay
from ember.contrib import cc
from ember.relay.transform.dynamic_to_static import dynamic_ops
from ember.runtime.errors import OpNotImplemented

RNG = np.random.default_rng(0)
I64 = TP.INT64


def _f32(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _i64(v):
    return np.array(v, "int64")


def model(nodes, inputs, outputs=("y",), inits=(), opset=18):
    """``inputs``: name -> (elem type, shape) (a str dim is symbolic)."""
    outs = []
    for o in outputs:
        vi = onnx.ValueInfoProto()
        vi.name = o
        outs.append(vi)
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        outs, [numpy_helper.from_array(v, k) for k, v in dict(inits).items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = min(m.ir_version, 10)
    return m


class Session:
    """One VM executable of ``m`` (imported with no shapes); ``run(feeds)`` compares with
    onnxruntime."""

    def __init__(self, m, dyn=True, **kwargs):
        if cc.get_cc() is None:
            pytest.skip("no C compiler found")
        self.model = m
        mod, params = relay.frontend.from_onnx(m, **kwargs)
        self.mod = mod
        if dyn:
            assert dynamic_ops(mod), "expected a dyn op in the imported module"
        self.names = [p.name_hint for p in mod["main"].params]
        exe = relay.vm.compile(mod, "llvm", params=params)
        self.vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu())

    def outputs(self, feeds):
        return flatten(self.vm.invoke("main", *[feeds[n] for n in self.names]))

    def check(self, feeds, tol=None, label=""):
        compare(label or str({k: v.tolist() for k, v in feeds.items() if v.dtype.kind in "iu"}),
                self.outputs(feeds), run_ort(self.model, feeds), tol)


def _n(op, ins, outs=("y",), **attrs):
    return helper.make_node(op, list(ins), list(outs), name=f"{op.lower()}_node", **attrs)


# ---------------------------------------------------------------- one op per test
def test_reshape_to_a_run_time_shape():
    s = Session(model([_n("Reshape", ["x", "s"])], {"x": (TP.FLOAT, [4, 6]), "s": (I64, [3])}))
    x = _f32(4, 6)
    for shape in ([0, 3, -1], [2, 2, 6], [-1, 1, 1]):
        s.check({"x": x, "s": _i64(shape)})
    with pytest.raises(ember.TVMError, match=r"Reshape node 'reshape_node'.*as many elements"):
        s.outputs({"x": x, "s": _i64([5, 5, 1])})


def test_expand_bidirectionally_to_a_run_time_shape():
    s = Session(model([_n("Expand", ["x", "s"])], {"x": (TP.FLOAT, [3, 1]),
                                                   "s": (I64, [3])}))
    x = _f32(3, 1)
    for shape in ([2, 1, 4], [1, 3, 1], [2, 3, 0]):
        s.check({"x": x, "s": _i64(shape)})
    with pytest.raises(ember.TVMError, match="Expand node 'expand_node'.*cannot broadcast"):
        s.outputs({"x": x, "s": _i64([1, 2, 4])})


def test_slice_with_run_time_starts_ends_axes_steps():
    s = Session(model([_n("Slice", ["x", "b", "e", "a", "st"])],
                      {"x": (TP.FLOAT, [5, 6, 7]), **{k: (I64, [2]) for k in "bea"},
                       "st": (I64, [2])}))
    x = _f32(5, 6, 7)
    for b, e, a, st in [([1, 0], [4, 7], [0, 2], [1, 2]), ([-1, 5], [-100, 0], [1, -1], [-2, -1]),
                        ([0, -3], [2 ** 62, 2 ** 62], [-3, 1], [3, 1]),
                        ([-10, 9], [3, -20], [2, 0], [-1, -3])]:
        s.check({"x": x, "b": _i64(b), "e": _i64(e), "a": _i64(a), "st": _i64(st)})


def test_slice_bounds_computed_from_a_symbolic_shape():
    # GPT-2's causal mask: bias[:, :, k - q : k, :k] with k, q sequence lengths at run time
    nodes = [_n("Shape", ["q"], ["qs"]), _n("Shape", ["k"], ["ks"]),
             _n("Gather", ["qs", "one"], ["ql"], axis=0), _n("Gather", ["ks", "one"], ["kl"],
                                                            axis=0),
             _n("Sub", ["kl", "ql"], ["start"]),
             _n("Slice", ["bias", "start", "kl", "two"], ["rows"]),
             _n("Slice", ["rows", "zero", "kl", "three"], ["y"])]
    bias = np.tril(np.ones((16, 16), "float32"))[None, None]
    m = model([helper.make_node(n.op_type, n.input, n.output, name=f"n{i}",
                                **{a.name: helper.get_attribute_value(a) for a in n.attribute})
               for i, n in enumerate(nodes)],
              {"q": (TP.FLOAT, [1, "q"]), "k": (TP.FLOAT, [1, "k"])},
              inits={"bias": bias, "one": _i64([1]), "two": _i64([2]), "three": _i64([3]),
                     "zero": _i64([0])})
    s = Session(m)
    for q, k in ((3, 5), (1, 9), (4, 4)):
        s.check({"q": _f32(1, q), "k": _f32(1, k)})


def test_tile_by_run_time_repeats():
    s = Session(model([_n("Tile", ["x", "r"])], {"x": (TP.FLOAT, [2, 3]), "r": (I64, [2])}))
    x = _f32(2, 3)
    for r in ([1, 1], [3, 2], [0, 2]):
        s.check({"x": x, "r": _i64(r)})


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_by_run_time_pads_and_axes(mode):
    s = Session(model([_n("Pad", ["x", "p", "v", "a"], mode=mode)],
                      {"x": (TP.FLOAT, [3, 4, 5]), "p": (I64, [4]), "v": (TP.FLOAT, []),
                       "a": (I64, [2])}))
    x = _f32(3, 4, 5)
    for pads, axes in (([1, 0, 2, 3], [0, 2]), ([0, 2, 1, 0], [-1, 1]), ([2, 1, 0, 1], [1, 2])):
        s.check({"x": x, "p": _i64(pads), "v": np.array(0.25, "float32"), "a": _i64(axes)})


def test_pad_with_negative_run_time_pads_crops():
    s = Session(model([_n("Pad", ["x", "p"])], {"x": (TP.FLOAT, [4, 5]), "p": (I64, [4])}))
    s.check({"x": _f32(4, 5), "p": _i64([-1, 2, 1, -3])})


@pytest.mark.parametrize("op,keepdims", [  # one build each: two in the default run
    ("ReduceSum", 0), ("ReduceLogSumExp", 1),
    *(pytest.param(op, k, marks=pytest.mark.slow)
      for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                 "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare")
      for k in (0, 1) if (op, k) not in (("ReduceSum", 0), ("ReduceLogSumExp", 1)))])
def test_opset18_reductions_over_run_time_axes(op, keepdims):
    s = Session(model([_n(op, ["x", "a"], keepdims=keepdims)],
                      {"x": (TP.FLOAT, [3, 4, 5]), "a": (I64, [2])}))
    x = RNG.uniform(0.5, 1.5, (3, 4, 5)).astype("float32")
    for axes in ([0, 2], [-1, 1], [1, 0]):
        s.check({"x": x, "a": _i64(axes)}, SUMS)


def test_topk_with_a_run_time_k():
    s = Session(model([_n("TopK", ["x", "k"], ["v", "i"], axis=1)],
                      {"x": (TP.FLOAT, [3, 6]), "k": (I64, [1])}, outputs=("v", "i")))
    x = _f32(3, 6)
    for k in (1, 4, 6):
        s.check({"x": x, "k": _i64([k])})
    with pytest.raises(ember.TVMError, match="TopK node 'topk_node'.*k is larger"):
        s.outputs({"x": x, "k": _i64([7])})


def test_one_hot_with_a_run_time_depth():
    s = Session(model([_n("OneHot", ["i", "d", "vals"], axis=0)],
                      {"i": (I64, [4]), "d": (I64, []), "vals": (TP.FLOAT, [2])}))
    for depth in (3, 6):
        s.check({"i": _i64([0, 2, -1, 5]), "d": _i64(depth), "vals": np.array([-1, 4],
                                                                               "float32")})


def test_constant_of_shape_with_a_run_time_shape():
    value = numpy_helper.from_array(np.array([3], "int32"))
    s = Session(model([_n("ConstantOfShape", ["s"], value=value)], {"s": (I64, [2])}))
    for shape in ([2, 3], [0, 4]):
        s.check({"s": _i64(shape)})
    with pytest.raises(ember.TVMError, match="ConstantOfShape node 'constantofshape_node'.*"
                                             "negative"):
        s.outputs({"s": _i64([2, -3])})


@pytest.mark.parametrize("dtype, elem", [("int64", I64), ("float32", TP.FLOAT)])
def test_range_with_run_time_bounds(dtype, elem):
    s = Session(model([_n("Range", ["a", "b", "c"])], {k: (elem, []) for k in "abc"}),
                dyn=False)
    for a, b, c in ((0, 5, 1), (7, -2, -3), (2, 2, 1), (1, 10, 4)):
        s.check({"a": np.array(a, dtype), "b": np.array(b, dtype), "c": np.array(c, dtype)})


def test_split_into_run_time_sizes():
    s = Session(model([_n("Split", ["x", "s"], ["p0", "p1", "p2"], axis=1)],
                      {"x": (TP.FLOAT, [2, 7]), "s": (I64, [3])}, outputs=("p0", "p1", "p2")))
    x = _f32(2, 7)
    for sizes in ([1, 2, 4], [7, 0, 0], [3, 3, 1]):
        s.check({"x": x, "s": _i64(sizes)})
    with pytest.raises(ember.TVMError, match="Split node 'split_node'"):
        s.outputs({"x": x, "s": _i64([1, 2, 3])})


def test_cumsum_along_a_run_time_axis():
    s = Session(model([_n("CumSum", ["x", "a"], exclusive=1, reverse=1)],
                      {"x": (TP.FLOAT, [3, 4]), "a": (I64, [])}), dyn=False)
    x = _f32(3, 4)
    for axis in (0, 1, -1):
        s.check({"x": x, "a": _i64(axis)}, SUMS)


@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_with_run_time_k_and_symbolic_sizes(upper):
    s = Session(model([_n("Trilu", ["x", "k"], upper=upper)],
                      {"x": (TP.FLOAT, [2, "r", "c"]), "k": (I64, [])}), dyn=False)
    for k, (r, c) in ((0, (3, 4)), (-1, (5, 2)), (2, (4, 4))):
        s.check({"x": _f32(2, r, c), "k": _i64(k)})


def test_resize_by_run_time_scales_and_sizes():
    scales = Session(model([_n("Resize", ["x", "", "sc"], mode="linear")],
                           {"x": (TP.FLOAT, [1, 2, 4, 5]), "sc": (TP.FLOAT, [4])}))
    x = _f32(1, 2, 4, 5)
    for sc in ([1, 1, 2, 2], [1, 1, 0.5, 1.5], [1, 1, 3, 0.8]):
        scales.check({"x": x, "sc": np.array(sc, "float32")}, SUMS)
    sizes = Session(model([_n("Resize", ["x", "", "", "sz"], mode="nearest")],
                          {"x": (TP.FLOAT, [1, 2, 4, 5]), "sz": (I64, [4])}))
    for sz in ([1, 2, 8, 10], [1, 2, 3, 7]):
        sizes.check({"x": x, "sz": _i64(sz)})


def test_squeeze_and_unsqueeze_with_run_time_axes():
    sq = Session(model([_n("Squeeze", ["x", "a"])], {"x": (TP.FLOAT, [1, 3, 1, 2, 1]),
                                                     "a": (I64, [2])}))
    x = _f32(1, 3, 1, 2, 1)
    for axes in ([0, 2], [-1, 0], [4, 2]):
        sq.check({"x": x, "a": _i64(axes)})
    with pytest.raises(ember.TVMError, match="Squeeze node 'squeeze_node'"):
        sq.outputs({"x": x, "a": _i64([1, 0])})  # axis 1 has size 3
    unsq = Session(model([_n("Unsqueeze", ["x", "a"])], {"x": (TP.FLOAT, [3, 2]),
                                                         "a": (I64, [2])}))
    x = _f32(3, 2)
    for axes in ([0, 3], [-1, 1], [2, 0], [1, 2]):
        unsq.check({"x": x, "a": _i64(axes)})


@pytest.mark.parametrize("noop", [0, 1])
def test_reduction_axes_of_run_time_length_may_be_empty(noop):
    s = Session(model([_n("ReduceSum", ["x", "a"], keepdims=1, noop_with_empty_axes=noop)],
                      {"x": (TP.FLOAT, [3, 4]), "a": (I64, ["n"])}, opset=13))
    x = _f32(3, 4)
    for axes in ([], [1], [0, -1]):
        s.check({"x": x, "a": _i64(axes).reshape(-1)}, SUMS)
    with pytest.raises(OpNotImplemented, match="ReduceSum node.*static length"):
        relay.frontend.from_onnx(model([_n("ReduceSum", ["x", "a"], keepdims=0)],
                                       {"x": (TP.FLOAT, [3, 4]), "a": (I64, ["n"])}, opset=13))


def test_upsample_by_run_time_scales():
    s = Session(model([_n("Upsample", ["x", "sc"], mode="nearest")],
                      {"x": (TP.FLOAT, [1, 2, 3, 4]), "sc": (TP.FLOAT, [4])}, opset=9))
    x = _f32(1, 2, 3, 4)
    for sc in ([1, 1, 2, 2], [1, 1, 1.5, 3]):
        s.check({"x": x, "sc": np.array(sc, "float32")})


def test_reduction_over_an_empty_axis_gives_the_identity():
    ops = ("ReduceSum", "ReduceMax", "ReduceProd")  # one executable: an output per op
    s = Session(model([_n(op, ["x", "a"], [op], keepdims=1) for op in ops],
                      {"x": (TP.FLOAT, [2, "n", 4]), "a": (I64, [1])}, outputs=ops))
    s.check({"x": np.zeros((2, 0, 4), "float32"), "a": _i64([1])})
    s.check({"x": _f32(2, 3, 4), "a": _i64([1])}, SUMS)

"""Symbolic axes: an attention block with a ``seq`` dim_param, written the way exporters write
it (shapes computed with Shape/Gather/Unsqueeze/Concat, positions with Range), runs at three
sequence lengths from ONE VM executable; with ``shape=`` it is static, builds for the graph
executor and has no ``shape_of`` left. Tolerance: float32 rtol/atol 1e-4 (matmul sums)."""
from __future__ import annotations

import numpy as np
from _onnx_util import SUMS, compare, run_graph, run_ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember import relay

D, HEADS = 16, 2


def _n(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


def attention_model():
    """x: (1, seq, D), mask: (1, seq) -> (1, seq, D)."""
    rng = np.random.default_rng(0)
    w = {k: rng.standard_normal((D, D)).astype("float32") * 0.3 for k in ("wq", "wk", "wv",
                                                                        "wo")}
    pos = rng.standard_normal((64, D)).astype("float32") * 0.1
    consts = {"i0": np.array(0, "int64"), "i1": np.array(1, "int64"), "ax0": np.array([0], "int64"),
              "heads": np.array([HEADS, D // HEADS], "int64"), "dm": np.array([D], "int64"),
              "start": np.array(0, "int64"), "step": np.array(1, "int64"),
              "scale": np.array(1 / np.sqrt(D // HEADS), "float32"),
              "one": np.array(1, "float32"), "big": np.array(-1e4, "float32"),
              "ax12": np.array([1, 2], "int64"), "pos": pos, **w}
    split_heads = lambda src, out: [
        _n("Reshape", [src, "hshape"], [out + "_r"]),
        _n("Transpose", [out + "_r"], [out], perm=[0, 2, 1, 3])]
    nodes = [
        _n("Shape", ["x"], ["xs"]),
        _n("Gather", ["xs", "i0"], ["b"], axis=0),
        _n("Gather", ["xs", "i1"], ["seq"], axis=0),
        _n("Unsqueeze", ["b", "ax0"], ["b1"]),
        _n("Unsqueeze", ["seq", "ax0"], ["s1"]),
        _n("Concat", ["b1", "s1", "heads"], ["hshape"], axis=0),
        _n("Concat", ["b1", "s1", "dm"], ["oshape"], axis=0),
        _n("Range", ["start", "seq", "step"], ["positions"]),
        _n("Gather", ["pos", "positions"], ["pe"], axis=0),
        _n("Add", ["x", "pe"], ["h"]),
        _n("MatMul", ["h", "wq"], ["q0"]), _n("MatMul", ["h", "wk"], ["k0"]),
        _n("MatMul", ["h", "wv"], ["v0"]),
        *split_heads("q0", "q"), *split_heads("k0", "k"), *split_heads("v0", "v"),
        _n("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        _n("MatMul", ["q", "kt"], ["s0"]),
        _n("Mul", ["s0", "scale"], ["s"]),
        _n("Unsqueeze", ["mask", "ax12"], ["m4"]),
        _n("Sub", ["one", "m4"], ["inv"]),
        _n("Mul", ["inv", "big"], ["bias"]),
        _n("Add", ["s", "bias"], ["sb"]),
        _n("Softmax", ["sb"], ["p"], axis=-1),
        _n("MatMul", ["p", "v"], ["ctx0"]),
        _n("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3]),
        _n("Reshape", ["ctx1", "oshape"], ["ctx"]),
        _n("MatMul", ["ctx", "wo"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info("x", TP.FLOAT, [1, "seq", D]),
         helper.make_tensor_value_info("mask", TP.FLOAT, [1, "seq"])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [1, "seq", D])],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = min(model.ir_version, 10)
    return model


def _inputs(seq, seed):
    rng = np.random.default_rng(seed)
    mask = np.ones((1, seq), "float32")
    mask[0, seq // 2:] = rng.random(seq - seq // 2) < 0.5
    return {"x": rng.standard_normal((1, seq, D)).astype("float32"), "mask": mask}


def test_one_vm_executable_runs_three_sequence_lengths():
    model = attention_model()
    mod, params = relay.frontend.from_onnx(model)
    assert "?" in mod["main"].params[0].checked_type.__repr__() or any(
        not isinstance(d, int) for d in mod["main"].params[0].type_annotation.shape)
    exe = relay.vm.compile(mod, "llvm", params=params)
    vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu(0))
    for seq in (3, 8, 13):
        feeds = _inputs(seq, seq)
        got = vm.invoke("main", feeds["x"], feeds["mask"]).numpy()
        compare(f"attention seq={seq}", [got], run_ort(model, feeds), SUMS)


def test_static_shapes_fold_and_run_on_the_graph_executor():
    model = attention_model()
    mod, _ = relay.frontend.from_onnx(model, shape={"x": (1, 7, D), "mask": (1, 7)})
    ops = relay.analysis.list_op_freqs(mod)
    assert "shape_of" not in ops and "arange" not in ops and "cumsum" not in ops, ops
    feeds = _inputs(7, 1)
    got = run_graph(model, feeds, shape={"x": (1, 7, D), "mask": (1, 7)})
    compare("attention static", got, run_ort(model, feeds), SUMS)


def test_dynamic_expand_and_constant_of_shape():
    """Expand / ConstantOfShape to a shape taken from a symbolic input build from templates."""
    nodes = [_n("Shape", ["x"], ["s"]),
             _n("ConstantOfShape", ["s"], ["ones"],
                value=numpy_helper.from_array(np.array([2.0], "float32"))),
             _n("Expand", ["row", "s"], ["rows"]),
             _n("Add", ["ones", "rows"], ["y"]),
             _n("Flatten", ["y"], ["f"], axis=2)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, ["n", 3, "m"]),
                     helper.make_tensor_value_info("row", TP.FLOAT, [1, 1, "m"])],
        [helper.make_tensor_value_info("f", TP.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = min(model.ir_version, 10)
    mod, params = relay.frontend.from_onnx(model)
    exe = relay.vm.compile(mod, "llvm", params=params)
    vm = ember.runtime.vm.VirtualMachine(exe, ember.cpu(0))
    rng = np.random.default_rng(3)
    for n, m in ((2, 5), (4, 1)):
        feeds = {"x": rng.random((n, 3, m)).astype("float32"),
                 "row": rng.random((1, 1, m)).astype("float32")}
        got = vm.invoke("main", feeds["x"], feeds["row"]).numpy()
        compare(f"templates n={n} m={m}", [got], run_ort(model, feeds))


def _expand_model(x_dims, y_dims, target_nodes):
    """y = Expand(x, <target>) + 0 * Relu(t): ``target_nodes`` compute "shape" from ``t``."""
    nodes = [*target_nodes, _n("Expand", ["x", "shape"], ["e"]), _n("Relu", ["t"], ["r"]),
             _n("Mul", ["r", "zero"], ["z"]), _n("Add", ["e", "z"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, x_dims),
                     helper.make_tensor_value_info("t", TP.FLOAT, y_dims)],
        [helper.make_tensor_value_info("y", TP.FLOAT, None)],
        [numpy_helper.from_array(np.array(0, "float32"), "zero"),
         numpy_helper.from_array(np.array([0], "int64"), "i0"),
         numpy_helper.from_array(np.array([1, 2], "int64"), "i12")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = min(model.ir_version, 10)
    return model


def _ops_of(mod) -> set[str]:
    return {e.op.name for e in ember.ir.post_order(mod["main"].body)
            if isinstance(e, ember.ir.Call) and isinstance(e.op, ember.ir.Op)}


def _run_expand(model, shapes):
    mod, params = relay.frontend.from_onnx(model)
    vm = ember.runtime.vm.VirtualMachine(relay.vm.compile(mod, "llvm", params=params),
                                         ember.cpu(0))
    rng = np.random.default_rng(7)
    for xs, ts in shapes:
        feeds = {"x": rng.random(xs).astype("float32"), "t": rng.random(ts).astype("float32")}
        got = vm.invoke("main", feeds["x"], feeds["t"]).numpy()
        compare(f"expand {xs} to Shape({ts})", [got], run_ort(model, feeds))
    return mod


def test_expand_to_a_tensors_shape_is_broadcast_to_like():
    # Expand(x, Shape(t)) where x's sizes are 1 or t's: the shape is read off t, no template.
    model = _expand_model(["b", 1, "s"], ["b", 3, "s"], [_n("Shape", ["t"], ["shape"])])
    mod = _run_expand(model, [((1, 1, 1), (1, 3, 1)), ((2, 1, 5), (2, 3, 5)),
                              ((3, 1, 7), (3, 3, 7))])
    ops = _ops_of(mod)
    assert "broadcast_to_like" in ops and "logical_or" not in ops, ops


def test_expand_to_a_tensors_shape_that_x_may_grow():
    # Sizes of x the types cannot match to t's: broadcast both ways against t's shape
    # (x (n, 3, 1) to Shape(t (1, 1, m)) is (n, 3, m)), still without a template.
    model = _expand_model(["n", "c", 1], ["a", 1, "m"], [_n("Shape", ["t"], ["shape"])])
    mod = _run_expand(model, [((2, 3, 1), (1, 1, 4)), ((1, 1, 1), (1, 1, 1)),
                              ((4, 1, 1), (4, 1, 5)), ((1, 2, 1), (3, 1, 1))])
    ops = _ops_of(mod)
    assert "broadcast_to_like" not in ops and "logical_or" not in ops, ops


def test_expand_to_a_shape_pieced_together_still_broadcasts_both_ways():
    # A target that is not one tensor's whole Shape (sizes gathered and concatenated).
    target = [_n("Shape", ["t"], ["full"]), _n("Gather", ["full", "i0"], ["d0"], axis=0),
              _n("Gather", ["full", "i12"], ["d12"], axis=0),
              _n("Concat", ["d0", "d12"], ["shape"], axis=0)]
    model = _expand_model(["n", 1, 1], ["a", 1, "m"], target)
    _run_expand(model, [((2, 1, 1), (2, 1, 4)), ((1, 1, 1), (3, 1, 1)),
                        ((3, 1, 1), (1, 1, 6))])

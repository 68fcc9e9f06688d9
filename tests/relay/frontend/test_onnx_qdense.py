"""MatMulInteger with a constant right operand through nn.contrib_qdense (the int8 kernel of
qdense.h) against onnxruntime and numpy. int32 results: exact (tolerance 0)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember.relay.frontend import from_onnx

ort = pytest.importorskip("onnxruntime")
ONNX_TYPE = {"uint8": TP.UINT8, "int8": TP.INT8}


def _model(a_shape, a_dtype, b, b_zp, a_zp_input: bool):
    inits = {"b": b, "bz": b_zp}
    inputs = [helper.make_tensor_value_info("a", ONNX_TYPE[a_dtype], list(a_shape))]
    if a_zp_input:
        inputs.append(helper.make_tensor_value_info("az", ONNX_TYPE[a_dtype], []))
    node = helper.make_node("MatMulInteger", ["a", "b", "az" if a_zp_input else "", "bz"],
                            ["y"])
    graph = helper.make_graph([node], "q", inputs,
                              [helper.make_tensor_value_info("y", TP.INT32, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _check(model, feeds, target="llvm", with_ort=True):
    mod, _ = from_onnx(model)
    assert "nn.contrib_qdense" in str(mod), "MatMulInteger did not take the int8 kernel"
    got = np.asarray(ember.compile(model, threads=1, target=target)(*feeds.values()))
    a, az = feeds["a"].astype(np.int64), feeds.get("az", np.zeros((), np.int64))
    b = numpy_helper.to_array(model.graph.initializer[0]).astype(np.int64)
    bz = numpy_helper.to_array(model.graph.initializer[1]).astype(np.int64)
    np.testing.assert_array_equal(got, ((a - az) @ (b - bz)).astype(np.int32))
    if with_ort:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        want = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        np.testing.assert_array_equal(got, want)


def _case(rng, rows, k, n, a_dtype, b_dtype, zp_kind, per_column):
    lo, hi = (0, 256) if a_dtype == "uint8" else (-128, 128)
    a = rng.integers(lo, hi, rows + (k,)).astype(a_dtype)
    az = np.array({"zero": 0, "mid": 128 if a_dtype == "uint8" else 0, "odd": 77 if
                   a_dtype == "uint8" else -9}[zp_kind], a_dtype)
    if b_dtype == "int8":
        b = rng.integers(-128, 128, (k, n)).astype("int8")
        bz = np.zeros(n if per_column else (), "int8")
    else:
        b = rng.integers(0, 256, (k, n)).astype("uint8")
        bz = np.full(n if per_column else (), 128, "uint8")
    return _model(a.shape, a_dtype, b, bz, True), {"a": a, "az": az}


@pytest.mark.parametrize("rows, k, n", [((1, 128), 768, 768), ((3,), 5, 7), ((2, 5), 33, 17),
                                        ((1,), 1, 1), ((70,), 64, 65)])
def test_matmul_integer_shapes(rows, k, n):
    model, feeds = _case(np.random.default_rng(k + n), rows, k, n, "uint8", "int8", "odd",
                         False)
    _check(model, feeds)


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(st.integers(1, 9), min_size=1, max_size=2).map(tuple),
       k=st.integers(1, 70), n=st.integers(1, 40),
       types=st.sampled_from([("uint8", "int8"), ("uint8", "uint8"), ("int8", "int8")]),
       zp_kind=st.sampled_from(["zero", "mid", "odd"]), per_column=st.booleans(),
       seed=st.integers(0, 2**16))
def test_matmul_integer_hypothesis(rows, k, n, types, zp_kind, per_column, seed):
    model, feeds = _case(np.random.default_rng(seed), rows, k, n, *types, zp_kind, per_column)
    # onnxruntime implements u8 x {u8, s8} and s8 x s8; numpy checks every combination
    _check(model, feeds, with_ort=types != ("int8", "uint8"))


@pytest.mark.parametrize("level", [pytest.param("haswell", id="avx2"),
                                   pytest.param("x86-64-v2", id="sse2"),
                                   pytest.param("c", id="portable")])
@pytest.mark.parametrize("rows", [(2, 7), (13,)], ids=["14-rows", "13-rows"])
def test_matmul_integer_forced_simd_levels(level, rows, monkeypatch):
    """13 rows end in a tile of one row (the single-row products)."""
    target = "c" if level == "c" else "llvm"
    if level != "c":
        monkeypatch.setenv("EMBER_MARCH", level)
    model, feeds = _case(np.random.default_rng(9), rows, 45, 37, "uint8", "int8", "odd",
                         True)
    _check(model, feeds, target)


def test_run_time_weight_keeps_the_decomposition():
    model, _ = _case(np.random.default_rng(0), (3,), 4, 5, "uint8", "int8", "mid", False)
    b = model.graph.initializer[0]
    model.graph.initializer.remove(b)
    model.graph.input.append(helper.make_tensor_value_info("b", TP.INT8, [4, 5]))
    mod, _ = from_onnx(model)
    assert "nn.contrib_qdense" not in str(mod)


@pytest.mark.parametrize("per_column", [False, True])
def test_qlinear_matmul_constant_b(per_column):
    """QLinearMatMul with a constant b: the product on the int8 kernel, the requantization
    after it; within 1 unit of onnxruntime (float rounding of the scale product)."""
    rng = np.random.default_rng(7)
    a = rng.integers(0, 256, (2, 9, 40)).astype("uint8")
    n = 24
    inits = {"sa": np.array(0.02, "float32"), "za": np.array(131, "uint8"),
             "b": rng.integers(-128, 128, (40, n)).astype("int8"),
             "sb": (rng.uniform(0.001, 0.01, n) if per_column else np.array(0.004))
             .astype("float32"),
             "zb": np.zeros(n if per_column else (), "int8"),
             "sy": np.array(0.3, "float32"), "zy": np.array(128, "uint8")}
    node = helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"],
                            ["y"])
    graph = helper.make_graph([node], "q", [helper.make_tensor_value_info("a", TP.UINT8,
                                                                          list(a.shape))],
                              [helper.make_tensor_value_info("y", TP.UINT8, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    mod, _ = from_onnx(model)
    assert "nn.contrib_qdense" in str(mod)
    got = np.asarray(ember.compile(model, threads=1)(a))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert diff.max() <= 1 and (diff > 0).mean() < 0.01


def _quantize_dynamic(model):
    quantization = pytest.importorskip("onnxruntime.quantization")
    import os
    import tempfile

    import onnx

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "q.onnx")
        onnx.save(model, src)
        quantization.quantize_dynamic(src, dst, weight_type=quantization.QuantType.QInt8)
        return onnx.load(dst)


def test_quantize_dynamic_mlp_against_onnxruntime():
    """onnxruntime's quantize_dynamic of two linear layers (DynamicQuantizeLinear, then
    MatMulInteger and the dequantizing multiply, per layer) with a batch of 2 x 7 rows and
    odd sizes (k = 45 and 37: not multiples of 4; 37 and 19 columns: partial vectors): float
    outputs within 1e-5 of the largest (the order of the scale products), every layer on
    the int8 kernel."""
    rng = np.random.default_rng(21)
    inits = {"w1": rng.standard_normal((45, 37)).astype("float32"),
             "b1": rng.standard_normal(37).astype("float32"),
             "w2": rng.standard_normal((37, 19)).astype("float32")}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"]),
             helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]),
             helper.make_node("MatMul", ["h2", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TP.FLOAT,
                                                                           [2, 7, 45])],
                              [helper.make_tensor_value_info("y", TP.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    model = _quantize_dynamic(model)
    assert str(from_onnx(model)[0]).count("nn.contrib_qdense") == 2
    x = (rng.standard_normal((2, 7, 45)) + 0.3).astype("float32")
    got = np.asarray(ember.compile(model, threads=1)(x))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


# (rows, k, n): AVX2 register tiles of 6 rows x 8 columns (two vectors of 4 columns, each
# lane half a column's sum) over rows widened to int16 16 bytes at a time: rows ending in
# tiles of 1 to 5 (a 1-row tile, a 4-row tile, 6-row tiles with repeats), columns ending in
# 1-3 (one vector), 5-7 (two, a partial store) and crossing a 64-column work item, k below one
# 16-byte widening step, between steps and not a multiple of 4, rows over two row blocks, and
# work items over two tasks (each its own widened rows).
AVX2_TILE_SHAPES = [(1, 3, 5), (5, 17, 7), (7, 64, 9), (11, 33, 70), (70, 20, 12), (4, 4, 4),
                    (6, 1, 8), (67, 98, 75), (2, 47, 3)]


def _products_model(shapes, a_dtype, weights):
    """One graph of a MatMulInteger per shape (one build for all): inputs a0.., one shared
    zero point az, outputs y0.."""
    inputs = [helper.make_tensor_value_info("az", ONNX_TYPE[a_dtype], [])]
    nodes, outputs, inits = [], [], []
    for i, ((rows, k, _), b) in enumerate(zip(shapes, weights)):
        inputs.append(helper.make_tensor_value_info(f"a{i}", ONNX_TYPE[a_dtype], [rows, k]))
        inits += [numpy_helper.from_array(b, f"b{i}"),
                  numpy_helper.from_array(np.zeros((), b.dtype), f"bz{i}")]
        nodes.append(helper.make_node("MatMulInteger", [f"a{i}", f"b{i}", "az", f"bz{i}"],
                                      [f"y{i}"]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TP.INT32, None))
    model = helper.make_model(helper.make_graph(nodes, "q", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("a_dtype", ["uint8", "int8"])
def test_matmul_integer_avx2_tiles_and_extremes(a_dtype, monkeypatch):
    """The AVX2 build (EMBER_MARCH=haswell) against numpy, exactly: random values over every
    tile edge of AVX2_TILE_SHAPES, then the extremes (a 255 or -128 everywhere, b -128
    everywhere: u8 x s8 pair sums of 65280, which vpmaddubsw would saturate)."""
    monkeypatch.setenv("EMBER_MARCH", "haswell")
    rng = np.random.default_rng(5)
    lo, hi = (0, 256) if a_dtype == "uint8" else (-128, 128)
    weights = [rng.integers(-128, 128, (k, n)).astype("int8") for _, k, n in AVX2_TILE_SHAPES]
    weights[-1][:] = -128
    model = _products_model(AVX2_TILE_SHAPES, a_dtype, weights)
    assert str(from_onnx(model)[0]).count("nn.contrib_qdense") == len(AVX2_TILE_SHAPES)
    run = ember.compile(model, threads=2)
    az = np.array(77 if a_dtype == "uint8" else -9, a_dtype)
    feeds = [rng.integers(lo, hi, (rows, k)).astype(a_dtype) for rows, k, _ in AVX2_TILE_SHAPES]
    feeds[-1][:] = np.iinfo(a_dtype).max if a_dtype == "uint8" else np.iinfo(a_dtype).min
    for zero_point in (az, np.zeros((), a_dtype)):
        got = run(zero_point, *feeds)
        for i, (a, b) in enumerate(zip(feeds, weights)):
            want = (a.astype(np.int64) - zero_point.astype(np.int64)) @ b.astype(np.int64)
            np.testing.assert_array_equal(np.asarray(got[i]), want.astype(np.int32),
                                          err_msg=f"shape {AVX2_TILE_SHAPES[i]}")


@pytest.mark.parametrize("march, wide", [("x86-64-v3", True), ("x86-64-v2", False)])
def test_avx2_takes_the_int16_products(tmp_path, march, wide):
    """AVX2 builds take the int16 path of qdense.h (vpmaddwd on widened rows and weights, at
    about twice the byte-pair path's throughput); SSE2 keeps the byte pairs."""
    import subprocess
    from pathlib import Path

    from ember.contrib import cc

    src = tmp_path / "wide.c"
    src.write_text("#define EMBER_KERNEL_BODIES 1\n#include \"ember/kernels/qdense.h\"\n"
                   f"#if {'!' if wide else ''}defined(EMBER_QDENSE_WIDE)\n#error path\n#endif\n")
    include = Path(ember.__file__).parent / "include"
    proc = subprocess.run([*cc.compiler_argv(), f"-march={march}", "-fsyntax-only", "-I",
                           str(include), str(src)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr

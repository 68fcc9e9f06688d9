"""Operators added for ONNX's node tests (issue 19, item 6) against onnxruntime, and the
errors their converters give for models that are wrong."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import SUMS, check, graph_model, make_model, node_case, rand, run_graph, run_ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember import relay
from ember.runtime.errors import FrontendError, OpAttributeInvalid, OpNotImplemented

RNG = np.random.default_rng(19)


@pytest.mark.slow
def test_bitwise_operators_on_every_integer_type():
    cases = []
    for dtype in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"):
        a = rand(RNG, 3, 4, dtype=dtype, lo=0, hi=120)
        b = rand(RNG, 4, dtype=dtype, lo=0, hi=120)  # broadcast
        for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
            cases.append(node_case(f"{op}_{dtype}", op, {"a": a, "b": b}))
        cases.append(node_case(f"not_{dtype}", "BitwiseNot", {"a": a}))
    check(cases, opset=18)


def test_scatter_nd_and_scatter():
    data = rand(RNG, 4, 3, 2)
    idx = np.array([[[0, 1], [3, 2]], [[-1, 0], [1, 1]]], "int64")  # (2, 2, 2): tuples of 2
    upd = rand(RNG, 2, 2, 2)
    idx1 = np.array([[2], [0], [-1]], "int64")  # whole rows
    cases = [node_case("nd_pairs", "ScatterND", {"data": data, "i": idx, "u": upd}),
             node_case("nd_rows", "ScatterND", {"data": data, "i": idx1,
                                                "u": rand(RNG, 3, 3, 2)})]
    for reduction in ("add", "mul", "max", "min"):
        cases.append(node_case(f"nd_{reduction}", "ScatterND",
                               {"data": data, "i": np.array([[1], [1], [2]], "int64"),
                                "u": rand(RNG, 3, 3, 2)}, reduction=reduction))
    check(cases, opset=18)
    elems = np.array([[1, 0, 2], [0, 2, 1]], "int64")
    check([node_case("scatter9", "Scatter", {"data": rand(RNG, 3, 3), "i": elems,
                                             "u": rand(RNG, 2, 3)}, axis=1)], opset=9)


def test_scatter_nd_refuses_scalar_indices():
    model = graph_model([helper.make_node("ScatterND", ["x", "i", "x"], ["y"], name="s")],
                        inputs=[helper.make_tensor_value_info("x", TP.FLOAT, [2]),
                                helper.make_tensor_value_info("i", TP.INT64, [])], opset=18)
    with pytest.raises(FrontendError, match="ScatterND node 's': indices must have rank >= 1"):
        run_graph(model, {})


def _u8(*shape):
    return rand(RNG, *shape, dtype="uint8", lo=0, hi=255)


def _i8(*shape):
    return rand(RNG, *shape, dtype="int8", lo=-128, hi=127)


def test_quantize_and_dequantize_per_tensor_and_per_axis():
    x = rand(RNG, 2, 3, 4, lo=-20, hi=20)
    x.reshape(-1)[:4] = [0.5, 1.5, -2.5, 300.0]  # ties to even, saturation
    scale, scales = np.array(0.5, "float32"), np.array([0.5, 0.25, 2.0], "float32")
    cases = [node_case("q_u8", "QuantizeLinear", {"x": x},
                       inits={"s": scale, "z": np.array(128, "uint8")}),
             node_case("q_i8_axis", "QuantizeLinear", {"x": x},
                       inits={"s": scales, "z": np.array([0, -3, 5], "int8")}, axis=1),
             node_case("q_default_u8", "QuantizeLinear", {"x": x}, inits={"s": scale}),
             node_case("dq_u8", "DequantizeLinear", {"x": _u8(2, 3, 4)},
                       inits={"s": scale, "z": np.array(7, "uint8")}),
             node_case("dq_i8_axis", "DequantizeLinear", {"x": _i8(2, 3, 4)},
                       inits={"s": scales, "z": np.array([1, 0, -2], "int8")}, axis=1),
             node_case("dq_no_zp", "DequantizeLinear", {"x": _i8(5)}, inits={"s": scale})]
    check(cases, opset=13)
    check([node_case("dyn", "DynamicQuantizeLinear", {"x": x}, n_out=3),
           node_case("dyn_pos", "DynamicQuantizeLinear", {"x": np.abs(x) + 1}, n_out=3)],
          opset=11)


def test_integer_products_and_qlinear_ops():
    a, b = _u8(3, 4), _u8(4, 5)
    x, w = _u8(1, 2, 5, 5), _u8(3, 2, 3, 3)
    f = np.array(0.02, "float32")
    cases = [
        node_case("mmi", "MatMulInteger", {"a": a, "b": b},
                  inits={"za": np.array(2, "uint8"), "zb": np.array([5, 0, 1, 9, 3], "uint8")}),
        node_case("mmi_batched", "MatMulInteger", {"a": _i8(2, 3, 4), "b": _i8(4, 2)}),
        node_case("convi", "ConvInteger", {"x": x, "w": w},
                  inits={"zx": np.array(9, "uint8"), "zw": np.array(4, "uint8")},
                  pads=[1, 1, 1, 1]),
        node_case("qmm", "QLinearMatMul", {"a": a, "b": b},
                  inits={"sa": f, "za": np.array(3, "uint8"), "sb": np.array(0.05, "float32"),
                         "zb": np.array(100, "uint8"), "sy": np.array(0.3, "float32"),
                         "zy": np.array(10, "uint8")},
                  order=["a", "sa", "za", "b", "sb", "zb", "sy", "zy"]),
        node_case("qconv", "QLinearConv", {"x": x, "w": w},
                  inits={"sx": f, "zx": np.array(3, "uint8"),
                         "sw": np.array([0.01, 0.02, 0.03], "float32"),
                         "zw": np.array([0, 0, 0], "uint8"), "sy": np.array(0.5, "float32"),
                         "zy": np.array(128, "uint8"),
                         "bias": np.array([-100, 0, 250], "int32")},
                  order=["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "bias"],
                  strides=[2, 2])]
    check(cases, opset=13)


def test_quantization_refuses_other_types():
    model = graph_model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q")],
                        inputs=[helper.make_tensor_value_info("x", TP.FLOAT, [2]),
                                helper.make_tensor_value_info("s", TP.FLOAT, []),
                                helper.make_tensor_value_info("z", TP.INT32, [])], opset=13)
    with pytest.raises(OpNotImplemented, match="QuantizeLinear node 'q': output of type int32; "
                                               "ember quantizes to uint8, int8"):
        run_graph(model, {})
    model = graph_model([helper.make_node("DequantizeLinear", ["x", "s"], ["y"], name="d")],
                        inputs=[helper.make_tensor_value_info("x", TP.INT8, [2, 3]),
                                helper.make_tensor_value_info("s", TP.FLOAT, [3, 1])], opset=13)
    with pytest.raises(FrontendError, match="x_scale must be a scalar or a vector along axis "
                                            r"1, got shape \(3, 1\)"):
        run_graph(model, {})


def test_matmul_integer_per_row_zero_points_against_numpy():
    """onnxruntime takes one zero point for A; ONNX allows one per row."""
    a, b = _u8(3, 4), _u8(4, 2)
    za, zb = np.array([1, 2, 3], "uint8"), np.array([7, 0], "uint8")
    node = helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])
    model = graph_model([node], inputs=[helper.make_tensor_value_info("a", TP.UINT8, [3, 4])],
                        inits=[numpy_helper.from_array(v, n) for n, v in
                               (("b", b), ("za", za), ("zb", zb))])
    want = (a.astype("int32") - za[:, None]) @ (b.astype("int32") - zb)
    np.testing.assert_array_equal(run_graph(model, {"a": a})[0], want)


def test_normalizations():
    x = rand(RNG, 2, 6, 3, 2)
    c6, c3 = rand(RNG, 6), rand(RNG, 3)
    zero_row = rand(RNG, 3, 4)
    zero_row[1] = 0.0
    cases = [node_case("gn", "GroupNormalization", {"x": x}, inits={"s": c6, "b": c6},
                       num_groups=3, epsilon=1e-3, tol=SUMS),
             node_case("mvn", "MeanVarianceNormalization", {"x": x}, tol=SUMS),
             node_case("mvn_axes", "MeanVarianceNormalization", {"x": x}, axes=[1, 3],
                       tol=SUMS),
             node_case("lp2", "LpNormalization", {"x": zero_row}, axis=1),
             node_case("lp1", "LpNormalization", {"x": zero_row}, axis=0, p=1),
             node_case("bn_train", "BatchNormalization", {"x": rand(RNG, 4, 3, 2, 2)},
                       inits={"s": c3, "b": c3, "m": c3, "v": np.abs(c3) + 1}, n_out=3,
                       training_mode=1, momentum=0.8, tol=SUMS)]
    check(cases, opset=21)
    check([node_case("rms", "RMSNormalization", {"x": x}, inits={"s": rand(RNG, 3, 2)},
                     axis=2, tol=SUMS)], opset=23)


def test_normalization_errors():
    node = helper.make_node("GroupNormalization", ["x", "x", "x"], ["y"], num_groups=4, name="g")
    with pytest.raises(FrontendError, match=r"GroupNormalization node 'g': X \(2, 3\) must be "
                                            r"\(N, C, spatial...\) with C divisible by"):
        run_graph(graph_model([node], opset=21), {})
    node = helper.make_node("LpNormalization", ["x"], ["y"], p=3, name="lp")
    with pytest.raises(OpAttributeInvalid, match="LpNormalization node 'lp': attribute p must "
                                                 "be 1 or 2, got 3"):
        run_graph(graph_model([node]), {})


def _tfidf(name, x, **attrs):
    base = {"min_gram_length": 1, "max_gram_length": 3, "max_skip_count": 2,
            "ngram_counts": [0, 4, 10], "ngram_indexes": list(range(9)),
            "pool_int64s": [2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 2, 3, 5, 5, 6, 7], "mode": "TF"}
    base.update(attrs)
    return node_case(name, "TfIdfVectorizer", {"x": x}, **base)


def test_tfidf_vectorizer_modes():
    x = np.array([[2, 3, 5, 5, 6, 7, 2, 3, 5, 4], [7, 8, 6, 7, 2, 3, 5, 5, 6, 7]], "int64")
    w = [0.5 + i for i in range(9)]
    cases = [_tfidf("tf", x), _tfidf("tf_1d", x[1].astype("int32")),
             _tfidf("idf", x, mode="IDF", weights=w), _tfidf("idf_plain", x, mode="IDF"),
             _tfidf("tfidf", x, mode="TFIDF", weights=w),
             _tfidf("bigrams", x, min_gram_length=2, max_gram_length=2, max_skip_count=0),
             _tfidf("shuffled", x, ngram_indexes=[8, 2, 0, 1, 4, 3, 6, 5, 7])]
    check(cases, opset=9)


def test_tfidf_vectorizer_errors():
    def model(**attrs):
        base = {"min_gram_length": 1, "max_gram_length": 1, "max_skip_count": 0,
                "ngram_counts": [0], "ngram_indexes": [0], "pool_int64s": [1], "mode": "TF"}
        base.update(attrs)
        base = {k: v for k, v in base.items() if v is not None}
        node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], name="t", **base)
        return graph_model([node], inputs=[helper.make_tensor_value_info("x", TP.INT64, [4])],
                           opset=9)

    with pytest.raises(OpAttributeInvalid, match="TfIdfVectorizer node 't': attribute "
                       "ngram_counts "
                                            "must be start offsets of whole 2-grams"):
        run_graph(model(ngram_counts=[0, 0], pool_int64s=[1, 2, 3]), {})
    with pytest.raises(OpAttributeInvalid, match="attribute ngram_indexes must be one index "
                                                 r"per n-gram of the pool \(1\)"):
        run_graph(model(ngram_indexes=[0, 1]), {})
    with pytest.raises(OpNotImplemented, match="a pool of strings"):
        run_graph(model(pool_int64s=None, pool_strings=["a"]), {})
    with pytest.raises(OpAttributeInvalid, match="attribute ngram_indexes must be "
                                                 "non-negative output positions"):
        run_graph(model(ngram_indexes=[-1]), {})
    with pytest.raises(FrontendError, match="TfIdfVectorizer node 't': ngram_indexes would be "
                                            "a constant of shape"):
        run_graph(model(ngram_indexes=[1 << 40]), {})


def _dft_model(x_shape, opset=17, dft_length=None, **attrs):
    inputs = ["x"] + (["n"] if dft_length is not None else [])
    inits = [numpy_helper.from_array(np.array(dft_length, "int64"), "n")] if dft_length else []
    node = helper.make_node("DFT", inputs, ["y"], **attrs)
    return graph_model([node], inputs=[helper.make_tensor_value_info("x", TP.FLOAT, x_shape)],
                       inits=inits, opset=opset)


def _as_complex(x):
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0]


def _as_onnx(z):
    return np.stack([z.real, z.imag], -1).astype("float32")


def test_dft_against_numpy():
    """onnxruntime's DFT differs from ONNX's reference in the node tests: numpy is the oracle."""
    real, cplx = rand(RNG, 2, 8, 3, 1), rand(RNG, 2, 8, 3, 2)
    runs = [  # (input, attrs, dft_length, numpy)
        (real, {"axis": 1}, None, lambda z: np.fft.fft(z, axis=1)),
        (cplx, {"axis": 2}, None, lambda z: np.fft.fft(z, axis=2)),
        (cplx, {"axis": 1, "inverse": 1}, 6, lambda z: np.fft.ifft(z, n=6, axis=1)),
        (real, {"axis": 1, "onesided": 1}, 10, lambda z: np.fft.rfft(z.real, n=10, axis=1)),
        (cplx, {"axis": 1, "inverse": 1, "onesided": 1}, None,
         lambda z: np.fft.irfft(z, axis=1)[..., None]),
        (cplx, {"axis": 1, "inverse": 1, "onesided": 1}, 9,
         lambda z: np.fft.irfft(z, n=9, axis=1)[..., None])]
    for x, attrs, n, fn in runs:
        got = run_graph(_dft_model(list(x.shape), dft_length=n, **attrs), {"x": x})[0]
        want = fn(_as_complex(x).astype("complex128"))
        want = want.astype("float32") if want.dtype.kind == "f" else _as_onnx(want)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(attrs))
    axis_input = helper.make_node("DFT", ["x", "", "a"], ["y"])
    model = graph_model([axis_input], inputs=[helper.make_tensor_value_info("x", TP.FLOAT,
                                                                            [2, 8, 3, 1])],
                        inits=[numpy_helper.from_array(np.array(-3, "int64"), "a")], opset=20)
    np.testing.assert_allclose(run_graph(model, {"x": real})[0],
                               _as_onnx(np.fft.fft(real[..., 0], axis=1)), rtol=1e-4, atol=1e-4)


def test_stft_against_numpy():
    signal = rand(RNG, 2, 40, 1)
    window = np.hanning(16).astype("float32")
    node = helper.make_node("STFT", ["s", "step", "w"], ["y"])
    model = graph_model([node], inputs=[helper.make_tensor_value_info("s", TP.FLOAT, [2, 40, 1])],
                        inits=[numpy_helper.from_array(np.array(8, "int64"), "step"),
                               numpy_helper.from_array(window, "w")], opset=17)
    frames = np.stack([signal[:, i * 8:i * 8 + 16, 0] * window for i in range(4)], 1)
    want = _as_onnx(np.fft.rfft(frames.astype("float64"), axis=-1))
    np.testing.assert_allclose(run_graph(model, {"s": signal})[0], want, rtol=1e-4, atol=1e-4)


def test_stft_of_a_batch_of_samples_without_the_last_axis():
    """torch.onnx writes torch.stft's (batch, samples) input as the STFT's signal, without
    ONNX's trailing axis of 1; onnxruntime reads it as a real signal, as ember must."""
    signal = rand(RNG, 2, 40)
    window = np.pad(np.hanning(13)[:12], (2, 2)).astype("float32")  # 12 in 16, centered
    node = helper.make_node("STFT", ["s", "step", "w", "n"], ["y"])
    model = graph_model([node], inputs=[helper.make_tensor_value_info("s", TP.FLOAT, [2, 40])],
                        inits=[numpy_helper.from_array(np.array(8, "int64"), "step"),
                               numpy_helper.from_array(window, "w"),
                               numpy_helper.from_array(np.array(16, "int64"), "n")], opset=17)
    frames = np.stack([signal[:, i * 8:i * 8 + 16] * window for i in range(4)], 1)
    want = _as_onnx(np.fft.rfft(frames.astype("float64"), axis=-1))
    got = run_graph(model, {"s": signal})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, run_ort(model, {"s": signal})[0], rtol=1e-4, atol=1e-4)


def test_windows_and_mel_filters_match_onnxruntime():
    size = {"n": np.array(10, "int64")}
    cases = [node_case(f"{op}_{p}", op, {}, inits=size, periodic=p)
             for op in ("HannWindow", "HammingWindow", "BlackmanWindow") for p in (0, 1)]
    mel = {"bins": np.array(8, "int64"), "dft": np.array(64, "int64"),
           "rate": np.array(8000, "int64"), "lo": np.array(0.0, "float32"),
           "hi": np.array(4000.0, "float32")}
    cases.append(node_case("mel", "MelWeightMatrix", {}, inits=mel))
    check(cases, opset=17)


def _mel(name, bins, dft, rate, lo, hi):
    return node_case(name, "MelWeightMatrix", {}, inits={
        "bins": np.array(bins, "int64"), "dft": np.array(dft, "int64"),
        "rate": np.array(rate, "int64"), "lo": np.array(lo, "float32"),
        "hi": np.array(hi, "float32")})


def test_degenerate_mel_filters_match_onnxruntime():
    """Edges onnxruntime accepts: descending (lower > upper: every filter empty), equal,
    more filters than DFT bins."""
    check([_mel("desc", 8, 64, 8000, 3000, 1000), _mel("equal", 8, 64, 8000, 1000, 1000),
           _mel("zero", 4, 64, 8000, 0, 0), _mel("crowded", 40, 16, 8000, 0, 4000)], opset=17)


@pytest.mark.parametrize("edges, match", [
    ((-500, 4000), "lower_edge_hertz -500 falls outside the 33 DFT bins of dft_length 64 at "
                   "sample_rate 8000 \\(edges from 0 to below 4061.54 Hz fit\\)"),
    ((-1000, 4000), "lower_edge_hertz -1000 falls outside"),  # log of a negative: NaN
    ((float("nan"), 4000), "lower_edge_hertz nan falls outside"),
    ((0, 8000), "upper_edge_hertz 8000 falls outside the 33 DFT bins"),
    ((-3000, -1000), "lower_edge_hertz -3000 falls outside"),
])
def test_mel_edges_outside_the_dft_bins_are_refused(edges, match):
    """onnxruntime refuses these too (its lowest/highest index checks); ember once failed
    inside numpy (a broadcast or index error naming no node)."""
    model = make_model([_mel("m", 8, 64, 8000, *edges)], opset=17)
    with pytest.raises(FrontendError, match="MelWeightMatrix node 'm__MelWeightMatrix': " + match):
        relay.frontend.from_onnx(model)
    with pytest.raises(Exception, match="out of range given the dft_length"):
        run_ort(model, {})


@pytest.mark.parametrize("sizes", [(0, 64, 8000), (-1, 64, 8000), (8, 0, 8000), (8, 64, 0)])
def test_mel_sizes_must_be_positive(sizes):
    with pytest.raises(FrontendError, match=r"num_mel_bins \(%d\), dft_length \(%d\) and "
                                            r"sample_rate \(%d\) must be positive" % sizes):
        relay.frontend.from_onnx(make_model([_mel("m", *sizes, 0, 1000)], opset=17))


def test_signal_errors():
    with pytest.raises(FrontendError, match=r"DFT node 'd': axis must not be the last axis"):
        run_graph(_dft_model([2, 4, 1], axis=2, name="d"), {})
    with pytest.raises(FrontendError, match="onesided=1 needs a real input"):
        run_graph(_dft_model([2, 4, 2], axis=1, onesided=1), {})
    node = helper.make_node("STFT", ["x", "s", "", "n"], ["y"], name="st")
    model = graph_model([node], opset=17, inputs=[
        helper.make_tensor_value_info("x", TP.FLOAT, [1, 32, 1]),
        helper.make_tensor_value_info("s", TP.INT64, []),
        helper.make_tensor_value_info("n", TP.INT64, [])])
    with pytest.raises(OpNotImplemented, match="STFT node 'st': input 3 \\(frame_length\\) must "
                                               "be known when importing"):
        run_graph(model, {})


def _int64s(**values):
    return [numpy_helper.from_array(np.array(v, "int64"), k) for k, v in values.items()]


def test_sizes_read_from_the_model_do_not_allocate_without_bound():
    """A huge dft_length, window size, mel bin count or EyeLike shape once went straight to
    numpy (a MemoryError naming no node, or the process killed for memory)."""
    big = 1 << 40
    hann = graph_model([helper.make_node("HannWindow", ["n"], ["y"], name="w")], inputs=[],
                       inits=_int64s(n=big), opset=17)
    mel = graph_model([helper.make_node("MelWeightMatrix", ["b", "d", "r", "lo", "hi"], ["y"],
                                        name="m")], inputs=[], opset=17,
                      inits=_int64s(b=big, d=64, r=8000) + [
                          numpy_helper.from_array(np.array(v, "float32"), k)
                          for k, v in (("lo", 0.0), ("hi", 4000.0))])
    eye = graph_model([helper.make_node("EyeLike", ["x"], ["y"], name="e")], opset=17,
                      inputs=[helper.make_tensor_value_info("x", TP.FLOAT, [1 << 20, 1 << 20])])
    cases = [(_dft_model([1, 4, 1], dft_length=big, axis=1, name="d"), "DFT node 'd': "
              f"dft_length {big} would be a constant of shape \\[4, {big}\\]"),
             (hann, f"HannWindow node 'w': size {big} would be a constant"),
             (mel, "MelWeightMatrix node 'm': the mel filters would be a constant"),
             (eye, "EyeLike node 'e': the identity would be a constant")]
    for model, message in cases:
        with pytest.raises(FrontendError, match=message):
            run_graph(model, {})


def test_einsum_diagonals():
    sq, cube = rand(RNG, 4, 4), rand(RNG, 3, 3, 3)
    batch = rand(RNG, 2, 3, 3)
    cases = [node_case("diag", "Einsum", {"x": sq}, equation="ii->i"),
             node_case("trace", "Einsum", {"x": sq}, equation="ii"),
             node_case("batch_diag", "Einsum", {"x": batch}, equation="bii->bi"),
             node_case("triple", "Einsum", {"x": cube}, equation="iii->i"),
             node_case("diag_product", "Einsum", {"x": batch, "y": rand(RNG, 3, 5)},
                       equation="bjj,jk->bk")]
    check(cases, opset=12)
    model = graph_model([helper.make_node("Einsum", ["x"], ["y"], equation="ij->", name="e")],
                        inputs=[helper.make_tensor_value_info("x", TP.FLOAT, ["n", "n"])])
    model.graph.node[0].attribute[0].s = b"ii->i"
    with pytest.raises(OpNotImplemented, match="Einsum node 'e': the diagonal of subscript "
                                               "'i' over axes of sizes"):
        run_graph(model, {})


def test_grid_sample_one_case_per_mode():
    """The default run's part of the sweep below: each mode once, in 2-D and 3-D."""
    x2, g2 = rand(RNG, 1, 2, 4, 5), rand(RNG, 1, 3, 4, 2, lo=-1.4, hi=1.4)
    x3, g3 = rand(RNG, 1, 1, 2, 3, 4), rand(RNG, 1, 2, 2, 3, 3, lo=-1.3, hi=1.3)
    check([node_case("lin_zeros", "GridSample", {"x": x2, "g": g2}, mode="linear",
                     padding_mode="zeros", align_corners=0, tol=SUMS),
           node_case("cubic_reflect", "GridSample", {"x": x2, "g": g2}, mode="cubic",
                     padding_mode="reflection", align_corners=1, tol=SUMS),
           node_case("near_border_3d", "GridSample", {"x": x3, "g": g3}, mode="nearest",
                     padding_mode="border", align_corners=1, tol=SUMS)], opset=20)


@pytest.mark.slow
def test_grid_sample_every_mode_and_padding():
    x2, g2 = rand(RNG, 2, 3, 5, 6), rand(RNG, 2, 4, 7, 2, lo=-1.4, hi=1.4)
    x3, g3 = rand(RNG, 1, 2, 3, 4, 5), rand(RNG, 1, 2, 3, 4, 3, lo=-1.3, hi=1.3)
    cases = []
    for mode in ("linear", "nearest", "cubic"):
        for padding in ("zeros", "border", "reflection"):
            for align in (0, 1):
                if (mode, padding) == ("cubic", "border"):
                    continue  # onnxruntime differs from ONNX's reference: tested below
                tag = f"{mode}_{padding}_{align}"
                cases.append(node_case(f"g2_{tag}", "GridSample", {"x": x2, "g": g2}, mode=mode,
                                       padding_mode=padding, align_corners=align, tol=SUMS))
                if mode != "cubic":  # onnxruntime has no 3-D cubic
                    cases.append(node_case(f"g3_{tag}", "GridSample", {"x": x3, "g": g3},
                                           mode=mode, padding_mode=padding, align_corners=align,
                                           tol=SUMS))
    check(cases, opset=20)
    check([node_case("bicubic16", "GridSample", {"x": x2, "g": g2}, mode="bicubic",
                     padding_mode="reflection", tol=SUMS),
           node_case("bilinear16", "GridSample", {"x": x2, "g": g2}, mode="bilinear",
                     tol=SUMS)], opset=16)


def test_grid_sample_cubic_border_follows_onnx_reference():
    """onnxruntime clamps cubic taps where ONNX's reference clamps the coordinate first."""
    from onnx.reference import ReferenceEvaluator

    x, g = rand(RNG, 2, 3, 5, 6), rand(RNG, 2, 4, 7, 2, lo=-1.4, hi=1.4)
    for align in (0, 1):
        node = helper.make_node("GridSample", ["x", "g"], ["y"], mode="cubic",
                                padding_mode="border", align_corners=align)
        model = graph_model([node], opset=20, inputs=[
            helper.make_tensor_value_info("x", TP.FLOAT, list(x.shape)),
            helper.make_tensor_value_info("g", TP.FLOAT, list(g.shape))])
        want = ReferenceEvaluator(model).run(None, {"x": x, "g": g})[0]
        np.testing.assert_allclose(run_graph(model, {"x": x, "g": g})[0], want, rtol=1e-4,
                                   atol=1e-4)


def test_affine_grid():
    cases = [node_case(f"ag{len(size) - 2}d_{align}", "AffineGrid",
                       {"t": rand(RNG, 2, len(size) - 2, len(size) - 1)},
                       inits={"size": np.array(size, "int64")}, align_corners=align)
             for size in ([2, 3, 4, 5], [2, 1, 3, 4, 2]) for align in (0, 1)]
    check(cases, opset=20)


def test_affine_grid_of_one_point_follows_onnx_reference():
    """A single point with align_corners sits at -1 in ONNX's reference (onnxruntime: +1)."""
    from _onnx_util import run_vm
    from onnx.reference import ReferenceEvaluator

    theta = rand(RNG, 2, 2, 3)
    for known in (True, False):
        node = helper.make_node("AffineGrid", ["t", "s"], ["y"], align_corners=1)
        size = np.array([2, 3, 1, 4], "int64")
        inputs = [helper.make_tensor_value_info("t", TP.FLOAT, [2, 2, 3])]
        inits = [numpy_helper.from_array(size, "s")] if known else []
        if not known:
            inputs.append(helper.make_tensor_value_info("s", TP.INT64, [4]))
        model = graph_model([node], inputs=inputs, inits=inits, opset=20)
        feeds = {"t": theta} if known else {"t": theta, "s": size}
        want = ReferenceEvaluator(model).run(None, feeds)[0]
        got = run_vm(model, list(feeds.values()))[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_grid_sample_and_affine_grid_errors():
    node = helper.make_node("GridSample", ["x", "g"], ["y"], name="gs")
    model = graph_model([node], inputs=[helper.make_tensor_value_info("x", TP.FLOAT, [1, 1, 4]),
                                        helper.make_tensor_value_info("g", TP.FLOAT, [1, 4, 1])],
                        opset=20)
    with pytest.raises(FrontendError, match=r"GridSample node 'gs': X \[1, 1, 4\] must be"):
        run_graph(model, {})
    node = helper.make_node("AffineGrid", ["t", "s"], ["y"], name="ag")
    model = graph_model([node], inputs=[helper.make_tensor_value_info("t", TP.FLOAT, [1, 2, 3])],
                        inits=[numpy_helper.from_array(np.array([1, 1, 2, 2, 2], "int64"), "s")],
                        opset=20)
    with pytest.raises(FrontendError, match=r"theta \[1, 2, 3\] and size \[1, 1, 2, 2, 2\]"):
        run_graph(model, {})


def test_roi_align():
    x = rand(RNG, 2, 3, 10, 12)
    rois = np.array([[0, 0, 9, 9], [1.5, 2.5, 7.2, 4.1], [-2, -3, 4, 5], [8, 6, 30, 20]],
                    "float32")
    batch = np.array([0, 1, 1, 0], "int64")
    cases = [node_case(f"roi_{mode}_{ctm}_{ratio}", "RoiAlign", {"x": x},
                       inits={"rois": rois, "b": batch}, mode=mode, tol=SUMS,
                       coordinate_transformation_mode=ctm, output_height=3, output_width=4,
                       sampling_ratio=ratio, spatial_scale=0.9)
             for mode in ("avg", "max") for ctm in ("half_pixel", "output_half_pixel")
             for ratio in (1, 2)]
    check([c for c in cases if "avg" in c.name], opset=16)
    from onnx.reference import ReferenceEvaluator  # onnxruntime's max mode differs

    for case in [c for c in cases if "max" in c.name]:
        model = graph_model(case.nodes, opset=16, inputs=[helper.make_tensor_value_info(
            "x", TP.FLOAT, list(x.shape))], inits=[numpy_helper.from_array(v, n) for n, v in
                                                   case.inits.items()])
        model.graph.output[0].name = "out0"
        want = ReferenceEvaluator(model).run(None, {"x": x})[0]
        np.testing.assert_allclose(run_graph(model, {"x": x})[0], want, rtol=1e-4, atol=1e-5)
    node = helper.make_node("RoiAlign", ["x", "r", "b"], ["y"], name="ra")
    model = graph_model([node], opset=16, inputs=[helper.make_tensor_value_info(
        "x", TP.FLOAT, [1, 1, 4, 4])], inits=[numpy_helper.from_array(rois, "r"),
                                             numpy_helper.from_array(batch, "b")])
    with pytest.raises(OpNotImplemented, match="RoiAlign node 'ra': sampling_ratio=0"):
        run_graph(model, {})
    for attrs, message in (({"sampling_ratio": 2, "output_height": 0}, "output_height "
                            r"\(0\) and output_width \(1\) must be positive"),
                           ({"sampling_ratio": 1 << 40}, "the sample offsets .* would be a "
                            "constant")):
        node = helper.make_node("RoiAlign", ["x", "r", "b"], ["y"], name="ra", **attrs)
        model.graph.node[0].CopyFrom(node)
        with pytest.raises(FrontendError, match=f"RoiAlign node 'ra': {message}"):
            run_graph(model, {})
    node = helper.make_node("MaxRoiPool", ["x", "r5"], ["y"], name="mp", pooled_shape=[1 << 40, 1])
    model = graph_model([node], inputs=[helper.make_tensor_value_info("x", TP.FLOAT, [1, 1, 4, 4]),
                                        helper.make_tensor_value_info("r5", TP.FLOAT, [2, 5])])
    with pytest.raises(FrontendError, match="MaxRoiPool node 'mp': pooled_shape .* would be a "
                                            "constant"):
        run_graph(model, {})


def test_reverse_sequence_center_crop_pad_col2im_bit_shift():
    x = rand(RNG, 4, 3, 2)
    lens = {"l": np.array([4, 1, 3], "int64")}
    cases = [node_case("rev_time0", "ReverseSequence", {"x": x}, inits=lens, time_axis=0,
                       batch_axis=1),
             node_case("rev_time1", "ReverseSequence", {"x": np.swapaxes(x, 0, 1).copy()},
                       inits=lens, time_axis=1, batch_axis=0),
             node_case("crop_pad", "CenterCropPad", {"x": rand(RNG, 5, 4, 3)},
                       inits={"s": np.array([3, 7, 3], "int64")}),
             node_case("crop_axes", "CenterCropPad", {"x": rand(RNG, 5, 4, 3)},
                       inits={"s": np.array([2, 6], "int64")}, axes=[-1, 0]),
             node_case("col2im", "Col2Im", {"x": rand(RNG, 2, 2 * 6, 16)},
                       inits={"i": np.array([5, 6], "int64"), "b": np.array([2, 3], "int64")}),
             node_case("col2im_strided", "Col2Im", {"x": rand(RNG, 1, 4, 9)},
                       inits={"i": np.array([6, 6], "int64"), "b": np.array([2, 2], "int64")},
                       strides=[2, 2]),
             node_case("col2im_padded", "Col2Im", {"x": rand(RNG, 1, 4, 36)},
                       inits={"i": np.array([5, 5], "int64"), "b": np.array([2, 2], "int64")},
                       pads=[1, 1, 1, 1]),
             node_case("col2im_dilated", "Col2Im", {"x": rand(RNG, 1, 4, 9)},
                       inits={"i": np.array([5, 5], "int64"), "b": np.array([2, 2], "int64")},
                       dilations=[2, 2])]
    for dtype in ("uint8", "uint32", "uint64"):
        a, b = rand(RNG, 6, dtype=dtype, lo=0, hi=200), rand(RNG, 6, dtype=dtype, lo=0, hi=7)
        for way in ("LEFT", "RIGHT"):
            cases.append(node_case(f"shift_{way}_{dtype}", "BitShift", {"a": a, "b": b},
                                   direction=way))
    check(cases, opset=18)


def test_space_to_depth_crd_against_numpy():
    x = rand(RNG, 1, 2, 4, 6)
    node = helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode="CRD")
    model = graph_model([node], inputs=[helper.make_tensor_value_info("x", TP.FLOAT, [1, 2, 4, 6])],
                        opset=28)
    want = x.reshape(1, 2, 2, 2, 3, 2).transpose(0, 1, 3, 5, 2, 4).reshape(1, 8, 2, 3)
    np.testing.assert_array_equal(run_graph(model, {"x": x})[0], want)


def test_layout_errors():
    node = helper.make_node("Col2Im", ["x", "i", "b"], ["y"], name="c")
    model = graph_model([node], inputs=[helper.make_tensor_value_info("x", TP.FLOAT, [1, 4, 7])],
                        inits=[numpy_helper.from_array(np.array([3, 3], "int64"), "i"),
                               numpy_helper.from_array(np.array([2, 2], "int64"), "b")],
                        opset=18)
    with pytest.raises(FrontendError, match=r"Col2Im node 'c': input \[1, 4, 7\] must be "
                                            r"\(N, C \* 4, 4\)"):
        run_graph(model, {})
    node = helper.make_node("ReverseSequence", ["x", "l"], ["y"], time_axis=1, batch_axis=1,
                            name="r")
    model = graph_model([node], inputs=[helper.make_tensor_value_info("x", TP.FLOAT, [2, 2]),
                                        helper.make_tensor_value_info("l", TP.INT64, [2])])
    with pytest.raises(FrontendError, match="ReverseSequence node 'r': time_axis and "
                                            "batch_axis must differ"):
        run_graph(model, {})


@pytest.mark.parametrize("block, attrs, bad", [
    ([0, 1], {}, r"block_shape \[0, 1\] must hold 2 values >= 1"),
    ([1, 1], {"strides": [0, 1]}, r"strides \[0, 1\] must hold 2 values >= 1"),
    ([1, 1], {"dilations": [1]}, r"dilations \[1\] must hold 2 values >= 1"),
    ([1, 1], {"pads": [0, -1, 0, 0]}, r"pads \[0, -1, 0, 0\] must hold 4 values >= 0")])
def test_col2im_refuses_zero_blocks_and_strides(block, attrs, bad):
    """A zero block or stride once divided by zero (ZeroDivisionError, no node named)."""
    node = helper.make_node("Col2Im", ["x", "i", "b"], ["y"], name="c", **attrs)
    model = graph_model([node], inputs=[helper.make_tensor_value_info("x", TP.FLOAT, [1, 4, 16])],
                        inits=[numpy_helper.from_array(np.array([4, 4], "int64"), "i"),
                               numpy_helper.from_array(np.array(block, "int64"), "b")],
                        opset=18)
    with pytest.raises(FrontendError, match="Col2Im node 'c': " + bad):
        run_graph(model, {})


def test_bit_shift_signed_and_out_of_range_against_numpy():
    x = np.array([-8, 4, -1, 100, -128, 7], "int8")
    y = np.array([1, 2, 8, -1, 3, 0], "int8")
    for way in ("LEFT", "RIGHT"):
        node = helper.make_node("BitShift", ["x", "y"], ["z"], direction=way)
        model = graph_model([node], opset=28, outputs=("z",), inputs=[
            helper.make_tensor_value_info("x", TP.INT8, [6]),
            helper.make_tensor_value_info("y", TP.INT8, [6])])
        bad = (y < 0) | (y >= 8)
        if way == "LEFT":
            want = np.where(bad, 0, (x.astype(np.int64) << np.clip(y, 0, 7)).astype(np.int8))
        else:
            want = np.where(bad, np.where(x < 0, -1, 0), x >> np.clip(y, 0, 7))
        np.testing.assert_array_equal(run_graph(model, {"x": x, "y": y})[0], want.astype("int8"))


def test_trigonometric_and_swish():
    x, unit = rand(RNG, 3, 5), rand(RNG, 3, 5, lo=-0.95, hi=0.95)
    cases = [node_case(op.lower(), op, {"x": unit if op in ("Asin", "Acos", "Atanh") else x})
             for op in ("Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh")]
    cases.append(node_case("acosh", "Acosh", {"x": np.abs(x) + 1}))
    check(cases, opset=9)
    check([node_case("swish", "Swish", {"x": x}, alpha=0.7)], opset=24)


def test_lp_pools_eye_like_max_unpool():
    x = rand(RNG, 1, 2, 6, 7)
    cases = [node_case("lp2", "LpPool", {"x": x}, kernel_shape=[2, 3], strides=[2, 1],
                       pads=[1, 0, 0, 1], tol=SUMS),
             node_case("lp3", "LpPool", {"x": x}, kernel_shape=[3, 3], p=3, tol=SUMS),
             node_case("lp1d", "LpPool", {"x": rand(RNG, 1, 2, 9)}, kernel_shape=[3], p=1,
                       tol=SUMS),
             node_case("glp", "GlobalLpPool", {"x": x}, p=3, tol=SUMS),
             node_case("eye", "EyeLike", {"x": rand(RNG, 3, 5)}, k=1),
             node_case("eye_int", "EyeLike", {"x": rand(RNG, 4, 2)}, k=-1, dtype=TP.INT32)]
    check(cases, opset=18)
    pooled = np.array([[[[5.0, 7.0], [13.0, 15.0]]]], "float32")
    index = np.array([[[[5, 7], [13, 15]]]], "int64")
    check([node_case("unpool", "MaxUnpool", {"x": pooled}, inits={"i": index},
                     kernel_shape=[2, 2], strides=[2, 2])], opset=11)


def test_cum_prod_against_numpy():
    x = rand(RNG, 3, 4, lo=0.5, hi=1.5)
    for exclusive, reverse in ((0, 0), (1, 0), (0, 1), (1, 1)):
        node = helper.make_node("CumProd", ["x", "a"], ["y"], exclusive=exclusive,
                                reverse=reverse)
        model = graph_model([node], inputs=[helper.make_tensor_value_info("x", TP.FLOAT, [3, 4])],
                            inits=[numpy_helper.from_array(np.array(1, "int64"), "a")], opset=26)
        v = np.flip(x, 1) if reverse else x
        want = np.cumprod(v, 1)
        if exclusive:
            want = np.concatenate([np.ones((3, 1), "float32"), want[:, :-1]], 1)
        want = np.flip(want, 1) if reverse else want
        np.testing.assert_allclose(run_graph(model, {"x": x})[0], want, rtol=1e-5)


def _run_time_model(op, inputs, n_out=1, opset=18, **attrs):
    """One node whose every input is a graph input (values known only at run time)."""
    node = helper.make_node(op, list(inputs), [f"y{k}" for k in range(n_out)], **attrs)
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype),
                                           list(v.shape)) for n, v in inputs.items()]
    return graph_model([node], inputs=infos, outputs=[f"y{k}" for k in range(n_out)],
                       opset=opset)


@pytest.mark.slow
def test_run_time_window_size_crop_pad_shape_stft_step_and_grid_size():
    from _onnx_util import compare, run_ort, run_vm

    runs = [("HannWindow", {"n": np.array(7, "int64")}, {}),
            ("BlackmanWindow", {"n": np.array(6, "int32")}, {"periodic": 0}),
            ("HammingWindow", {"n": np.array(5, "int64")}, {}),
            ("CenterCropPad", {"x": rand(RNG, 5, 4, 3), "s": np.array([3, 7], "int64")},
             {"axes": [0, 1]}),
            ("STFT", {"x": rand(RNG, 2, 40, 1), "step": np.array(6, "int64"),
                      "w": np.hanning(16).astype("float32")}, {}),
            ("AffineGrid", {"t": rand(RNG, 2, 2, 3), "s": np.array([2, 3, 4, 5], "int64")},
             {"align_corners": 1}),
            ("AffineGrid", {"t": rand(RNG, 2, 2, 3), "s": np.array([2, 3, 1, 5], "int64")},
             {"align_corners": 0}),
            ("AffineGrid", {"t": rand(RNG, 1, 3, 4), "s": np.array([1, 1, 2, 3, 4], "int64")},
             {})]
    for op, inputs, attrs in runs:
        model = _run_time_model(op, inputs, opset=20, **attrs)
        compare(op, run_vm(model, list(inputs.values())), run_ort(model, inputs), SUMS)


def test_non_zero_and_compress_on_the_vm():
    from _onnx_util import compare, run_ort, run_vm

    mask = rand(RNG, 3, 4, lo=-1, hi=1) > 0.2
    runs = [("NonZero", {"x": (rand(RNG, 2, 3, 4) > 0.5).astype("float32")}, {}),
            ("NonZero", {"x": np.zeros((3, 2), "int32")}, {}),
            ("NonZero", {"x": mask}, {}),
            ("Compress", {"x": rand(RNG, 3, 4), "c": np.array([True, False, True])},
             {"axis": 0}),
            ("Compress", {"x": rand(RNG, 3, 4), "c": np.array([False, True, True, False])},
             {"axis": -1}),
            ("Compress", {"x": rand(RNG, 2, 3), "c": np.array([0, 1, 0, 1, 1], bool)}, {})]
    for op, inputs, attrs in runs:
        model = _run_time_model(op, inputs, opset=13, **attrs)
        model.graph.output[0].type.tensor_type.elem_type = (
            TP.INT64 if op == "NonZero" else TP.FLOAT)
        compare(op, run_vm(model, list(inputs.values())), run_ort(model, inputs))
    model = _run_time_model("Compress", {"x": rand(RNG, 2), "c": np.ones(3, bool)}, axis=0)
    with pytest.raises(FrontendError, match="condition has 3 values, more than the 2"):
        run_vm(model, [])


def test_resize_keep_aspect_ratio_policy_known_and_run_time_sizes():
    from _onnx_util import compare, run_ort, run_vm

    x = rand(RNG, 1, 2, 4, 6)
    for policy in ("not_larger", "not_smaller"):
        for mode in ("nearest", "linear"):
            sizes = np.array([7, 5], "int64")
            attrs = dict(mode=mode, keep_aspect_ratio_policy=policy, axes=[2, 3])
            check([node_case(f"{policy}_{mode}", "Resize", {"x": x},
                             inits={"roi": np.zeros(0, "float32"),
                                    "sc": np.zeros(0, "float32"), "sz": sizes}, **attrs)],
                  opset=18)
            node = helper.make_node("Resize", ["x", "", "", "sz"], ["y"], **attrs)
            model = graph_model([node], opset=18, inputs=[
                helper.make_tensor_value_info("x", TP.FLOAT, list(x.shape)),
                helper.make_tensor_value_info("sz", TP.INT64, [2])])
            compare(policy, run_vm(model, [x, sizes]), run_ort(model, {"x": x, "sz": sizes}))


def test_resize_tf_crop_and_resize():
    from _onnx_util import compare, run_ort, run_vm

    x = rand(RNG, 1, 2, 5, 6)
    roi = np.array([0.1, 0.3, 0.9, 1.2], "float32")  # (h0, w0, h1, w1): w leaves the input
    for mode in ("linear", "nearest"):
        attrs = dict(mode=mode, coordinate_transformation_mode="tf_crop_and_resize",
                     axes=[2, 3], extrapolation_value=-7.0)
        check([node_case(f"crop_{mode}", "Resize", {"x": x},
                         inits={"roi": roi, "sc": np.zeros(0, "float32"),
                                "sz": np.array([4, 1], "int64")}, tol=SUMS, **attrs)],
              opset=18)
        node = helper.make_node("Resize", ["x", "roi", "", "sz"], ["y"], **attrs)
        model = graph_model([node], opset=18, inputs=[
            helper.make_tensor_value_info("x", TP.FLOAT, list(x.shape)),
            helper.make_tensor_value_info("roi", TP.FLOAT, [4]),
            helper.make_tensor_value_info("sz", TP.INT64, [2])])
        feeds = {"x": x, "roi": roi, "sz": np.array([3, 7], "int64")}
        compare(mode, run_vm(model, list(feeds.values())), run_ort(model, feeds), SUMS)


def test_resize_antialias():
    from _onnx_util import compare, run_ort, run_vm

    x = rand(RNG, 1, 2, 9, 8)
    cases = []
    for mode in ("linear", "cubic"):
        for coord, exclude in (("half_pixel", 0), ("pytorch_half_pixel", 1),
                               ("asymmetric", 0), ("align_corners", 0)):
            for scales in ((1.0, 1.0, 0.4, 0.6), (1.0, 1.0, 1.5, 0.5)):
                tag = f"{mode}_{coord}_{exclude}_{scales[2]}"
                cases.append(node_case(tag, "Resize", {"x": x}, tol=SUMS,
                                       inits={"roi": np.zeros(0, "float32"),
                                              "sc": np.array(scales, "float32")},
                                       mode=mode, antialias=1, exclude_outside=exclude,
                                       coordinate_transformation_mode=coord))
    check(cases, opset=18)
    node = helper.make_node("Resize", ["x", "", "", "sz"], ["y"], mode="cubic", antialias=1,
                            axes=[2, 3])
    model = graph_model([node], opset=18, inputs=[
        helper.make_tensor_value_info("x", TP.FLOAT, list(x.shape)),
        helper.make_tensor_value_info("sz", TP.INT64, [2])])
    feeds = {"x": x, "sz": np.array([4, 3], "int64")}
    compare("run-time sizes", run_vm(model, list(feeds.values())), run_ort(model, feeds), SUMS)


def test_stft_of_a_signal_whose_batch_and_length_are_known_only_at_run_time():
    """A speech model exported with dynamic axes: the STFT's signal is (?, ?); the frame
    count follows the length of each call (none for a signal shorter than a frame)."""
    from _onnx_util import run_ort

    window = np.hanning(16).astype("float32")
    node = helper.make_node("STFT", ["s", "step", "w"], ["y"])
    model = graph_model([node], inputs=[helper.make_tensor_value_info("s", TP.FLOAT,
                                                                      ["batch", "samples"])],
                        inits=[numpy_helper.from_array(np.array(6, "int64"), "step"),
                               numpy_helper.from_array(window, "w")], opset=17)
    mod, params = relay.frontend.from_onnx(model)
    assert not mod["main"].params[0].checked_type.is_static
    run = ember.compile(model)
    for batch, samples in ((2, 40), (1, 16), (3, 57), (1, 23)):
        signal = rand(RNG, batch, samples)
        count = 1 + (samples - 16) // 6
        frames = np.stack([signal[:, i * 6:i * 6 + 16] * window for i in range(count)], 1)
        want = _as_onnx(np.fft.rfft(frames.astype("float64"), axis=-1))
        got = run(signal)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(signal.shape))
        np.testing.assert_allclose(got, run_ort(model, {"s": signal})[0], rtol=1e-4, atol=1e-4)
    assert run(rand(RNG, 1, 10)).shape == (1, 0, 9, 2)  # shorter than one frame: no frame


def test_dft_over_a_known_axis_of_an_input_with_a_run_time_batch():
    from _onnx_util import run_ort

    model = _dft_model(["batch", 8, 3, 1], axis=1)
    run = ember.compile(model)
    for batch in (1, 4):
        x = rand(RNG, batch, 8, 3, 1)
        want = _as_onnx(np.fft.fft(x[..., 0].astype("float64"), axis=1))
        np.testing.assert_allclose(run(x), want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(run(x), run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)
    with pytest.raises(OpNotImplemented, match="transformed axis 1 .* known only at run time"):
        relay.frontend.from_onnx(_dft_model([2, "n", 3, 1], axis=1))


def test_stft_of_a_complex_signal_with_a_window_of_zero_taps():
    """The window's zero taps at both ends are not gathered and its values fold into the
    DFT's matrix; a complex signal's imaginary part goes through its own product."""
    signal = rand(RNG, 2, 40, 2)
    window = np.pad(np.hanning(11), (3, 2)).astype("float32")  # 16 taps, 5 of them zero
    node = helper.make_node("STFT", ["s", "step", "w"], ["y"], onesided=0)
    model = graph_model([node], inputs=[helper.make_tensor_value_info("s", TP.FLOAT, [2, 40, 2])],
                        inits=[numpy_helper.from_array(np.array(7, "int64"), "step"),
                               numpy_helper.from_array(window, "w")], opset=17)
    z = _as_complex(signal).astype("complex128")
    frames = np.stack([z[:, i * 7:i * 7 + 16] * window for i in range(4)], 1)
    want = _as_onnx(np.fft.fft(frames, axis=-1))
    np.testing.assert_allclose(run_graph(model, {"s": signal})[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("samples, step, length, match", [
    (1 << 20, 1, 32767, "frame_length 32767 would be a constant of shape"),
    (1 << 20, 1, 127, "the frame index table would be a constant of shape")])
def test_stft_whose_constants_would_be_huge_is_refused(samples, step, length, match):
    """A model's frame_length (or a step of 1 over a long signal) must not make the import
    build a DFT matrix or a frame table of billions of values: a clear error instead. (Lengths
    with a prime factor above 5 take the matrix; the others the FFT, whose table holds about
    2 values per point: the next test.)"""
    node = helper.make_node("STFT", ["s", "step", "", "n"], ["y"], name="big")
    model = graph_model([node], inputs=[helper.make_tensor_value_info("s", TP.FLOAT,
                                                                      [1, samples, 1])],
                        inits=[numpy_helper.from_array(np.array(step, "int64"), "step"),
                               numpy_helper.from_array(np.array(length, "int64"), "n")],
                        opset=17)
    with pytest.raises(FrontendError, match=f"STFT node 'big': {match}"):
        relay.frontend.from_onnx(model)


def test_stft_of_a_power_of_two_length_takes_the_fft_with_a_small_table():
    """frame_length 32768 (2^15) over a step of 1: no DFT matrix or frame table, one
    signal.frames_fft whose constant holds the twiddles (about 2 per point)."""
    node = helper.make_node("STFT", ["s", "step", "", "n"], ["y"], name="big")
    model = graph_model([node], inputs=[helper.make_tensor_value_info("s", TP.FLOAT,
                                                                      [1, 1 << 20, 1])],
                        inits=[numpy_helper.from_array(np.array(1, "int64"), "step"),
                               numpy_helper.from_array(np.array(1 << 15, "int64"), "n")],
                        opset=17)
    mod, _ = relay.frontend.from_onnx(model)
    calls = [e for e in ember.ir.post_order(mod["main"].body)
             if isinstance(e, ember.ir.expr.Call) and getattr(e.op, "name", "") ==
             "signal.frames_fft"]
    assert len(calls) == 1
    assert calls[0].args[1].data.numpy().size < 3 * (1 << 15) + (1 << 15)

"""Indexing, sorting, Einsum and Resize against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import LOOSE, SUMS, check, node_case, rand
from hypothesis import given, settings
from hypothesis import strategies as st

I64 = "int64"


def test_gathers():
    rng = np.random.default_rng(0)
    x = rand(rng, 4, 5, 3)
    cases = [
        node_case("gather", "Gather", {"x": x}, inits={"i": np.array([[0, -1], [2, 3]], I64)}),
        node_case("gather_ax1", "Gather", {"x": x, "i": np.array([4, 0, -2], I64)}, axis=1),
        node_case("gather_scalar", "Gather", {"x": x}, inits={"i": np.array(-1, I64)}, axis=2),
        node_case("gather_int32", "Gather", {"x": x, "i": np.array([1, 1], "int32")}),
        node_case("gel", "GatherElements", {"x": x,
                                            "i": rng.integers(-5, 5, (4, 2, 3)).astype(I64)},
                  axis=1),
        node_case("gel0", "GatherElements", {"x": rand(rng, 3, 3),
                                             "i": rng.integers(0, 3, (2, 3)).astype(I64)}),
        node_case("gnd", "GatherND", {"x": x, "i": np.array([[0, 1], [3, -1]], I64)}),
        node_case("gnd_full", "GatherND", {"x": x, "i": np.array([[[0, 1, 2]], [[3, 4, 0]]],
                                                                 I64)}),
        node_case("gnd_batch", "GatherND", {"x": x, "i": np.array([[1], [0], [4], [2]], I64)},
                  batch_dims=1),
    ]
    check(cases, opset=13)


def test_scatter_elements_reductions():
    rng = np.random.default_rng(1)
    data = rand(rng, 4, 5)
    idx = np.array([[1, 0, 3, -1, 2], [0, 2, 1, 3, 3]], I64)
    upd = rand(rng, 2, 5)
    unique = np.array([[1, 0, 3, 2, 2], [0, 2, 1, 3, 3]], I64)
    cases = [node_case("scatter", "ScatterElements", {"d": data, "i": unique, "u": upd}),
             node_case("scatter_ax1", "ScatterElements",
                       {"d": data, "i": np.array([[4, 0], [1, 2], [3, 3], [0, 1]], I64),
                        "u": rand(rng, 4, 2)}, axis=1, reduction="add"),
             node_case("scatter_add", "ScatterElements", {"d": data, "i": idx, "u": upd},
                       reduction="add"),
             node_case("scatter_mul", "ScatterElements", {"d": data, "i": idx, "u": upd},
                       reduction="mul")]
    check(cases, opset=16)
    cases18 = [node_case(f"scatter_{r}", "ScatterElements", {"d": data, "i": idx, "u": upd},
                         reduction=r) for r in ("max", "min")]
    check(cases18, opset=18)


def test_topk_and_cumsum():
    rng = np.random.default_rng(2)
    ties = np.array([[1, 3, 3, 2, 3, 0], [2, 2, 2, 2, 1, 5]], "float32")
    k = {"k": np.array([3], I64)}
    cases = [node_case("topk", "TopK", {"x": rand(rng, 3, 7)}, n_out=2, inits=k),
             node_case("topk_ties", "TopK", {"x": ties}, n_out=2, inits=k),
             node_case("topk_small", "TopK", {"x": ties}, n_out=2, inits=k, largest=0),
             node_case("topk_ax0", "TopK", {"x": rand(rng, 5, 2, 3)}, n_out=2,
                       inits={"k": np.array([2], I64)}, axis=0),
             node_case("cumsum", "CumSum", {"x": rand(rng, 3, 6)},
                       inits={"a": np.array(1, I64)}, tol=SUMS),
             node_case("cumsum_excl_rev", "CumSum", {"x": rand(rng, 3, 6)},
                       inits={"a": np.array(-1, "int32")}, exclusive=1, reverse=1, tol=SUMS),
             node_case("cumsum_int", "CumSum", {"x": rand(rng, 4, 3, dtype="int64")},
                       inits={"a": np.array(0, I64)}, reverse=1)]
    check(cases, opset=13)


EINSUMS = {  # equation -> operand shapes
    "ij,jk->ik": [(3, 4), (4, 5)],
    "bij,bjk->bik": [(2, 3, 4), (2, 4, 5)],
    "bhqd,bhkd->bhqk": [(2, 3, 4, 5), (2, 3, 6, 5)],
    "bhqk,bhkd->bhqd": [(2, 3, 4, 6), (2, 3, 6, 5)],
    "bsd,hd->bsh": [(2, 3, 4), (5, 4)],
    "ij->ji": [(3, 4)],
    "ijk->k": [(2, 3, 4)],
    "i,i->": [(5,), (5,)],
    "i,j->ij": [(3,), (4,)],
    "...ij,...jk->...ik": [(2, 3, 4), (2, 4, 5)],
    "bij,jk": [(2, 3, 4), (4, 5)],
    "ij,jk,kl->il": [(2, 3), (3, 4), (4, 2)],
    "bnm,bm->bn": [(2, 3, 4), (2, 4)],
    "abc,cd->abd": [(2, 3, 4), (4, 5)],
    "ij,ij->i": [(3, 4), (3, 4)],
}


def test_einsum_patterns():
    rng = np.random.default_rng(3)
    cases = []
    for k, (eq, shapes) in enumerate(EINSUMS.items()):
        inputs = {f"x{i}": rand(rng, *s) for i, s in enumerate(shapes)}
        cases.append(node_case(f"einsum{k}", "Einsum", inputs, equation=eq, tol=SUMS))
    check(cases, opset=12)


RESIZE_MODES = [
    ("nearest", "half_pixel", "round_prefer_floor"),
    ("nearest", "asymmetric", "floor"),
    ("nearest", "align_corners", "round_prefer_ceil"),
    ("nearest", "tf_half_pixel_for_nn", "ceil"),
    ("linear", "half_pixel", None),
    ("linear", "align_corners", None),
    ("linear", "pytorch_half_pixel", None),
    ("linear", "asymmetric", None),
    ("cubic", "half_pixel", None),
    ("cubic", "align_corners", None),
]


def _resize_case(name, x, mode, coord, nearest, scales=None, sizes=None, opset=13, **extra):
    attrs = {"mode": mode, "coordinate_transformation_mode": coord, **extra}
    if nearest:
        attrs["nearest_mode"] = nearest
    inits = {"roi": np.zeros(0, "float32"),
             "scales": np.array(scales if scales else [], "float32")}
    order = ["x", "roi", "scales"]
    if sizes is not None:
        inits["sizes"] = np.array(sizes, I64)
        order.append("sizes")
        if opset >= 13:
            order[2] = ""
            del inits["scales"]
    return node_case(name, "Resize", {"x": x}, inits=inits, order=order, tol=LOOSE, **attrs)


@pytest.mark.parametrize("opset", [11, 13])
def test_resize_modes(opset):
    """Every mode at opset 11 (roi and scales required inputs, possibly empty); at 13 (both
    optional) the input forms with a few modes."""
    rng = np.random.default_rng(4)
    x = rand(rng, 1, 2, 4, 5)
    cases = []
    modes = RESIZE_MODES if opset == 11 else RESIZE_MODES[::3]
    for k, (mode, coord, nearest) in enumerate(modes):
        cases.append(_resize_case(f"up{k}", x, mode, coord, nearest, scales=[1, 1, 2, 1.5],
                                  opset=opset))
        cases.append(_resize_case(f"size{k}", x, mode, coord, nearest, sizes=[1, 2, 3, 7],
                                  opset=opset))
    cases.append(_resize_case("cubic_excl", x, "cubic", "half_pixel", None,
                              scales=[1, 1, 1.7, 0.6], opset=opset, exclude_outside=1,
                              cubic_coeff_a=-0.5))
    cases.append(_resize_case("ncw", rand(rng, 1, 2, 6), "linear", "half_pixel", None,
                              scales=[1, 1, 2.5], opset=opset))
    check(cases, opset=opset)


def test_resize_axes_opset18():
    rng = np.random.default_rng(5)
    x = rand(rng, 1, 2, 4, 5)
    case = node_case("axes", "Resize", {"x": x}, inits={"s": np.array([2, 0.8], "float32")},
                     order=["x", "", "s"], mode="linear", axes=[2, 3], tol=LOOSE)
    check([case], opset=18)


@settings(max_examples=3, deadline=None, derandomize=True)
@given(data=st.data())
def test_gather_elements_law(data):
    _gather_elements_law(data)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_gather_elements_law_wide(data):
    _gather_elements_law(data)


def _gather_elements_law(data):
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    ishape = [data.draw(st.integers(1, d)) if i != axis % len(shape) else data.draw(
        st.integers(1, 6)) for i, d in enumerate(shape)]
    n = shape[axis]
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    idx = rng.integers(-n, n, ishape).astype(I64)
    check([node_case("gel", "GatherElements", {"x": rand(rng, *shape), "i": idx}, axis=axis)],
          opset=13)

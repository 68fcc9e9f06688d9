"""Reductions against onnxruntime: axes as an attribute (opsets 11 and 13, ReduceSum 11) and
as an input (ReduceSum 13, every reduction 18), keepdims, noop_with_empty_axes, ArgMax/ArgMin.
Sums compare with rtol/atol 1e-4 (``SUMS``)."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import SUMS, check, node_case, rand
from hypothesis import given, settings
from hypothesis import strategies as st

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


def _axes_input_since(op: str) -> int:
    return 13 if op == "ReduceSum" else 18


def reduce_case(name: str, op: str, x: np.ndarray, axes: list[int] | None, opset: int,
                **attrs) -> object:
    if axes is None or opset < _axes_input_since(op):
        if axes is not None:
            attrs["axes"] = axes
        return node_case(name, op, {"x": x}, tol=SUMS, **attrs)
    return node_case(name, op, {"x": x}, inits={"a": np.array(axes, "int64")}, tol=SUMS,
                     **attrs)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_reductions_across_opsets(opset):
    rng = np.random.default_rng(opset)
    x = rand(rng, 2, 3, 4, lo=0.2, hi=1.5)
    cases = []
    for op in REDUCE:
        short = op[6:].lower()
        cases += [reduce_case(f"{short}_ax", op, x, [1], opset),
                  reduce_case(f"{short}_neg", op, x, [-1, 0], opset, keepdims=0),
                  reduce_case(f"{short}_all", op, x, None, opset)]
    check(cases, opset=opset)


def test_noop_with_empty_axes():
    rng = np.random.default_rng(0)
    x = rand(rng, 3, 4)
    cases = [node_case("sum_noop", "ReduceSum", {"x": x}, noop_with_empty_axes=1),
             node_case("sum_all", "ReduceSum", {"x": x}, tol=SUMS),
             node_case("max_noop", "ReduceMax", {"x": x}, noop_with_empty_axes=1)]
    check(cases[:2], opset=13)
    check(cases, opset=18)


def test_arg_reductions():
    rng = np.random.default_rng(1)
    x = np.array([[1, 3, 3, 2], [5, 5, 0, 5], [0, 1, 2, 3]], "float32")
    y = rand(rng, 2, 3, 4)
    cases = [node_case("argmax", "ArgMax", {"x": x}, axis=1),
             node_case("argmax_last", "ArgMax", {"x": x}, axis=1, select_last_index=1),
             node_case("argmin", "ArgMin", {"x": y}, axis=-1, keepdims=0),
             node_case("argmin_last", "ArgMin", {"x": x}, axis=0, select_last_index=1),
             node_case("argmax_int", "ArgMax", {"x": rand(rng, 3, 5, dtype="int32")},
                       keepdims=0)]
    check(cases, opset=13)


LAW = {"shape": st.lists(st.integers(1, 4), min_size=1, max_size=4), "data": st.data(),
       "op": st.sampled_from(REDUCE), "keep": st.sampled_from([0, 1])}


@settings(max_examples=3, deadline=None, derandomize=True)
@given(**LAW)
def test_reduce_law(shape, data, op, keep):
    """Any subset of axes (negative or not), with and without keepdims."""
    _reduce_law(shape, data, op, keep)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(**LAW)
def test_reduce_law_wide(shape, data, op, keep):
    _reduce_law(shape, data, op, keep)


def _reduce_law(shape, data, op, keep):
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), max_size=len(shape),
                              unique_by=lambda a: a % len(shape)))
    rng = np.random.default_rng(0)
    x = rand(rng, *shape, lo=0.2, hi=1.5)
    check([reduce_case("r", op, x, axes or None, 18, keepdims=keep)], opset=18)

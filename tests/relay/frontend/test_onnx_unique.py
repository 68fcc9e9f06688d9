"""ONNX Unique against onnxruntime (run on the VM: the output length is known at run time)."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import compare, feeds, make_model, node_case, rand, run_ort, run_vm

from ember import relay
from ember.runtime.errors import FrontendError, OpNotImplemented

RNG = np.random.default_rng(7)


def _check_vm(cases, opset=11):
    """Every case through one VM build; each case's four outputs against onnxruntime."""
    model = make_model(cases, opset)
    fed = feeds(cases)
    got, want = run_vm(model, list(fed.values())), run_ort(model, fed)
    for k, c in enumerate(cases):
        compare(c.name, got[4 * k:4 * k + 4], want[4 * k:4 * k + 4])


def test_unique_flattened_and_along_an_axis():
    ints = RNG.integers(0, 4, (3, 4)).astype("int64")
    rows = np.array([[2, 1, 2], [0, 5, 0], [2, 1, 2], [0, 5, 1]], "float32")
    cases = [node_case("flat", "Unique", {"x": ints}, n_out=4),
             node_case("flat_unsorted", "Unique", {"x": ints}, n_out=4, sorted=0),
             node_case("rows", "Unique", {"x": rows}, n_out=4, axis=0),
             node_case("cols_unsorted", "Unique", {"x": rows}, n_out=4, axis=-1, sorted=0),
             node_case("slices", "Unique", {"x": np.repeat(rand(RNG, 2, 3, 1), 2, -1)},
                       n_out=4, axis=2),
             node_case("floats_1d", "Unique", {"x": np.array([1.5, -2, 1.5, 0, -2], "float32")},
                       n_out=4, sorted=0),
             node_case("all_same", "Unique", {"x": np.full((5,), 3, "int64")}, n_out=4),
             node_case("all_distinct", "Unique", {"x": np.arange(6, 0, -1).astype("float32")},
                       n_out=4)]
    _check_vm(cases)


def test_unique_bad_axis_names_the_node():
    model = make_model([node_case("u", "Unique", {"x": rand(RNG, 2, 3)}, n_out=4, axis=2)], 11)
    with pytest.raises(FrontendError, match="Unique node 'u__Unique': axis 2 is out of range"):
        relay.frontend.from_onnx(model)


def test_unique_of_a_symbolic_length_is_refused_naming_the_node():
    model = make_model([node_case("u", "Unique", {"x": rand(RNG, 4)}, n_out=4)], 11,
                       symbolic={"x": ["n"]})
    with pytest.raises(OpNotImplemented, match="Unique node 'u__Unique': input 0 \\(X\\) has a "
                                               "dynamic shape"):
        relay.frontend.from_onnx(model)

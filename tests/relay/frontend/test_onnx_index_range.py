"""Indices out of range in Gather, GatherElements, GatherND, ScatterElements and ScatterND: an
error naming the node, the element and the range (onnxruntime raises too), never a wrapped or
clamped value; constant ones at import, run-time ones when the model runs, after which the
model still runs good inputs. In-range negative indices agree with onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import graph_model, run_ort
from onnx import TensorProto, helper, numpy_helper

import ember
from ember.relay.frontend import from_onnx
from ember.runtime.errors import FrontendError, TVMError

F, I = TensorProto.FLOAT, TensorProto.INT64
DATA = np.arange(12, dtype=np.float32).reshape(3, 4)

# op -> (attrs, indices shape, updates shape or None, good indices, bad indices, bad value, axis)
CASES = {
    "Gather": ({"axis": 1}, [2], None, [-4, 3], [1, 4], 4, 1),
    "GatherElements": ({"axis": 0}, [1, 4], None, [[2, -3, 0, -1]], [[0, 0, -4, 0]], -4, 0),
    "GatherND": ({}, [2, 2], None, [[2, 3], [-1, -4]], [[0, 1], [2, 4]], 4, 1),
    "ScatterElements": ({"axis": 1}, [3, 1], [3, 1], [[0], [-1], [3]], [[0], [9], [1]], 9, 1),
    "ScatterND": ({}, [1, 1], [1, 4], [[-3]], [[3]], 3, 0),
}


def _model(op: str, dims: list[int | str] | None = None):
    attrs, ishape, ushape, *_ = CASES[op]
    inputs = [helper.make_tensor_value_info("x", F, dims or [3, 4]),
              helper.make_tensor_value_info("i", I, ishape)]
    names = ["x", "i"]
    if ushape is not None:
        inputs.append(helper.make_tensor_value_info("u", F, ushape))
        names.append("u")
    node = helper.make_node(op, names, ["y"], name=f"my_{op.lower()}", **attrs)
    return graph_model([node], inputs, opset=16)


def _feeds(op: str, indices) -> dict[str, np.ndarray]:
    ushape = CASES[op][2]
    feeds = {"x": DATA, "i": np.array(indices, np.int64)}
    if ushape is not None:
        feeds["u"] = np.full(ushape, -1.0, np.float32)
    return feeds


@pytest.mark.parametrize("dims", [None, ["n", "m"]], ids=["static", "symbolic"])
@pytest.mark.parametrize("op", sorted(CASES))
def test_run_time_index_out_of_range_raises_and_the_model_stays_usable(op, dims):
    *_, good, bad, value, axis = CASES[op]
    model = _model(op, dims)
    with pytest.raises(Exception, match="(?i)out of|invalid ind"):  # onnxruntime raises too
        run_ort(model, _feeds(op, bad))
    compiled = ember.compile(model)
    want = run_ort(model, _feeds(op, good))[0]
    np.testing.assert_array_equal(compiled(**_feeds(op, good)), want)
    size = DATA.shape[axis]
    with pytest.raises(TVMError, match=rf"{op} node 'my_{op.lower()}': index {value} \(element "
                                       rf"\d of the indices, flat\) is out of range for axis "
                                       rf"{axis} of data \(size {size}\): indices must be in "
                                       rf"\[-{size}, {size - 1}\]"):
        compiled(**_feeds(op, bad))
    np.testing.assert_array_equal(compiled(**_feeds(op, good)), want)


@pytest.mark.parametrize("op", sorted(CASES))
def test_constant_index_out_of_range_fails_at_import(op):
    attrs, ishape, ushape, _, bad, value, axis = CASES[op]
    inputs = [helper.make_tensor_value_info("x", F, [3, 4])]
    names = ["x", "i"]
    inits = [numpy_helper.from_array(np.array(bad, np.int64), "i")]
    if ushape is not None:
        inits.append(numpy_helper.from_array(np.zeros(ushape, np.float32), "u"))
        names.append("u")
    node = helper.make_node(op, names, ["y"], name="const_idx", **attrs)
    model = graph_model([node], inputs, inits=inits, opset=16)
    with pytest.raises(FrontendError, match=rf"{op} node 'const_idx': index {value} \(element \d "
                                            rf"of the indices, flat\) is out of range for axis "
                                            rf"{axis} of data \(size {DATA.shape[axis]}\)"):
        from_onnx(model)


def test_in_range_constant_indices_import_without_a_check():
    """Constant indices are checked once, at import: no check_indices op in the program."""
    inputs = [helper.make_tensor_value_info("x", F, [3, 4])]
    inits = [numpy_helper.from_array(np.array([-1, 0], np.int64), "i")]
    model = graph_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], inputs,
                        inits=inits, opset=16)
    mod, _ = from_onnx(model)
    assert "check_indices" not in mod.astext()
    assert "check_indices" in from_onnx(_model("Gather"))[0].astext()

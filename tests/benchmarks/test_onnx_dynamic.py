"""benchmarks/_onnx_dynamic.py: a dynamic twin as an ONNX model with symbolic input
dimensions, whose reshapes follow the input, for onnxruntime. No C build: onnxruntime on the
dynamic model against onnxruntime on the static export of the same shape."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

from ember.relay.testing.onnx_export import export_onnx
from ember.relay.transform import InferType
from ember.runtime.errors import OpNotImplemented

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
bench = importlib.import_module("bench_dynamic")
dyn = importlib.import_module("_onnx_dynamic")
twins = importlib.import_module("_dynamic_twins")


def _session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("twin", ["transformer", "mlp", "segformer"])  # segformer: a Resize
def test_the_dynamic_model_equals_the_static_export_at_a_shape_not_exported(twin):
    t = bench.TWINS[twin]
    zoo = next(iter(bench.zoo_models([t.model], small=True)))
    mod = bench.twin_module(twin, zoo.mod)
    model = dyn.dynamic_onnx(mod, zoo.params, t.shapes[0], t.shapes[1])
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims if d.dim_param] == [f"d{a}" for a in t.axes]
    shape = t.shapes[2]  # neither of the two exports' shapes
    x = np.random.default_rng(0).uniform(-1, 1, size=shape).astype("float32")
    static = export_onnx(InferType()(twins.with_input_shape(mod, shape)), zoo.params)
    want = _session(static).run(None, {"data": x})[0]
    got = _session(model).run(None, {model.graph.input[0].name: x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_reshape_that_splits_into_two_moving_axes_is_named():
    graph = dyn._Graph(onnx)
    with pytest.raises(ValueError, match="splits one axis into several moving ones"):
        graph.target("x", (2, 3, 5), (3, 10), (4, 3, 7), (6, 14))


def test_a_twin_the_exporter_cannot_write_raises_its_error():
    import ember
    from ember import relay

    x = relay.var("x", shape=(relay.Any(), 4))
    mod = ember.IRModule.from_expr(relay.Function([x], relay.cumsum(x, axis=1)))
    with pytest.raises(OpNotImplemented, match="cumsum"):  # no ONNX translation
        dyn.dynamic_onnx(mod, {}, (1, 4), (2, 4))

"""from_onnx itself: where it lives, model sources (proto, file, external data), params and
freeze_params, old-style initializer inputs, the AOT executor, the text format, and the
ImportError without onnx."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from _onnx_util import compare, run_ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import ember
from ember import relay
from ember.runtime.errors import FrontendError

onnx = pytest.importorskip("onnx")


def _mlp(init_inputs: bool = False):
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((6, 8)).astype("float32"), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(8).astype("float32"), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((8, 3)).astype("float32"), "w2")
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TP.FLOAT, [2, 6])]
    if init_inputs:  # IR < 4 listed initializers among the graph inputs
        inputs += [helper.make_tensor_value_info(t.name, TP.FLOAT, list(t.dims))
                   for t in (w1, b1, w2)]
    graph = helper.make_graph(nodes, "mlp", inputs,
                              [helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])],
                              [w1, b1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = min(model.ir_version, 10)
    return model


def _x():
    return np.random.default_rng(1).standard_normal((2, 6)).astype("float32")


def _run(mod, params, executor="graph"):
    target = "llvm" if executor == "graph" else "llvm -executor=aot"
    factory = relay.build(mod, target, params=params)
    m = factory["default"](ember.cpu(0))
    m.set_input("x", _x())
    m.run()
    return [m.get_output(0).numpy()]


def test_frontend_is_part_of_relay():
    assert hasattr(relay, "frontend")
    assert relay.frontend.from_onnx is relay.frontend.onnx.from_onnx
    assert "from_onnx" in relay.frontend.__all__


def test_from_proto_file_and_bytes(tmp_path):
    model = _mlp()
    want = run_ort(model, {"x": _x()})
    path = tmp_path / "mlp.onnx"
    onnx.save(model, str(path))
    for source in (model, str(path), path, model.SerializeToString()):
        mod, params = relay.frontend.from_onnx(source)
        assert params == {}
        compare(f"source {type(source).__name__}", _run(mod, params), want, (1e-4, 1e-4))


def test_external_data_loads_from_the_model_directory(tmp_path):
    model, saved = _mlp(), _mlp()  # (saving moves the weights out of ``saved``)
    path = tmp_path / "ext.onnx"
    onnx.save_model(saved, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").exists()
    mod, params = relay.frontend.from_onnx(str(path))
    compare("external data", _run(mod, params), run_ort(model, {"x": _x()}), (1e-4, 1e-4))
    bare = onnx.load(str(path), load_external_data=False)
    with pytest.raises(FrontendError, match=r"initializer 'w1': the data is stored in an "
                                            r"external file \(weights.bin\)"):
        relay.frontend.from_onnx(bare)


def test_freeze_params_false_returns_params():
    model = _mlp()
    mod, params = relay.frontend.from_onnx(model, freeze_params=False)
    names = [p.name_hint for p in mod["main"].params]
    assert names == ["x", "w1", "b1", "w2"]
    assert sorted(params) == ["b1", "w1", "w2"]
    np.testing.assert_array_equal(params["w1"].numpy(),
                                  numpy_helper.to_array(model.graph.initializer[0]))
    compare("freeze_params=False", _run(mod, params), run_ort(model, {"x": _x()}), (1e-4, 1e-4))


def test_initializers_listed_as_inputs_are_not_user_inputs():
    mod, _ = relay.frontend.from_onnx(_mlp(init_inputs=True))
    assert [p.name_hint for p in mod["main"].params] == ["x"]


def test_aot_runs_an_imported_model():
    model = _mlp()
    mod, params = relay.frontend.from_onnx(model)
    compare("aot", _run(mod, params, "aot"), run_ort(model, {"x": _x()}), (1e-4, 1e-4))


def test_imported_module_round_trips_through_text():
    mod, _ = relay.frontend.from_onnx(_mlp())
    text = mod.astext(show_meta_data=True)
    parsed = relay.transform.InferType()(ember.parser.fromtext(text))
    ember.ir.assert_structural_equal(parsed, mod)


def test_without_onnx_the_error_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # makes `import onnx` raise ImportError
    with pytest.raises(ImportError, match=r"pip install 'ember\[onnx\]'"):
        relay.frontend.from_onnx("model.onnx")

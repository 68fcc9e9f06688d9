"""``ember.compile``: every kind of model in (IRModule, Relay text, .relay/.txt files, ONNX
through a stand-in importer), every executor, the automatic choice and its log line, and the
calling convention with its errors. Outputs are checked against numpy."""
from __future__ import annotations

import logging
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _api_models import DYNAMIC_TEXT, STATIC_TEXT, dense_model, dense_reference, if_model

import ember
from ember import relay
from ember.api.model import CompiledModel, ModelInputError, TensorSpec
from ember.testing import find_c_compiler

pytestmark = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
EXECUTORS = ["graph", "aot", "vm"]


def ones(*shape: int) -> np.ndarray:
    return np.ones(shape, "float32")


@pytest.mark.parametrize("executor", ["auto", *EXECUTORS])
def test_irmodule_with_params(executor: str) -> None:
    mod, params = dense_model()
    model = ember.compile(mod, executor=executor, params=params)
    assert isinstance(model, CompiledModel)
    assert model.executor == ("aot" if executor == "auto" else executor)
    assert model.inputs == (TensorSpec("x", (4, 16), "float32"),)
    assert model.outputs == (TensorSpec("output0", (4, 8), "float32"),)
    x = np.random.default_rng(1).standard_normal((4, 16)).astype("float32")
    out = model(x)
    assert isinstance(out, np.ndarray) and out.shape == (4, 8)
    np.testing.assert_allclose(out, dense_reference(x, params), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(model(x=x), out)


def test_sizes_a_shape_function_rejects_name_the_inputs() -> None:
    """Two symbolic batch axes that do not broadcast: ModelInputError naming both inputs and
    their sizes (not the VM's error), and the model stays usable."""
    model = ember.compile("""
        #[version = "0.0.5"]
        def @main(%x: Tensor[(?, 4), float32], %y: Tensor[(?, 4), float32]) {
          add(%x, %y)
        }""")
    with pytest.raises(ModelInputError, match=r"'x' float32\[3, 4\] \(declared float32\[\?, 4\], "
                       r"dynamic axes 0\); 'y' float32\[5, 4\].*cannot broadcast"):
        model(ones(3, 4), ones(5, 4))
    np.testing.assert_array_equal(model(ones(2, 4), ones(1, 4)), np.full((2, 4), 2, "float32"))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_relay_text_with_two_outputs(executor: str) -> None:
    model = ember.compile(STATIC_TEXT, executor=executor)
    x, y = -ones(2, 3), 2 * ones(2, 3)
    relu, total = model(x, y=y)  # several outputs: a list
    np.testing.assert_array_equal(relu, np.zeros((2, 3), "float32"))
    np.testing.assert_array_equal(total, ones(2, 3))
    assert [s.name for s in model.outputs] == ["output0", "output1"]


@pytest.mark.parametrize("suffix", [".relay", ".txt"])
def test_relay_text_files(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"model{suffix}"
    path.write_text(STATIC_TEXT)
    for model in (ember.compile(str(path)), ember.compile(path)):
        assert [s.name for s in model.inputs] == ["x", "y"]


def test_auto_picks_the_vm_for_dynamic_shapes_and_control_flow(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="ember"):
        dynamic = ember.compile(DYNAMIC_TEXT)
        branching = ember.compile(if_model())
        static = ember.compile(STATIC_TEXT)
    assert (dynamic.executor, branching.executor, static.executor) == ("vm", "vm", "aot")
    lines = [r.getMessage() for r in caplog.records if r.name == "ember"]
    assert len(lines) == 3  # once per compile
    assert lines[0] == "ember.compile: executor vm (input %x has type Tensor[(?, 3), float32])"
    assert lines[1].startswith("ember.compile: executor vm (found If:")
    assert lines[2] == "ember.compile: executor aot (static shapes and no control flow)"
    assert dynamic.inputs == (TensorSpec("x", (None, 3), "float32"),)
    for rows in (1, 5):  # any size in the dynamic dimension
        np.testing.assert_array_equal(dynamic(-ones(rows, 3)), np.zeros((rows, 3), "float32"))
    x = np.array([1.0, -2.0, 3.0], "float32")
    np.testing.assert_array_equal(branching(x, np.array(True)), [1, 0, 3])
    np.testing.assert_array_equal(branching(x, np.array(False)), -x)


def test_auto_makes_known_dynamic_values_static_first() -> None:
    """reshape by a constant tensor builds dyn.reshape; its value is known, so DynamicToStatic
    makes it static before the executor is chosen: AOT, not the VM."""
    x = relay.var("x", shape=(2, 6), dtype="float32")
    newshape = relay.const(np.array([3, 4], "int64"))
    model = ember.compile(ember.IRModule.from_expr(relay.Function(
        [x], relay.reshape(x, newshape=newshape))))
    assert model.executor == "aot"
    data = np.arange(12, dtype="float32").reshape(2, 6)
    np.testing.assert_array_equal(model(data), data.reshape(3, 4))


def test_explicit_executor_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="ember"):
        ember.compile(STATIC_TEXT, executor="graph")
    assert not [r for r in caplog.records if r.name == "ember"]


# ---------------------------------------------------------------- ONNX (stand-in importer)
@pytest.fixture
def fake_frontend(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any]]:
    """``ember.relay.frontend.from_onnx`` stand-in returning the dense model; records calls."""
    calls: list[tuple[Any, Any]] = []
    mod, params = dense_model()

    def from_onnx(model: Any, shape: Any = None, dtype: str = "float32", opset: Any = None,
                  freeze_params: bool = True) -> tuple[ember.IRModule, dict[str, Any]]:
        calls.append((model, shape))
        return mod, {k: ember.nd.array(v) for k, v in params.items()}

    module = types.ModuleType("ember.relay.frontend")
    module.from_onnx = from_onnx  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ember.relay.frontend", module)
    return calls


def test_onnx_model_and_path(fake_frontend: list[tuple[Any, Any]], tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from ember.relay.testing import onnx_twin

    proto = onnx_twin("mlp", num_classes=3, image_shape=(1, 2, 2))[0]
    path = tmp_path / "m.onnx"
    onnx.save(proto, str(path))
    _, params = dense_model()
    x = ones(4, 16)
    for model, shapes in ((proto, None), (str(path), {"x": (4, 16)}), (path, None)):
        compiled = ember.compile(model, input_shapes=shapes, executor="graph")
        np.testing.assert_allclose(compiled(x), dense_reference(x, params), rtol=1e-5)
    assert fake_frontend[0] == (proto, None)
    assert fake_frontend[1][0] == str(path)  # the frontend's one loader reads the file
    assert fake_frontend[1][1] == {"x": (4, 16)}


def test_onnx_without_an_importer(monkeypatch: pytest.MonkeyPatch) -> None:
    onnx = pytest.importorskip("onnx")
    monkeypatch.setitem(sys.modules, "ember.relay.frontend", None)
    with pytest.raises(ImportError, match="this ember has no ONNX importer"):
        ember.compile(onnx.ModelProto())


# ---------------------------------------------------------------- bad arguments
@pytest.mark.parametrize("kwargs, error, match", [
    ({"model": 42}, TypeError, "expected an ONNX model .* got int"),
    ({"model": "missing.onnx"}, FileNotFoundError, "missing.onnx: no such file"),
    ({"model": "missing.relay"}, FileNotFoundError, "no Relay text file 'missing.relay'"),
    ({"model": "model.json"}, ValueError, "'model.json' is neither Relay text nor a model file"),
    ({"model": STATIC_TEXT, "executor": "jit"}, ValueError, "executor must be 'auto'"),
    ({"model": STATIC_TEXT, "threads": 0}, ValueError, "threads must be a positive int, got 0"),
    ({"model": STATIC_TEXT, "threads": True}, TypeError, "threads must be a positive int"),
    ({"model": STATIC_TEXT, "input_shapes": {"x": (1,)}}, ValueError,
     "input_shapes applies to ONNX models"),
])
def test_bad_arguments(kwargs: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        ember.compile(**kwargs)


@pytest.fixture(scope="module")
def two_inputs() -> CompiledModel:
    return ember.compile(STATIC_TEXT, executor="graph")


@pytest.mark.parametrize("args, kwargs, match", [
    ((ones(2, 3),) * 3, {}, r"this model takes 2 input\(s\) \('x', 'y'\), got 3 positional"),
    ((ones(2, 3),), {"z": ones(2, 3)}, "no input named 'z'; this model's inputs are 'x', 'y'"),
    ((ones(2, 3),), {"x": ones(2, 3)}, "input 'x' given both by position and by name"),
    ((ones(2, 3),), {}, r"missing input\(s\) 'y'"),
    ((ones(2, 3), ones(3, 2)), {}, r"input 'y': expected float32\[2, 3\], got float32\[3, 2\]"),
    ((ones(2, 3), ones(2, 3, 1)), {}, (r"input 'y': expected float32\[2, 3\], got "
                                      r"float32\[2, 3, 1\]")),
    ((ones(2, 3).astype("float64"), ones(2, 3)), {},
     r"input 'x': expected float32\[2, 3\], got float64\[2, 3\]"),
    ((ones(2, 3), "abc"), {}, "input 'y': cannot convert str to float32"),
    ((), {"x": ones(2, 3), "z": ones(2, 3)}, "no input named 'z'; this model's inputs are"),
    ((), {"x": ones(2, 3), "y": ones(3, 2)}, r"input 'y': expected float32\[2, 3\], got "
                                             r"float32\[3, 2\]"),
])
def test_wrong_inputs_name_the_input(two_inputs: CompiledModel, args: tuple, kwargs: dict,
                                     match: str) -> None:
    with pytest.raises(ModelInputError, match=match):
        two_inputs(*args, **kwargs)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_inputs_all_given_by_name_take_the_one_call_path(executor: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    model = ember.compile(STATIC_TEXT, executor=executor)
    x, y = ones(2, 3), ones(2, 3) * -2
    want = model(x, y)
    model(x, y)  # a VM model's context has its one-C-call form from its second call on
    ctx = model._pool.acquire()
    model._pool.release(ctx)
    assert ctx.native is not None
    run, seen = ctx.native.run, []
    monkeypatch.setattr(ctx.native, "run", lambda args: seen.append(args) or run(args))
    monkeypatch.setattr(model, "_call_checked", None)  # not taken: calling None would raise
    got = model(y=y, x=x)
    assert len(seen) == 1 and seen[0][0] is x and seen[0][1] is y
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_lists_take_the_input_dtype(two_inputs: CompiledModel) -> None:
    relu, total = two_inputs([[1, -1, 2]] * 2, ember.nd.array(ones(2, 3)))
    np.testing.assert_array_equal(relu, [[1, 0, 2]] * 2)
    np.testing.assert_array_equal(total, [[2, 0, 3]] * 2)


def test_dynamic_dims_still_check_rank_and_dtype() -> None:
    model = ember.compile(DYNAMIC_TEXT)
    with pytest.raises(ModelInputError, match=r"expected float32\[\?, 3\], got float32\[2, 4\]"):
        model(ones(2, 4))
    with pytest.raises(ModelInputError, match="has a dynamic shape; pass the inputs"):
        model.benchmark()


@pytest.mark.parametrize("executor", EXECUTORS)
def test_benchmark(executor: str) -> None:
    model = ember.compile(STATIC_TEXT, executor=executor)
    result = model.benchmark(number=2, repeat=2)
    assert len(result.results) == 2 and result.min > 0
    assert len(model.benchmark(ones(2, 3), ones(2, 3), number=1, repeat=1).results) == 1


def test_repr_names_the_signature(two_inputs: CompiledModel) -> None:
    text = repr(two_inputs)
    assert text.startswith("CompiledModel(graph, threads=")
    assert "(x: float32[2, 3], y: float32[2, 3]) -> (output0: float32[2, 3]" in text


def test_compile_takes_the_pass_options_of_the_enclosing_context():
    # a bad value of a pass option reaches its pass, which names it: the options were used
    x = relay.var("x", shape=(1, 8, 6, 6))
    w = relay.const(np.ones((10, 8, 3, 3), "float32"))
    mod = ember.IRModule.from_expr(relay.Function([x], relay.nn.conv2d(x, w, padding=(1, 1))))
    with ember.transform.PassContext(config={"relay.AlterOpLayout.pad_channels": "yes"}):
        with pytest.raises(ember.error.OpAttributeInvalid,
                           match="relay.AlterOpLayout.pad_channels must be True or "
                                 "False"):
            ember.compile(mod, executor="graph")
    ember.compile(mod, executor="graph")  # outside it, the defaults

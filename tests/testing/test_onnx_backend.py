"""ember.testing.onnx_backend (ONNX's backend API over ember.compile) and
ember.testing.onnx_node_tests (loading, classifying and running ONNX's node tests)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX backend API comes with onnx")
from onnx import TensorProto, helper  # noqa: E402

from ember.contrib import cc  # noqa: E402
from ember.testing import onnx_node_tests as nt  # noqa: E402
from ember.testing.onnx_backend import EmberBackend  # noqa: E402

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")
F = TensorProto.FLOAT


def _add_model(opset: int = 13) -> onnx.ModelProto:
    node = helper.make_node("Add", ["x", "y"], ["z"])
    graph = helper.make_graph([node], "add", [helper.make_tensor_value_info(n, F, [2, 3])
                                              for n in ("x", "y")],
                              [helper.make_tensor_value_info("z", F, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _if_model() -> onnx.ModelProto:
    """An If whose branches hold a Neg and a com.example Foo: operators in subgraphs."""
    out = [helper.make_tensor_value_info("r", F, [2])]
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["r"])], "then", [], out)
    other = helper.make_graph([helper.make_node("Foo", ["x"], ["r"], domain="com.example")],
                              "else", [], out)
    node = helper.make_node("If", ["c"], ["r"], then_branch=then, else_branch=other)
    graph = helper.make_graph([node], "if", [
        helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        helper.make_tensor_value_info("x", F, [2])], out)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                   helper.make_opsetid("com.example", 1)])


X = np.arange(6, dtype="float32").reshape(2, 3)
Y = np.ones((2, 3), "float32")


@needs_cc
def test_prepare_and_run_take_a_list_a_mapping_or_run_model():
    rep = EmberBackend.prepare(_add_model(), "CPU", threads=1)
    out = rep.run([X, Y])
    assert out._fields == ("z",)
    np.testing.assert_array_equal(out[0], X + Y)
    np.testing.assert_array_equal(rep.run({"y": Y, "x": X}).z, X + Y)
    np.testing.assert_array_equal(EmberBackend.run_model(_add_model(), [X, Y])[0], X + Y)


@needs_cc
def test_run_names_what_is_wrong_with_the_inputs():
    rep = EmberBackend.prepare(_add_model(), "CPU", threads=1)
    with pytest.raises(TypeError, match=r"takes 2 input\(s\) \('x', 'y'\), got 1"):
        rep.run([X])
    with pytest.raises(TypeError, match=r"no value for input\(s\) 'y'"):
        rep.run({"x": X})
    with pytest.raises(TypeError, match="list of arrays or a name -> array mapping, got int"):
        rep.run(3)
    with pytest.raises(ValueError, match=r"input 'x': expected float32\[2, 3\]"):
        rep.run([X.astype("float64"), Y])


def test_devices():
    assert EmberBackend.supports_device("CPU")
    assert EmberBackend.supports_device("CPU:0")
    assert not EmberBackend.supports_device("CUDA")
    assert not EmberBackend.supports_device("TPU")
    assert not EmberBackend.supports_device("CPU:x")
    with pytest.raises(ValueError, match="device 'CUDA' is not supported"):
        EmberBackend.prepare(_add_model(), "CUDA")


def test_prepare_checks_the_model():
    broken = _add_model()
    broken.graph.node[0].input[1] = "nowhere"
    with pytest.raises(onnx.checker.ValidationError):
        EmberBackend.prepare(broken)


def test_operators_walk_subgraphs_and_unlisted_names_what_is_missing():
    test = nt.NodeTest("t", _if_model(), (), 1e-3, 1e-7)
    assert test.opset == 13
    assert test.operators == {("", "If"), ("", "Neg"), ("com.example", "Foo")}
    assert nt.unlisted_operators(test) == ["com.example:Foo"]
    assert nt.unlisted_operators(nt.NodeTest("a", _add_model(), (), 1e-3, 1e-7)) == []
    graph = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["y"])], "g", [], [])
    odd = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    assert nt.unlisted_operators(nt.NodeTest("b", odd, (), 1e-3, 1e-7))[0].startswith(
        "NoSuchOp")


class _FakeRep:
    def __init__(self, result):
        self.result = result

    def run(self, inputs):
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


class _FakeBackend:
    def __init__(self, result):
        self.result = result

    def prepare(self, model, device, **kwargs):
        if isinstance(self.result, KeyError):
            raise self.result
        return _FakeRep(self.result)


def test_run_node_test_outcomes():
    test = nt.NodeTest("t", _add_model(), (([X, Y], [X + Y]),), 1e-3, 1e-7)
    assert nt.run_node_test(_FakeBackend([X + Y]), test) == nt.Outcome("pass")
    wrong = nt.run_node_test(_FakeBackend([X]), test)
    assert wrong.status == "wrong" and "Not equal to tolerance" in wrong.message
    assert nt.run_node_test(_FakeBackend([(X + Y).astype("float64")]), test).status == "wrong"
    refused = nt.run_node_test(_FakeBackend(KeyError("no way")), test)
    assert refused == nt.Outcome("refused", "KeyError: 'no way'")
    assert nt.run_node_test(_FakeBackend(RuntimeError("a\nb")), test) == nt.Outcome(
        "failed", "RuntimeError: a | b")


def test_load_node_tests_makes_a_damaged_cache_again(tmp_path, monkeypatch):
    made = [nt.NodeTest("test_b", _add_model(22), (([X], [X]),), 1e-3, 1e-7),
            nt.NodeTest("test_a", _add_model(13), (), 1e-3, 1e-7)]
    calls = []
    monkeypatch.setattr(nt, "_generate", lambda: calls.append(1) or list(made))
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    assert [t.name for t in nt.load_node_tests()] == ["test_a"]  # opset 22 > MAX_OPSET
    assert [t.name for t in nt.load_node_tests(None)] == ["test_a", "test_b"]
    assert len(calls) == 1  # the second load read the cache
    nt._cache_path().write_bytes(b"not a pickle")
    assert [t.name for t in nt.load_node_tests(22)] == ["test_a", "test_b"]
    assert len(calls) == 2

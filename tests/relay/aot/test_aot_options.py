"""Selecting the AOT executor, the rules on combining its options (TVM's messages plus the rule
they cite), and the programs AOT refuses (dynamic shapes, control flow) or the names it
cannot give C identifiers."""
from __future__ import annotations

import numpy as np
import pytest
from _aot_util import needs_cc, run

import ember as tvm
from ember import relay
from ember.relay.backend import Executor, Runtime
from ember.relay.backend.aot.calling_convention import AotOptionError, options_from

pytestmark = needs_cc


def _add_mod(names=("a", "b"), shape=(2, 3), dtype="float32"):
    a, b = (relay.var(n, shape=shape, dtype=dtype) for n in names)
    return tvm.IRModule.from_expr(relay.Function([a, b], relay.add(a, b)))


def _build(mod, executor=None, runtime=None, target="llvm", **kw):
    return relay.build(mod, target, executor=executor, runtime=runtime, **kw)


# -- selection ---------------------------------------------------------------------------------
@pytest.mark.parametrize("target, interface", [
    ("llvm -executor=aot", "packed"),
    ("c -executor=aot", "packed"),
    ("c -executor=aot -runtime=c -interface-api=c -unpacked-api", "c"),
    ("c -executor=aot -runtime=c -unpacked-api -link-params", "packed"),
])
def test_target_string_options_select_aot(target, interface):
    factory = _build(_add_mod(), target=target)
    assert factory.executor_kind == "aot"
    assert factory.get_model_metadata().interface_api == interface
    x = {"a": np.ones((2, 3), "float32"), "b": np.full((2, 3), 2, "float32")}
    np.testing.assert_array_equal(run(factory, x)[0], np.full((2, 3), 3, "float32"))


def test_executor_and_runtime_objects_select_aot():
    factory = _build(_add_mod(), Executor("aot", {"interface-api": "c", "unpacked-api": True,
                                                  "workspace-byte-alignment": 64}),
                     Runtime("crt", {"system-lib": True}))
    meta = factory.get_model_metadata()
    assert (meta.interface_api, meta.unpacked_api, meta.workspace_alignment) == ("c", True, 64)
    assert meta.operator_calling_convention == "unpacked"
    assert factory.runtime == Runtime("crt", {"system-lib": True})


# -- rules -------------------------------------------------------------------------------------
@pytest.mark.parametrize("options, message", [
    ({"interface-api": "c"}, (r'Need unpacked-api == false \(got: 0\) and interface-api == '
                             r'"packed" \(got: c\) when targeting c\+\+ runtime')),
    ({"unpacked-api": True}, (r'Need unpacked-api == false \(got: 1\) and interface-api == '
                             r'"packed" \(got: packed\) when targeting c\+\+ runtime')),
])
def test_cpp_runtime_needs_the_packed_interface_and_packed_calls(options, message):
    with pytest.raises(tvm.TVMError, match=message) as err:
        _build(_add_mod(), Executor("aot", options), Runtime("cpp"))
    assert "AOT rule R1" in str(err.value)


def test_c_runtime_c_interface_needs_unpacked_api():
    with pytest.raises(AotOptionError, match=r'Either need interface_api == "packed" \(got: c\) '
                       r"or unpacked-api == true \(got: 0\) when targeting c runtime") as err:
        _build(_add_mod(), Executor("aot", {"interface-api": "c"}), Runtime("crt"))
    assert "AOT rule R2" in str(err.value) and isinstance(err.value, ValueError)


def test_deprecated_target_options_are_checked_too():
    with pytest.raises(tvm.TVMError, match="AOT rule R1"):
        _build(_add_mod(), target="llvm -executor=aot -interface-api=c -unpacked-api")


@pytest.mark.parametrize("key", ["workspace-byte-alignment", "constant-byte-alignment"])
def test_alignments_are_powers_of_two(key):
    with pytest.raises(AotOptionError, match=f"{key} must be a power of two, got 24.*R4"):
        options_from(Executor("aot", {key: 24}), Runtime("cpp"))


def test_operator_calling_convention_config():
    cfg = "ember.aot.operator_calling_convention"
    ex, crt = Executor("aot", {"unpacked-api": True}), Runtime("crt")
    assert options_from(Executor("aot"), Runtime("cpp"), {cfg: "packed"}).operator_convention \
        == "packed"
    assert options_from(ex, crt).operator_convention == "unpacked"
    with pytest.raises(AotOptionError, match="contradicts unpacked-api = 1.*R3"):
        options_from(ex, crt, {cfg: "cpacked"})
    with pytest.raises(AotOptionError, match="contradicts unpacked-api = 0.*R3"):
        options_from(Executor("aot"), Runtime("cpp"), {cfg: "unpacked"})
    with pytest.raises(AotOptionError, match="must be one of 'packed', 'cpacked', 'unpacked'"):
        options_from(Executor("aot"), Runtime("cpp"), {cfg: "direct"})


def test_unknown_executor_options_use_tvm_messages():
    with pytest.raises(tvm.TVMError, match='Attribute "woof" is not available on this Executor'):
        Executor("aot", {"woof": 1})
    with pytest.raises(tvm.TVMError, match='Attribute "interface-api" must be "c" or "packed"'):
        Executor("aot", {"interface-api": "cpp"})


# -- programs AOT refuses ------------------------------------------------------------------------
_VM = r"AOT needs static shapes and no control flow; use the VM: relay\.vm\.compile"


def test_dynamic_input_shape_is_refused():
    x = relay.var("x", shape=(relay.Any(), 3))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.exp(x)))
    with pytest.raises(tvm.TVMError, match=_VM + r".*input %x has type Tensor\[\(\?, 3\)"):
        _build(mod, target="llvm -executor=aot")


def test_control_flow_is_refused():
    x = relay.var("x", shape=(3,))
    c = relay.var("c", shape=(), dtype="bool")
    mod = tvm.IRModule.from_expr(relay.Function([c, x], relay.If(c, relay.exp(x), x)))
    with pytest.raises(tvm.TVMError, match=_VM + r".*found If"):
        _build(mod, target="llvm -executor=aot")


def test_calls_between_relay_functions_are_refused():
    mod = tvm.parser.fromtext('#[version = "0.0.5"]\n'
                              "def @f(%y: Tensor[(3), float32]) { exp(%y) }\n"
                              "def @main(%x: Tensor[(3), float32]) { @f(%x) }")
    with pytest.raises(tvm.TVMError, match=_VM + r".*calls the Relay function @f"):
        _build(mod, target="llvm -executor=aot")


def test_tuple_inputs_are_refused():
    t = relay.var("t", relay.TupleType([relay.TensorType((2,)), relay.TensorType((2,))]))
    mod = tvm.IRModule.from_expr(relay.Function([t], relay.add(relay.TupleGetItem(t, 0),
                                                               relay.TupleGetItem(t, 1))))
    with pytest.raises(tvm.TVMError, match=_VM + r".*input %t has type"):
        _build(mod, target="llvm -executor=aot")


# -- names -------------------------------------------------------------------------------------
def test_names_that_clash_after_sanitising_are_refused():
    with pytest.raises(tvm.TVMError, match=r"Sanitized input name clash: 'a\.b' and 'a_b'"):
        _build(_add_mod(("a.b", "a_b")), target="llvm -executor=aot")
    with pytest.raises(tvm.TVMError, match=r"'x' and input 'X' both become the macro "
                       r"TVMGEN_DEFAULT_X_SIZE"):
        _build(_add_mod(("X", "x")), target="llvm -executor=aot")
    with pytest.raises(tvm.TVMError, match=r"'workspace' and \(the model's workspace size\)"):
        _build(_add_mod(("workspace", "b")), target="llvm -executor=aot")


def test_names_are_sanitised_for_c():
    factory = _build(_add_mod(("input:0", "int")), Executor("aot", {"interface-api": "c",
                                                                   "unpacked-api": True}),
                     Runtime("crt"), mod_name="my-model")
    head = factory.header
    assert "struct tvmgen_my_model_inputs {\n  void* input_0;" in head
    assert "  void* int_;  /* int: float32[2, 3] */" in head
    assert "#define TVMGEN_MY_MODEL_INPUT_0_SIZE 24" in head
    x = {"input:0": np.ones((2, 3), "float32"), "int": np.ones((2, 3), "float32")}
    np.testing.assert_array_equal(run(factory, x, "my-model")[0], np.full((2, 3), 2, "float32"))

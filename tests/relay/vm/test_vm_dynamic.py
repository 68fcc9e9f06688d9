"""Dynamic shapes (``relay.Any()``): one executable, several input sizes. Output shapes come
from shape functions derived from the ops' compute rules (``backend/vm/shape_func.py``)."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from _vm_check import assert_same, interpret, requires_cc, to_py, vm_run

import ember
from ember import relay

pytestmark = requires_cc
ANY = relay.Any()


def _each_size(mod: ember.IRModule, make_args, sizes=(1, 3, 7)) -> ember.runtime.vm.Executable:
    exe = relay.vm.compile(mod, target="llvm")
    for n in sizes:
        args = make_args(n)
        assert_same(to_py(vm_run(exe, *args)), to_py(interpret(mod, *args)), 1e-5, 1e-5)
    return exe


def test_dense_with_a_dynamic_batch() -> None:
    x, w = relay.var("x", shape=(ANY, 8)), relay.var("w", shape=(4, 8))
    mod = ember.IRModule.from_expr(relay.Function([x, w], relay.nn.dense(x, w)))
    rng = np.random.default_rng(0)
    wv = rng.standard_normal((4, 8)).astype("float32")
    exe = _each_size(mod, lambda n: (rng.standard_normal((n, 8)).astype("float32"), wv))
    text = exe.bytecode
    assert "shape_of" in text and "alloc_tensor_reg" in text
    assert any(name.endswith("_shape_func") for name in exe.primitive_ops)


def test_mlp_with_a_dynamic_batch_and_bound_params() -> None:
    rng = np.random.default_rng(1)
    x = relay.var("x", shape=(ANY, 16))
    w1, b1 = relay.var("w1", shape=(32, 16)), relay.var("b1", shape=(32,))
    w2, b2 = relay.var("w2", shape=(10, 32)), relay.var("b2", shape=(10,))
    h = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w1), b1))
    out = relay.nn.softmax(relay.nn.bias_add(relay.nn.dense(h, w2), b2))
    mod = ember.IRModule.from_expr(relay.Function([x, w1, b1, w2, b2], out))
    params = {n: rng.standard_normal(s).astype("float32") * 0.1
              for n, s in (("w1", (32, 16)), ("b1", (32,)), ("w2", (10, 32)), ("b2", (10,)))}
    exe = relay.vm.compile(mod, target="llvm", params=params)
    assert exe.get_function_params("main") == ["x"]
    for n in (1, 2, 5, 9):
        xv = rng.standard_normal((n, 16)).astype("float32")
        got = vm_run(exe, xv).numpy()
        hv = np.maximum(xv @ params["w1"].T + params["b1"], 0)
        logits = hv @ params["w2"].T + params["b2"]
        ref = np.exp(logits - logits.max(1, keepdims=True))
        np.testing.assert_allclose(got, ref / ref.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["broadcast", "concatenate", "reshape", "sum", "transpose",
                                  "tuple_out"])
def test_shape_functions_of_common_ops(case: str) -> None:
    rng = np.random.default_rng(2)
    x, y = relay.var("x", shape=(ANY, 3)), relay.var("y", shape=(ANY, 3))
    body = {
        "broadcast": lambda: relay.multiply(relay.add(x, y), relay.const(2.0)),
        "concatenate": lambda: relay.concatenate([x, y], axis=0),
        "reshape": lambda: relay.reshape(relay.add(x, y), (-1,)),
        "sum": lambda: relay.sum(relay.concatenate([x, y], 0), axis=0, keepdims=True),
        "transpose": lambda: relay.transpose(relay.exp(x)),
        "tuple_out": lambda: relay.Tuple([relay.add(x, y), relay.subtract(x, y)]),
    }[case]()
    mod = ember.IRModule.from_expr(relay.Function([x, y], body))

    def args(n: int) -> tuple:
        m = n if case != "concatenate" else n + 2
        return (rng.standard_normal((n, 3)).astype("float32"),
                rng.standard_normal((m if case in ("concatenate", "sum") else n, 3))
                .astype("float32"))
    _each_size(mod, args)


def test_dynamic_output_escaping_through_a_tuple_and_a_call() -> None:
    mod = ember.IRModule()
    f = relay.GlobalVar("f")
    a = relay.var("a", shape=(ANY,))
    mod[f] = relay.Function([a], relay.Tuple([relay.add(a, a), a]))
    x = relay.var("x", shape=(ANY,))
    r = f(relay.negative(x))
    mod["main"] = relay.Function([x], relay.add(relay.TupleGetItem(r, 0),
                                                relay.TupleGetItem(r, 1)))
    _each_size(mod, lambda n: (np.arange(n, dtype="float32"),))


def test_value_sized_outputs_run() -> None:
    # arange's length comes from its values: the shape function reads them
    # (tests/relay/op/test_value_sized.py has the cases, and the refusal of other ones).
    n = relay.var("n", shape=(), dtype="int32")
    mod = ember.IRModule.from_expr(relay.Function(
        [n], relay.arange(relay.const(0, "int32"), n, relay.const(1, "int32"), "int32")))
    exe = relay.vm.compile(mod, target="llvm")
    for k in (5, 0, 2):
        assert_same(to_py(vm_run(exe, np.array(k, "int32"))), np.arange(k, dtype="int32"),
                    0, 0)


@pytest.mark.parametrize("shape", [(4, 2, 3), (ANY, 2, 3)])
def test_reshape_only_functions_become_views(shape: tuple) -> None:
    x, w = relay.var("x", shape=shape), relay.var("w", shape=(5, 6))
    flat = relay.nn.batch_flatten(x)
    mod = ember.IRModule.from_expr(relay.Function([x, w], relay.Tuple(
        [relay.nn.dense(flat, w), relay.reshape(x, (-1,))])))
    rng = np.random.default_rng(4)
    wv = rng.standard_normal((5, 6)).astype("float32")
    exe = _each_size(mod, lambda n: (rng.standard_normal((4 if shape[0] == 4 else n, 2, 3))
                                     .astype("float32"), wv), sizes=(4,) if shape[0] == 4 else (1, 3))
    assert "reshape_tensor" in exe.bytecode


def _kernel_calls(exe: ember.runtime.vm.Executable) -> list[str]:
    """The kernels (not shape functions) that ``exe``'s bytecode invokes, in order."""
    names = exe.primitive_ops
    calls = [int(line.split("PackedFunc[")[1].split("]")[0])
             for line in exe.bytecode.splitlines() if "invoke_packed" in line]
    return [names[k] for k in calls if not names[k].endswith("_shape_func")]


@pytest.mark.parametrize("target", ["rows", "flat"])
def test_dyn_reshape_to_a_run_time_shape_is_a_view(target: str) -> None:
    # dyn.reshape's target is a value known at run time only: its shape function computes
    # the new shape, and the reshape is a view of its input (no kernel, no copy).
    x, s = relay.var("x", shape=(ANY, 6)), relay.var("s", shape=(3,), dtype="int64")
    y = relay.add(relay.dyn.reshape(relay.exp(x), s), relay.const(1.0))
    mod = ember.IRModule.from_expr(relay.Function([x, s], y))
    rng = np.random.default_rng(5)
    new = (lambda n: [n, 3, 2]) if target == "rows" else (lambda n: [1, 1, 6 * n])
    exe = _each_size(mod, lambda n: (rng.standard_normal((n, 6)).astype("float32"),
                                     np.array(new(n), "int64")), sizes=(1, 3, 7))
    assert _kernel_calls(exe) == ["vm_mod_fused_exp", "vm_mod_fused_add"]
    assert exe.bytecode.count("reshape_tensor") == 1


def test_dyn_reshape_views_in_a_static_plan() -> None:
    # The same through ember.compile (a VM static plan: one C call per run), odd sizes and 1.
    x, s = relay.var("x", shape=(ANY, 6)), relay.var("s", shape=(3,), dtype="int64")
    mod = ember.IRModule.from_expr(relay.Function([x, s], relay.multiply(
        relay.dyn.reshape(relay.exp(x), s), relay.const(2.0))))
    model = ember.compile(mod, threads=1)
    rng = np.random.default_rng(6)
    for n in (1, 5, 9):
        xv = rng.standard_normal((n, 6)).astype("float32")
        got = model(xv, np.array([3, n, 2], "int64"))
        np.testing.assert_allclose(got, (np.exp(xv) * 2).reshape(3, n, 2), rtol=1e-6)


@functools.cache
def _reshape_view_exe() -> ember.runtime.vm.Executable:
    x, s = relay.var("x", shape=(ANY, ANY)), relay.var("s", shape=(3,), dtype="int64")
    y = relay.multiply(relay.dyn.reshape(relay.exp(x), s), relay.const(3.0))
    return relay.vm.compile(ember.IRModule.from_expr(relay.Function([x, s], y)), "llvm")


@settings(max_examples=15, deadline=None, derandomize=True)
@given(rows=st.integers(1, 9), cols=st.integers(1, 9), order=st.permutations([0, 1, 2]))
def test_dyn_reshape_views_at_drawn_sizes(rows: int, cols: int, order: list[int]) -> None:
    # One executable, a view of every size and target: (rows * cols) split into three
    # factors in a drawn order, 1s included.
    factors = [rows, cols, 1]
    target = np.array([factors[k] for k in order], "int64")
    xv = np.random.default_rng(rows * 10 + cols).standard_normal((rows, cols)).astype("float32")
    got = to_py(vm_run(_reshape_view_exe(), xv, target))
    np.testing.assert_allclose(got, (np.exp(xv) * 3).reshape(target), rtol=1e-6)

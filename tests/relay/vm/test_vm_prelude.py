"""Prelude lists on the VM: map / foldl / nth / rev over tensors, and a recurrent cell applied
over a list of tensors whose length is only known at run time; each against the
interpreter."""
from __future__ import annotations

import numpy as np
import pytest
from _vm_check import check, requires_cc, to_py, vm_run

import ember
from ember import relay
from ember.relay.prelude import Prelude

pytestmark = requires_cc


def _list_of(p: Prelude, values: list) -> relay.Expr:
    out = p.nil()
    for v in reversed(values):
        out = p.cons(relay.const(v), out)
    return out


def _prelude() -> tuple[ember.IRModule, Prelude]:
    mod = ember.IRModule()
    return mod, Prelude(mod)


def test_map_over_a_list_of_tensors() -> None:
    mod, p = _prelude()
    x = relay.var("x", shape=(2,))
    double = relay.Function([x], relay.multiply(x, relay.const(2.0)))
    xs = [np.array([1, 2], "float32"), np.array([3, 4], "float32"), np.array([5, 6], "float32")]
    mod["main"] = relay.Function([], p.map(double, _list_of(p, xs)))
    exe = check(mod, save=True)
    tag, fields = to_py(vm_run(exe))
    assert tag == p.cons.tag and np.allclose(fields[0], [2, 4])


def test_foldl_sums_a_list() -> None:
    mod, p = _prelude()
    acc, x = relay.var("acc", shape=(2,)), relay.var("x", shape=(2,))
    add = relay.Function([acc, x], relay.add(acc, x))
    xs = [np.full(2, i, "float32") for i in range(1, 6)]
    init = relay.var("init", shape=(2,))
    mod["main"] = relay.Function([init], p.foldl(add, init, _list_of(p, xs)))
    check(mod, np.zeros(2, "float32"))


def test_nth_and_rev() -> None:
    mod, p = _prelude()
    xs = [np.full((2, 2), i, "float32") for i in range(4)]
    n = relay.var("n", shape=(), dtype="int32")
    mod["main"] = relay.Function([n], p.nth(p.rev(_list_of(p, xs)), n))
    exe = check(mod, np.int32(1))
    np.testing.assert_allclose(vm_run(exe, np.int32(0)).numpy(), xs[3])


def test_length_of_a_list_built_at_run_time() -> None:
    mod, p = _prelude()
    x = relay.var("x", shape=(3,))
    lst = p.cons(x, p.cons(relay.add(x, x), p.nil()))
    mod["main"] = relay.Function([x], p.length(lst))
    check(mod, np.ones(3, "float32"))


def test_rnn_cell_over_a_dynamic_length_sequence() -> None:
    """h' = tanh(x W^T + h U^T + b) folded over a List of inputs; the same executable runs
    sequences of several lengths."""
    mod, p = _prelude()
    rng = np.random.default_rng(0)
    hidden, feat = 4, 3
    w = relay.const(rng.standard_normal((hidden, feat)).astype("float32"))
    u = relay.const(rng.standard_normal((hidden, hidden)).astype("float32"))
    b = relay.const(rng.standard_normal((hidden,)).astype("float32"))
    h, x = relay.var("h", shape=(1, hidden)), relay.var("x", shape=(1, feat))
    cell = relay.Function([h, x], relay.tanh(relay.nn.bias_add(
        relay.add(relay.nn.dense(x, w), relay.nn.dense(h, u)), b)))
    seq = relay.var("seq", type_annotation=p.l(relay.TensorType((1, feat), "float32")))
    h0 = relay.var("h0", shape=(1, hidden))
    mod["main"] = relay.Function([seq, h0], p.foldl(cell, h0, seq))
    exe = relay.vm.compile(mod, target="llvm")

    from ember.runtime.container import ADT

    for length in (0, 1, 5):
        xs = [rng.standard_normal((1, feat)).astype("float32") for _ in range(length)]
        vm_list = ADT(p.nil.tag, [])
        for v in reversed(xs):
            vm_list = ADT(p.cons.tag, [ember.nd.array(v), vm_list])
        h_init = np.zeros((1, hidden), "float32")
        got = vm_run(exe, vm_list, h_init).numpy()
        ref = h_init
        for v in xs:
            ref = np.tanh(v @ w.data.numpy().T + ref @ u.data.numpy().T + b.data.numpy())
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def _ints(p: Prelude, vals: list[int]) -> relay.Expr:
    return _list_of(p, [np.int32(v) for v in vals])


_X, _Y = relay.var("x", shape=(), dtype="int32"), relay.var("y", shape=(), dtype="int32")
_ONE = relay.const(np.int32(1))
PRELUDE_CASES = {
    "concat": lambda p: p.concat(_ints(p, [1, 2]), _ints(p, [3])),
    "filter": lambda p: p.filter(relay.Function([_X], relay.greater(_X, _ONE)), _ints(p, [1, 3])),
    "zip": lambda p: p.zip(_ints(p, [1, 2]), _ints(p, [3, 4])),
    "foldr": lambda p: p.foldr(relay.Function([_X, _Y], relay.subtract(_X, _Y)), _ONE,
                               _ints(p, [5, 2, 7])),
    "update": lambda p: p.update(_ints(p, [1, 2, 3]), _ONE, relay.const(np.int32(9))),
    "iterate": lambda p: relay.Call(p.iterate(relay.Function([_X], relay.add(_X, _ONE)),
                                              relay.const(np.int32(3))), [_ONE]),
    "compose": lambda p: relay.Call(p.compose(relay.Function([_X], relay.add(_X, _X)),
                                              relay.Function([_Y], relay.multiply(_Y, _Y))),
                                    [relay.const(np.int32(3))]),
    "tree": lambda p: p.size(p.tmap(relay.Function([_X], relay.add(_X, _X)), p.rose(
        _ONE, p.cons(p.rose(_ONE, p.nil()), p.nil())))),
    "map_accuml": lambda p: p.map_accuml(relay.Function(
        [_X, _Y], relay.Tuple([relay.add(_X, _Y), relay.multiply(_X, _Y)])), _ONE,
        _ints(p, [1, 2, 3])),
}


@pytest.mark.parametrize("name", sorted(PRELUDE_CASES))
def test_prelude_function(name: str) -> None:
    mod, p = _prelude()
    mod["main"] = relay.Function([], PRELUDE_CASES[name](p))
    check(mod)

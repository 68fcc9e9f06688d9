"""Kernels over run-time sizes that broadcast against each other get a version for equal sizes
(plain loops the C compiler vectorises) beside the general one; both give numpy's results: at
equal sizes, at real broadcasts (a size of 1) and at sizes that cannot broadcast (refused)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.contrib import cc
from ember.runtime.errors import TVMError
from ember.tir import expr as E
from ember.tir.broadcast_versions import version_broadcasts
from ember.tir.simplify import simplify
from ember.tir.stmt import BufferStore, For, ForKind, IfThenElse

needs_cc = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _loop_nest(a: E.Var, b: E.Var) -> For:
    """``for i in [0, max(a, b)): out[i] = x[a == 1 ? 0 : i]`` (a broadcast read)."""
    from ember.tir.stmt import Buffer

    i = E.Var("i", "int32")
    x, out = Buffer("x", (a,), "float32"), Buffer("out", (E.Max(a, b, "int32"),), "float32")
    read = E.Select(E.EQ(a, E.IntImm("int32", 1), "bool"), E.IntImm("int32", 0), i, "int32")
    body = BufferStore(out, E.BufferLoad(x, (read,), "float32"), (i,))
    return For(i, E.IntImm("int32", 0), E.Max(a, b, "int32"), ForKind.SERIAL, body)


def test_equal_sizes_get_plain_loops_and_the_general_version_stays():
    a, b = E.Var("a", "int32"), E.Var("b", "int32")
    nest = _loop_nest(a, b)
    out = version_broadcasts(nest)
    assert isinstance(out, IfThenElse) and out.else_case is nest
    assert str(out.condition) in ("(a == b)", "(b == a)")
    fast = out.then_case
    assert isinstance(fast, For) and str(fast.extent) in ("a", "b")
    assert isinstance(fast.body.value.indices[0], E.Var)  # the select is gone: x[i]


def test_a_body_without_two_sizes_in_a_max_is_left_alone():
    a = E.Var("a", "int32")
    nest = _loop_nest(a, a)
    assert version_broadcasts(nest) is nest


def test_simplify_reads_a_broadcast_select_as_the_loop_variable():
    n = E.Var("n", "int32")
    nest = _loop_nest(n, n)
    body = simplify(nest)
    assert isinstance(body.body.value.indices[0], E.Var)


def _add_module():
    x = relay.var("x", shape=(relay.Any(), relay.Any()))
    y = relay.var("y", shape=(1, relay.Any(), relay.Any()))
    return ember.IRModule.from_expr(relay.Function([x, y], relay.add(x * 2.0, y)))


@pytest.fixture(scope="module")
def add_vm():
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    exe = relay.vm.compile(_add_module(), target="llvm")
    return ember.runtime.vm.VirtualMachine(exe, ember.cpu())


@needs_cc
@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 5), cols=st.integers(1, 19), brows=st.booleans(),
       bcols=st.booleans())
def test_both_versions_match_numpy(add_vm, rows, cols, brows, bcols):
    rng = np.random.default_rng(rows * 31 + cols)
    x = rng.standard_normal((rows, cols)).astype("float32")
    y = rng.standard_normal((1, 1 if brows else rows, 1 if bcols else cols)).astype("float32")
    got = add_vm.run(x, y).numpy()
    np.testing.assert_allclose(got, x * 2.0 + y, rtol=1e-6)


@needs_cc
def test_sizes_that_cannot_broadcast_are_refused(add_vm):
    x = np.ones((3, 4), "float32")
    with pytest.raises(TVMError, match="broadcast"):
        add_vm.run(x, np.ones((1, 2, 4), "float32"))
    np.testing.assert_allclose(add_vm.run(x, np.ones((1, 3, 4), "float32")).numpy(), 3.0)

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


def _read_nest(a: E.Var, n: E.Var, inner: E.PrimExpr | None = None) -> For:
    """``for i in [0, n): out[i] = x[a == 1 ? 0 : i]`` (the loop runs to the output's own size
    ``n``, given by the caller); ``inner``: ``x[a == 1 ? 0 : (inner == 1 ? 0 : i)]``."""
    from ember.tir.stmt import Buffer

    i = E.Var("i", "int32")
    x, out = Buffer("x", (a,), "float32"), Buffer("out", (n,), "float32")

    def at(size, idx):
        return E.Select(E.EQ(size, E.IntImm("int32", 1), "bool"), E.IntImm("int32", 0), idx,
                        "int32")

    read = at(a, i if inner is None else at(inner, i))
    body = BufferStore(out, E.BufferLoad(x, (read,), "float32"), (i,))
    return For(i, E.IntImm("int32", 0), n, ForKind.SERIAL, body)


def test_a_read_broadcast_to_the_loops_own_size_gets_a_version():
    a, n = E.SizeVar("a", "int32"), E.SizeVar("n", "int32")
    out = version_broadcasts(_read_nest(a, n))
    assert isinstance(out, IfThenElse) and str(out.condition) == "(a == n)"
    assert str(out.then_case.extent) == "n"  # the output's size stays the loop's
    assert isinstance(out.then_case.body.value.indices[0], E.Var)


def test_reads_in_a_row_pair_each_size_and_expressions_once_merged():
    # a == 1 ? 0 : (max(a, b) == 1 ? 0 : i): a pairs with n; max(a, b) becomes max(n, b)
    # then, which still is not n: the condition checks it, the fast version reads i
    a, b, n = (E.SizeVar(c, "int32") for c in "abn")
    out = version_broadcasts(_read_nest(a, n, E.Max(a, b, "int32")))
    assert isinstance(out, IfThenElse)
    assert str(out.condition) == "((a == n) && (max(n, b) == n))"
    assert isinstance(out.then_case.body.value.indices[0], E.Var)


def test_a_read_of_a_size_bound_inside_the_body_gets_no_version():
    from ember.tir.stmt import LetStmt

    a, n = E.Var("a", "int32"), E.SizeVar("n", "int32")
    nest = LetStmt(a, n - 1, _read_nest(a, n))
    assert version_broadcasts(nest) is nest


def _masked_scores_module():
    """A torch-exported GPT-2's masked scores: (b * h, s, s) scores reshaped like (b, h, .),
    scaled, a causal mask (1, 1, s, s) and a padding mask (b, 1, 1, s) broadcast to them."""
    scores = relay.var("scores", shape=(relay.Any(), relay.Any(), relay.Any()))
    like = relay.var("like", shape=(relay.Any(), relay.Any(), relay.Any(), relay.Any()))
    causal = relay.var("causal", shape=(1, 1, relay.Any(), relay.Any()))
    pad = relay.var("pad", shape=(relay.Any(), 1, 1, relay.Any()))
    s4 = relay.reshape_like(scores, like, lhs_end=1, rhs_end=2)
    w = relay.where(relay.cast(causal, "bool"), s4 * relay.const(0.5), relay.const(-1e4))
    return ember.IRModule.from_expr(relay.Function([scores, like, causal, pad], w + pad))


@pytest.fixture(scope="module")
def masked_vm():
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    exe = relay.vm.compile(_masked_scores_module(), target="llvm")
    return ember.runtime.vm.VirtualMachine(exe, ember.cpu()), exe.lib.get_source()


@needs_cc
def test_masked_scores_kernel_indexes_its_equal_version_linearly(masked_vm):
    _, src = masked_vm
    fast = [ln for ln in src.splitlines() if "T_add[" in ln and "= " in ln]
    assert fast and any("?" not in ln and "ember_floor" not in ln for ln in fast), fast


@needs_cc
@settings(max_examples=14, deadline=None)
@given(b=st.integers(1, 3), h=st.integers(1, 3), s=st.sampled_from([1, 2, 7, 16]),
       causal_one=st.booleans(), pad_one=st.booleans())
def test_masked_scores_match_numpy(masked_vm, b, h, s, causal_one, pad_one):
    vm, _ = masked_vm
    rng = np.random.default_rng(b * 100 + h * 10 + s)
    scores = rng.standard_normal((b * h, s, s)).astype("float32")
    like = np.zeros((b, h, 1, 1), "float32")
    cs = 1 if causal_one else s
    causal = (rng.random((1, 1, cs, cs)) < 0.6).astype("float32")
    pad = rng.standard_normal((1 if pad_one else b, 1, 1, 1 if pad_one else s)).astype(
        "float32")
    got = vm.run(scores, like, causal, pad).numpy()
    want = np.where(causal.astype(bool), scores.reshape(b, h, s, s) * 0.5, -1e4) + pad
    np.testing.assert_allclose(got, want, rtol=1e-6)

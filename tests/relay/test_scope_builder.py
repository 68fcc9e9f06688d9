"""ScopeBuilder (TVM semantics) and the while_loop built on it."""
from __future__ import annotations

import numpy as np
import pytest

from ember import relay
from ember.ir import Function, If, IncompleteType, Let, Var, const, var
from ember.ir.structural import assert_structural_equal
from ember.relay.loops import while_loop
from ember.relay.scope_builder import ScopeBuilder
from ember.runtime.errors import TVMError


def test_public_names():
    assert relay.ScopeBuilder is ScopeBuilder and relay.scope_builder.ScopeBuilder is ScopeBuilder
    assert relay.loops.while_loop is while_loop


def test_let_returns_the_var_and_get_builds_the_chain():
    x = var("x", shape=(2,))
    sb = ScopeBuilder()
    t = sb.let("t", relay.add(x, x))
    u = sb.let(("u", relay.TensorType((2,))), relay.multiply(t, t))
    sb.ret(u)
    body = sb.get()
    assert isinstance(t, Var) and t.name_hint == "t"
    assert isinstance(body, Let) and body.var is t and body.body.var is u
    assert body.body.body is u and u.type_annotation == relay.TensorType((2,))


def test_if_else_scopes_build_an_if():
    x, c = var("x", "float32"), var("c", "bool")
    sb = ScopeBuilder()
    with sb.if_scope(c):
        y = sb.let("y", relay.add(x, x))
        sb.ret(y)
    with sb.else_scope():
        sb.ret(x)
    got = sb.get()
    y2 = var("y")
    expected = If(c, Let(y2, relay.add(x, x), y2), x)
    assert_structural_equal(got, expected, map_free_vars=True)


def test_nested_scopes_run_on_the_interpreter():
    x = var("x", "int32")
    sb = ScopeBuilder()
    with sb.if_scope(relay.less(x, const(0))):
        sb.ret(relay.negative(x))
    with sb.else_scope():
        with sb.if_scope(relay.equal(x, const(0))):
            sb.ret(const(100))
        with sb.else_scope():
            sb.ret(x)
    f = relay.create_executor().evaluate(Function([x], sb.get()))
    assert [int(f(v).numpy()) for v in (-3, 0, 4)] == [3, 100, 4]


def test_type_of():
    x = var("x", shape=(3,))
    sb = ScopeBuilder()
    assert sb.type_of(x) == relay.TensorType((3,))
    ty = sb.type_of(relay.add(x, x))
    assert isinstance(ty, IncompleteType)
    sb.ret(x)
    assert isinstance(sb.get(), Let)  # the unify binding


@pytest.mark.parametrize("build, message", [
    (lambda sb: sb.get(), "no value returned"),
    (lambda sb: (sb.ret(const(1)), sb.ret(const(2))), "already returned a value"),
    (lambda sb: sb.let(3, const(1)), "expected a Var, a name or"),
])
def test_misuse_is_reported(build, message):
    with pytest.raises(TVMError, match=message):
        build(ScopeBuilder())


def test_if_without_else_and_else_without_if():
    sb = ScopeBuilder()
    with sb.if_scope(const(True)):
        sb.ret(const(1))
    with pytest.raises(TVMError, match="has no else_scope"):
        sb.get()
    with pytest.raises(TVMError, match="must directly follow an if_scope"):
        with ScopeBuilder().else_scope():
            pass


def test_empty_branch_and_get_inside_scope():
    sb = ScopeBuilder()
    with pytest.raises(TVMError, match="true branch returned nothing"):
        with sb.if_scope(const(True)):
            pass
    sb2 = ScopeBuilder()
    with pytest.raises(TVMError, match="outermost scope"):
        with sb2.if_scope(const(True)):
            sb2.get()


def test_user_exception_inside_scope_propagates():
    sb = ScopeBuilder()
    with pytest.raises(KeyError):
        with sb.if_scope(const(True)):
            raise KeyError("mine")
    sb.ret(const(1))  # the aborted scope was dropped: the builder is usable again
    assert sb.get() is not None


def test_while_loop_counts_and_sums():
    i, s = var("i", "int32"), var("s", "int32")
    loop = while_loop(lambda i, s: relay.less(i, const(10)), [i, s],
                      lambda i, s: [relay.add(i, const(1)), relay.add(s, i)])
    out = relay.create_executor().evaluate(relay.Call(loop, [const(0), const(0)]))
    assert (int(out[0].numpy()), int(out[1].numpy())) == (10, 45)


def test_while_loop_on_tensors_and_errors():
    x = var("x", shape=(2,))
    loop = while_loop(lambda x: relay.less(relay.sum(x), const(100.0)), [x],
                      lambda x: [relay.multiply(x, const(2.0))])
    start = const(np.array([1.0, 2.0], "float32"))
    out = relay.create_executor().evaluate(relay.Call(loop, [start]))
    np.testing.assert_allclose(out[0].numpy(), [64, 128])
    with pytest.raises(TVMError, match="returned 2 value"):
        while_loop(lambda x: const(True), [x], lambda x: [x, x])

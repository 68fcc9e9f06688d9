"""The one Relay traversal framework: ExprVisitor / ExprMutator as TVM users write them, at
any depth, memoised, rebuilding only what changed."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.ir import post_order
from ember.ir.visitor import ExprFunctor, walk_children

DEEP = 10_000


def _chain(n: int) -> tuple[relay.Var, relay.Expr]:
    x = relay.var("x", shape=(2,), dtype="float32")
    e: relay.Expr = x
    for i in range(n):
        e = relay.negative(e) if i % 2 == 0 else relay.tanh(e)
    return x, e


def _let_chain(n: int) -> relay.Expr:
    x = relay.var("x", shape=(2,), dtype="float32")
    vs = [relay.var(f"a{i}", shape=(2,), dtype="float32") for i in range(n)]
    body: relay.Expr = vs[-1]
    for i in reversed(range(n)):
        body = relay.Let(vs[i], relay.negative(x if i == 0 else vs[i - 1]), body)
    return relay.Function([x], body)


class DropNegatives(relay.ExprMutator):
    """TVM style: rebuild through super(), then look at the result."""

    def visit_call(self, call: relay.Call) -> relay.Expr:
        new = super().visit_call(call)
        if isinstance(new.op, ember.ir.Op) and new.op.name == "negative":
            return new.args[0]
        return new


class TanhToExp(relay.ExprMutator):
    """TVM style: visit the arguments by hand with ``self.visit``."""

    def visit_call(self, call: relay.Call) -> relay.Expr:
        args = [self.visit(a) for a in call.args]
        if call.op.name == "tanh":
            return relay.exp(args[0])
        return relay.Call(call.op, args, call.attrs)


class CountCalls(relay.ExprVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def visit_call(self, call: relay.Call) -> None:
        self.calls += 1
        super().visit_call(call)


def test_user_mutators_on_a_10000_deep_chain() -> None:
    _, e = _chain(DEEP)
    out = DropNegatives().visit(e)
    assert sum(isinstance(n, relay.Call) for n in post_order(out)) == DEEP // 2
    out = TanhToExp().visit(e)
    names = {n.op.name for n in post_order(out) if isinstance(n, relay.Call)}
    assert names == {"negative", "exp"}


def test_user_visitor_sees_every_node_once() -> None:
    x = relay.var("x", shape=(2,), dtype="float32")
    shared = relay.negative(x)
    e = relay.add(shared, shared)
    counter = CountCalls()
    counter.visit(e)
    assert counter.calls == 2
    _, deep = _chain(DEEP)
    counter = CountCalls()
    counter.visit(deep)
    assert counter.calls == DEEP


def test_unchanged_means_the_same_object() -> None:
    func = _let_chain(DEEP)
    assert relay.ExprMutator().visit(func) is func
    x, e = _chain(50)
    out = DropNegatives().visit(relay.Tuple([e, x]))
    assert out.fields[1] is x


def test_bind_substitutes_through_a_deep_let_chain() -> None:
    func = _let_chain(DEEP)
    y = relay.var("y", shape=(2,), dtype="float32")
    out = relay.bind(func, {func.params[0]: y})
    assert out.params == () and y in relay.analysis.free_vars(out)


def test_skip_leaves_a_node_alone() -> None:
    x = relay.var("x", shape=(2,), dtype="float32")
    p = relay.var("p", shape=(2,), dtype="float32")
    fused = relay.Function([p], relay.negative(p)).with_attr("Primitive", 1)
    e = relay.negative(relay.Call(fused, [x]))

    class KeepFused(DropNegatives):
        def skip(self, expr: relay.Expr) -> bool:
            return isinstance(expr, relay.Function)

    out = KeepFused().visit(e)
    assert isinstance(out, relay.Call) and out.op is fused


def test_types_are_kept_only_when_asked() -> None:
    x, e = _chain(4)
    mod = relay.transform.InferType()(ember.IRModule.from_expr(relay.Function([x], e)))
    body = mod["main"].body
    assert DropNegatives().visit(body).checked_type_ is None

    class Keep(DropNegatives):
        keep_types = True

    assert Keep().visit(body).checked_type_ == body.checked_type_


def test_let_value_reads_what_a_binding_became() -> None:
    x = relay.var("x", shape=(2,), dtype="float32")
    v = relay.var("v", shape=(2,), dtype="float32")
    c = relay.const(np.ones(2, "float32"))
    e = relay.Let(v, relay.negative(c), relay.add(v, x))

    class Fold(relay.ExprMutator):
        def visit_call(self, call: relay.Call) -> relay.Expr:
            new = super().visit_call(call)
            if new.op.name == "negative" and isinstance(new.args[0], relay.Constant):
                return relay.const(-new.args[0].data.numpy())
            return new

        def visit_var(self, var: relay.Var) -> relay.Expr:
            value = self.let_value(var)
            return value if isinstance(value, relay.Constant) else var

    out = Fold().visit(e)
    assert isinstance(out.body.args[0], relay.Constant)
    assert out.var is v  # a binding occurrence stays a variable


def test_dispatch_table_is_built_once_per_class() -> None:
    assert CountCalls._table[relay.Call] is CountCalls.visit_call
    assert DropNegatives._table[relay.Call] is DropNegatives.visit_call
    assert DropNegatives._table[relay.Var] is relay.ExprMutator.visit_var

    class NoMethods(ExprFunctor):
        pass

    with pytest.raises(TypeError, match="NoMethods: cannot visit a Var"):
        NoMethods().visit(relay.var("x"))


def test_walk_order_puts_a_let_value_before_its_variable() -> None:
    v = relay.var("v")
    let = relay.Let(v, relay.const(1.0), v)
    assert walk_children(let) == (let.value, v, let.body)

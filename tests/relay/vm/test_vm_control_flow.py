"""Control flow, recursion, closures and pattern matching compiled for the VM, each checked
against the reference interpreter (a few also through save/load_exec)."""
from __future__ import annotations

import numpy as np
import pytest
from _vm_check import check, requires_cc, vm_run

import ember
from ember import relay
from ember.relay.loops import while_loop
from ember.relay.prelude import Prelude
from ember.runtime.vm import VirtualMachine

pytestmark = requires_cc
I32 = relay.TensorType((), "int32")


def _sum_up_module() -> ember.IRModule:
    """@sum_up(i) = if i == 0 then 0 else i + @sum_up(i - 1)."""
    mod = ember.IRModule()
    sum_up = relay.GlobalVar("sum_up")
    i = relay.var("i", shape=(), dtype="int32")
    sb = relay.ScopeBuilder()
    with sb.if_scope(relay.equal(i, relay.const(0, "int32"))):
        sb.ret(i)
    with sb.else_scope():
        rec = sum_up(relay.subtract(i, relay.const(1, "int32")))
        sb.ret(relay.add(rec, i))
    mod[sum_up] = relay.Function([i], sb.get(), ret_type=I32)
    x = relay.var("x", shape=(), dtype="int32")
    mod["main"] = relay.Function([x], sum_up(x))
    return mod


def test_recursion_sums_one_to_n() -> None:
    exe = check(_sum_up_module(), np.int32(10), save=True)
    assert int(vm_run(exe, np.int32(100)).numpy()) == 5050
    assert "invoke " in exe.bytecode and "if " in exe.bytecode


def test_tree_recursion_fib() -> None:
    mod = ember.IRModule()
    fib = relay.GlobalVar("fib")
    n = relay.var("n", shape=(), dtype="int32")
    one, two = relay.const(1, "int32"), relay.const(2, "int32")
    body = relay.If(relay.less(n, two), n,
                    relay.add(fib(relay.subtract(n, one)), fib(relay.subtract(n, two))))
    mod[fib] = relay.Function([n], body, ret_type=I32)
    x = relay.var("x", shape=(), dtype="int32")
    mod["main"] = relay.Function([x], fib(x))
    exe = check(mod, np.int32(9))
    assert int(vm_run(exe, np.int32(12)).numpy()) == 144


def test_if_on_a_tensor_condition() -> None:
    x, y = relay.var("x", shape=(2, 2)), relay.var("y", shape=(2, 2))
    cond = relay.all(relay.greater(x, y))
    mod = ember.IRModule.from_expr(relay.Function(
        [x, y], relay.If(cond, relay.add(x, y), relay.subtract(x, y))))
    a, b = np.full((2, 2), 3, "float32"), np.ones((2, 2), "float32")
    check(mod, a, b)
    check(mod, b, a)


def test_closure_capturing_tensors() -> None:
    x, y = relay.var("x", shape=(3,)), relay.var("y", shape=(3,))
    f = relay.var("f")
    w = relay.multiply(x, relay.const(2.0))
    body = relay.Let(f, relay.Function([y], relay.add(w, y)),
                     relay.Call(f, [relay.Call(f, [x])]))
    mod = ember.IRModule.from_expr(relay.Function([x], body))
    exe = check(mod, np.arange(3, dtype="float32"), save=True)
    assert "alloc_closure" in exe.bytecode and "invoke_closure" in exe.bytecode


def test_closure_returned_and_called_later() -> None:
    mod = ember.IRModule()
    make_adder = relay.GlobalVar("make_adder")
    a, b = relay.var("a", shape=(2,)), relay.var("b", shape=(2,))
    mod[make_adder] = relay.Function([a], relay.Function([b], relay.add(a, b)))
    x = relay.var("x", shape=(2,))
    mod["main"] = relay.Function([x], relay.Call(make_adder(x), [relay.const(np.ones(2, "f4"))]))
    check(mod, np.array([1.0, 2.0], "float32"))


def test_higher_order_global_function() -> None:
    mod = ember.IRModule()
    twice = relay.GlobalVar("twice")
    ft = relay.FuncType([relay.TensorType((3,))], relay.TensorType((3,)))
    fp, a = relay.var("fp", type_annotation=ft), relay.var("a", shape=(3,))
    mod[twice] = relay.Function([fp, a], relay.Call(fp, [relay.Call(fp, [a])]))
    x, z = relay.var("x", shape=(3,)), relay.var("z", shape=(3,))
    neg = relay.GlobalVar("neg")
    mod[neg] = relay.Function([z], relay.negative(z))
    mod["main"] = relay.Function([x], relay.add(twice(relay.Function([z], relay.add(z, x)), x),
                                                twice(neg, x)))
    check(mod, np.arange(3, dtype="float32"))


def test_while_loop_is_a_recursive_closure() -> None:
    i = relay.var("i", shape=(), dtype="int32")
    acc = relay.var("acc", shape=(2,))
    step = relay.var("step", shape=(2,))

    def cond(i: relay.Expr, acc: relay.Expr) -> relay.Expr:
        return relay.less(i, relay.const(10, "int32"))

    def body(i: relay.Expr, acc: relay.Expr) -> list:
        return [relay.add(i, relay.const(1, "int32")), relay.add(acc, step)]

    loop = while_loop(cond, [i, acc], body)
    start = relay.const(0, "int32")
    result = relay.TupleGetItem(relay.Call(loop, [start, relay.zeros((2,), "float32")]), 1)
    mod = ember.IRModule.from_expr(relay.Function([step], result))
    exe = check(mod, np.array([0.5, 1.0], "float32"))
    np.testing.assert_allclose(vm_run(exe, np.ones(2, "float32")).numpy(), [10, 10])


def test_match_on_tuples_and_adts() -> None:
    mod = ember.IRModule()
    p = Prelude(mod)
    x = relay.var("x", shape=(2,))
    h, t, a, b = (relay.var(n) for n in "htab")
    opt = relay.var("opt", type_annotation=p.optional(relay.TensorType((2,), "float32")))
    v = relay.var("v")
    some_case = relay.Clause(relay.PatternConstructor(p.some, [relay.PatternVar(v)]),
                             relay.multiply(v, v))
    none_case = relay.Clause(relay.PatternConstructor(p.none, []), x)
    pair = relay.Tuple([x, relay.add(x, x)])
    tup = relay.Match(pair, [relay.Clause(relay.PatternTuple(
        [relay.PatternVar(a), relay.PatternVar(b)]), relay.subtract(b, a))])
    lst = p.cons(x, p.cons(tup, p.nil()))
    second = relay.Match(lst, [
        relay.Clause(relay.PatternConstructor(p.cons, [relay.PatternWildcard(),
                     relay.PatternConstructor(p.cons, [relay.PatternVar(h), relay.PatternVar(t)])]),
                     h),
        relay.Clause(relay.PatternWildcard(), x)])
    body = relay.add(relay.Match(opt, [some_case, none_case]), second)
    mod["main"] = relay.Function([x, opt], body)
    from ember.relay.backend._values import ConstructorValue
    from ember.runtime.container import ADT

    arr = np.array([1.0, 2.0], "float32")
    some = ember.nd.array(arr * 3)
    exe = check(mod, arr, ADT(p.some.tag, [some]), save=True,
                ref_args=(arr, ConstructorValue(p.some.tag, [some], p.some)))
    check(mod, arr, ADT(p.none.tag, []), ref_args=(arr, ConstructorValue(p.none.tag, [], p.none)))
    assert "get_tag" in exe.bytecode and "get_field" in exe.bytecode


def test_nonexhaustive_match_reaches_fatal() -> None:
    mod = ember.IRModule()
    p = Prelude(mod)
    lst = relay.var("l", type_annotation=p.l(relay.TensorType((), "int32")))
    h = relay.var("h")
    mod["main"] = relay.Function([lst], relay.Match(lst, [relay.Clause(
        relay.PatternConstructor(p.cons, [relay.PatternVar(h), relay.PatternWildcard()]), h)],
        complete=False))
    exe = relay.vm.compile(mod, target="llvm")
    from ember.runtime.container import ADT

    one = ADT(p.cons.tag, [ember.nd.array(np.int32(7)), ADT(p.nil.tag, [])])
    assert int(vm_run(exe, one).numpy()) == 7
    with pytest.raises(ember.TVMError, match="fatal"):
        vm_run(exe, ADT(p.nil.tag, []))


def test_wrong_argument_count_and_shape_are_reported() -> None:
    x = relay.var("x", shape=(2, 3))
    mod = ember.IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))
    vm = VirtualMachine(relay.vm.compile(mod, target="llvm"), ember.cpu())
    with pytest.raises(ember.TVMError, match="expected 1 arguments"):
        vm.invoke("main", np.zeros((2, 3), "float32"), np.zeros((2, 3), "float32"))
    with pytest.raises(ember.TVMError, match=r"argument 0 \(x\): expected float32\[2, 3\]"):
        vm.invoke("main", np.zeros((3, 2), "float32"))
    with pytest.raises(ember.TVMError, match="float32"):
        vm.invoke("main", np.zeros((2, 3), "int32"))


def test_references_are_refused_with_a_clear_error() -> None:
    x = relay.var("x", shape=())
    mod = ember.IRModule.from_expr(relay.Function([x], relay.RefRead(relay.RefCreate(x))))
    with pytest.raises(ember.TVMError, match="references are not supported"):
        relay.vm.compile(mod, target="llvm")


def test_non_cpu_target_is_refused() -> None:
    x = relay.var("x", shape=())
    mod = ember.IRModule.from_expr(relay.Function([x], x))
    with pytest.raises(ember.TVMError, match="cuda"):
        relay.vm.compile(mod, target="cuda")


def test_closure_capturing_two_variables_with_the_same_name() -> None:
    x1, x2, z = relay.var("x", shape=(2,)), relay.var("x", shape=(2,)), relay.var("z", shape=(2,))
    f = relay.var("f")
    body = relay.Let(f, relay.Function([z], relay.add(relay.add(z, x1), relay.exp(x2))),
                     relay.Call(f, [x1]))
    mod = ember.IRModule.from_expr(relay.Function([x1, x2], body))
    exe = check(mod, np.ones(2, "float32"), np.full(2, 2.0, "float32"))
    assert "main_lifted_0(x, x_1, z)" in exe.bytecode

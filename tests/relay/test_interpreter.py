"""The reference interpreter (relay.create_executor(kind="debug")): values, control flow,
recursion, closures, refs, ADTs, dynamic shapes and error messages."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.ir import (Call, Clause, Constructor, Function, GlobalTypeVar, GlobalVar, If,
                      IRModule, Let, Match, PatternConstructor, PatternTuple, PatternVar,
                      PatternWildcard, RefCreate, RefRead, RefWrite, Tuple, TupleGetItem,
                      TypeCall, TypeData, TypeVar, const, scalar_type, var)
from ember.ir.op import OP_REGISTRY, OpDef, register_op
from ember.relay.backend.interpreter import (ConstructorValue, Evaluator, RefValue)
from ember.relay.loops import while_loop
from ember.runtime.container import ADT
from ember.runtime.errors import OpNotImplemented, TVMError

I32 = scalar_type("int32")


def op(name: str, *args, **attrs) -> Call:
    o = relay.op.get(name)
    return Call(o, args, o.make_attrs(**attrs) if attrs else None)


def run(expr, mod=None):
    return relay.create_executor(mod=mod).evaluate(expr)


def scalar(v) -> object:
    return np.asarray(v).item()


# -- tensors, tuples, arguments ------------------------------------------------------------------
def test_add_main_matches_numpy():
    x, y = var("x", shape=(2, 3)), var("y", shape=(2, 3))
    mod = IRModule.from_expr(Function([x, y], op("add", op("multiply", x, y), y)))
    a, b = np.random.rand(2, 3).astype("float32"), np.random.rand(2, 3).astype("float32")
    ex = relay.create_executor("debug", mod=mod, device=ember.cpu(0), target="llvm")
    out = ex.evaluate()(a, b)
    assert isinstance(out, ember.nd.NDArray)
    np.testing.assert_allclose(out.numpy(), a * b + b, rtol=1e-5)


def test_evaluate_plain_expression_returns_value():
    out = run(op("add", const(1.5), const(2.0)))
    assert out.dtype == "float32" and scalar(out) == 3.5


def test_keyword_arguments_and_python_scalars_take_the_annotated_dtype():
    x, y = var("x", shape=(3,), dtype="int64"), var("y", "int64")
    f = run(Function([x, y], op("add", x, y)))
    out = f(y=2, x=[1, 2, 3])
    assert out.dtype == "int64"
    np.testing.assert_array_equal(out.numpy(), [3, 4, 5])


def test_params_bind_main_parameters_by_name():
    x, w = var("x", shape=(2,)), var("w", shape=(2,))
    mod = IRModule.from_expr(Function([x, w], op("multiply", x, w)))
    ex = relay.create_executor(mod=mod, params={"w": np.array([2, 3], "float32"), "unused": 1})
    np.testing.assert_allclose(ex.evaluate()(np.ones(2, "float32")).numpy(), [2, 3])


def test_binds_give_free_variables_values():
    x = var("x", shape=(2,))
    out = relay.create_executor().evaluate(op("add", x, x), binds={x: np.array([1, 2], "float32")})
    np.testing.assert_allclose(out.numpy(), [2, 4])


def test_tuples_are_adts_with_tag_zero():
    x = var("x", shape=(2,))
    t = Tuple([x, op("add", x, x)])
    out = run(Function([x], Tuple([TupleGetItem(t, 1), t])))(np.ones(2, "float32"))
    assert isinstance(out, ADT) and out.tag == 0 and len(out) == 2
    np.testing.assert_allclose(out[0].numpy(), [2, 2])
    np.testing.assert_allclose(out[1][0].numpy(), [1, 1])


def test_tuple_argument_from_python_tuple():
    p = var("p", relay.TupleType([relay.TensorType((2,)), I32]))
    out = run(Function([p], TupleGetItem(p, 1)))((np.zeros(2, "float32"), 7))
    assert scalar(out) == 7


def test_dynamic_batch_dense_at_several_sizes():
    x, w = var("x", shape=(relay.Any(), 4)), var("w", shape=(3, 4))
    f = run(Function([x, w], op("nn.dense", x, w)))
    wv = np.random.rand(3, 4).astype("float32")
    for batch in (1, 2, 7):
        xv = np.random.rand(batch, 4).astype("float32")
        np.testing.assert_allclose(f(xv, wv).numpy(), xv @ wv.T, rtol=1e-5)



@pytest.fixture(autouse=True)
def _forget_test_ops():
    """The test ops registered below leave the registry after each test (other modules list
    every registered op)."""
    yield
    for name in [n for n in OP_REGISTRY if n.startswith("test_interpreter.")]:
        del OP_REGISTRY[name]


_COUNTED: list[int] = []


def test_shared_node_runs_once():
    name = "test_interpreter.count"
    if name not in OP_REGISTRY:
        register_op(OpDef(name, 1, type_rel=lambda ts, attrs=None: ts[0],
                          reference=lambda a, attrs=None: _COUNTED.append(1) or a + 1))
    _COUNTED.clear()
    x = var("x", shape=(2,))
    y = op(name, x)
    out = run(Function([x], op("add", y, y)))(np.zeros(2, "float32"))
    np.testing.assert_allclose(out.numpy(), [2, 2])
    assert len(_COUNTED) == 1


# -- control flow and recursion -------------------------------------------------------------------
def _sum_module() -> tuple[IRModule, GlobalVar]:
    """@sum(n) = if n == 0 { 0 } else { n + @sum(n - 1) }: not tail recursive."""
    gv, n = GlobalVar("sum"), var("n", "int32")
    body = If(op("equal", n, const(0)), const(0),
              op("add", n, Call(gv, [op("subtract", n, const(1))])))
    mod = IRModule()
    mod[gv] = Function([n], body, I32)
    return mod, gv


def test_recursive_sum():
    mod, gv = _sum_module()
    assert scalar(relay.create_executor(mod=mod).evaluate(gv)(100)) == 5050


def test_deep_recursion_does_not_hit_python_limit():
    mod, gv = _sum_module()
    assert scalar(relay.create_executor(mod=mod).evaluate(gv)(3000)) == 3000 * 3001 // 2


def test_factorial_with_accumulator():
    gv, n, acc = GlobalVar("fact"), var("n", "int64"), var("acc", "int64")
    body = If(op("equal", n, const(0, "int64")), acc,
              Call(gv, [op("subtract", n, const(1, "int64")), op("multiply", n, acc)]))
    mod = IRModule()
    mod[gv] = Function([n, acc], body, scalar_type("int64"))
    assert scalar(relay.create_executor(mod=mod).evaluate(gv)(10, 1)) == 3628800


def test_tree_recursive_fib():
    gv, n = GlobalVar("fib"), var("n", "int32")
    rec = op("add", Call(gv, [op("subtract", n, const(1))]),
             Call(gv, [op("subtract", n, const(2))]))
    mod = IRModule()
    mod[gv] = Function([n], If(op("less", n, const(2)), n, rec), I32)
    assert scalar(relay.create_executor(mod=mod).evaluate(gv)(15)) == 610


def test_mutual_recursion():
    even, odd, n = GlobalVar("even"), GlobalVar("odd"), var("n", "int32")
    m = var("m", "int32")
    mod = IRModule()
    mod[even] = Function([n], If(op("equal", n, const(0)), const(True),
                                 Call(odd, [op("subtract", n, const(1))])), scalar_type("bool"))
    mod[odd] = Function([m], If(op("equal", m, const(0)), const(False),
                                Call(even, [op("subtract", m, const(1))])), scalar_type("bool"))
    f = relay.create_executor(mod=mod).evaluate(even)
    assert scalar(f(10)) is True and scalar(f(7)) is False


def test_if_on_tensor_condition():
    x, y = var("x", shape=(3,)), var("y", shape=(3,))
    cond = op("equal", op("sum", op("greater", x, y).astype("float32")), const(3.0))
    f = run(Function([x, y], If(cond, op("subtract", x, y), op("subtract", y, x))))
    a, b = np.array([3, 4, 5], "float32"), np.array([1, 1, 1], "float32")
    np.testing.assert_allclose(f(a, b).numpy(), a - b)
    np.testing.assert_allclose(f(b, a).numpy(), a - b)


def test_while_loop_runs_in_constant_stack():
    i, s = var("i", "int32"), var("s", "int32")
    loop = while_loop(lambda i, s: op("less", i, const(2000)), [i, s],
                      lambda i, s: [op("add", i, const(1)), op("add", s, i)])
    out = run(Call(loop, [const(0), const(0)]))
    assert scalar(out[0]) == 2000 and scalar(out[1]) == sum(range(2000))


def test_long_let_chain():
    x = var("x", "int32")
    lets = [var(f"v{k}", "int32") for k in range(3000)]
    expr = lets[-1]
    for k in reversed(range(3000)):
        expr = Let(lets[k], op("add", lets[k - 1] if k else x, const(1)), expr)
    assert scalar(run(Function([x], expr))(0)) == 3000


# -- closures, higher-order functions, refs --------------------------------------------------------
def test_closure_captures_variable():
    x, y = var("x", "int32"), var("y", "int32")
    add_y = Function([x], op("add", x, y))
    f = var("f")
    body = Let(y, const(10), Let(f, add_y, Call(f, [const(5)])))
    assert scalar(run(body)) == 15


def test_closure_returned_to_python_is_callable():
    x, y = var("x", "int32"), var("y", "int32")
    make_adder = Function([y], Function([x], op("add", x, y)))
    add3 = run(Call(make_adder, [const(3)]))
    assert scalar(add3(4)) == 7


def test_higher_order_apply_twice():
    f, x, z = var("f", relay.FuncType([I32], I32)), var("x", "int32"), var("z", "int32")
    twice = Function([f, x], Call(f, [Call(f, [x])]))
    inc = Function([z], op("add", z, const(1)))
    assert scalar(run(Call(twice, [inc, const(5)]))) == 7


def test_recursive_let_closure():
    f, n = var("f"), var("n", "int32")
    fact = Function([n], If(op("equal", n, const(0)), const(1),
                            op("multiply", n, Call(f, [op("subtract", n, const(1))]))), I32)
    assert scalar(run(Let(f, fact, Call(f, [const(5)])))) == 120


def test_refs_read_and_write():
    r = var("r")
    body = Let(r, RefCreate(const(1)),
               Let(var("_"), RefWrite(r, op("add", RefRead(r), const(41))), RefRead(r)))
    assert scalar(run(body)) == 42
    assert isinstance(run(RefCreate(const(1))), RefValue)


# -- ADTs and match -------------------------------------------------------------------------------
def _shape_adt() -> tuple[IRModule, Constructor, Constructor]:
    gtv, a = GlobalTypeVar("Shape"), TypeVar("A")
    circle = Constructor("Circle", [a], gtv)
    rect = Constructor("Rect", [a, a], gtv)
    mod = IRModule()
    mod.add_type_def(gtv, TypeData(gtv, [a], [circle, rect]))
    return mod, circle, rect


def test_match_on_constructors_and_tuples():
    mod, circle, rect = _shape_adt()
    s, r, w, h = var("s"), var("r", "int32"), var("w", "int32"), var("h", "int32")
    area = Function([s], Match(s, [
        Clause(PatternConstructor(circle, [PatternVar(r)]), op("multiply", r, r)),
        Clause(PatternConstructor(rect, [PatternVar(w), PatternVar(h)]), op("multiply", w, h))]))
    ex = relay.create_executor(mod=mod)
    assert scalar(ex.evaluate(Call(area, [rect(const(3), const(4))]))) == 12
    assert scalar(ex.evaluate(Call(area, [circle(const(5))]))) == 25
    a = var("a", "int32")
    swap = Match(Tuple([const(1), const(2)]), [
        Clause(PatternTuple([PatternVar(a), PatternWildcard()]), a)])
    assert scalar(ex.evaluate(swap)) == 1


def test_constructor_values_pass_in_and_out():
    mod, circle, rect = _shape_adt()
    v = ConstructorValue(rect.tag, [ember.nd.array(np.int32(2)), ember.nd.array(np.int32(5))], rect)
    s = var("s", TypeCall(mod.get_global_type_var("Shape"), [I32]))
    w = var("w", "int32")
    first = Function([s], Match(s, [Clause(PatternConstructor(rect, [PatternVar(w),
                                                                      PatternWildcard()]), w)],
                                complete=False))
    out = relay.create_executor(mod=mod).evaluate(first)(v)
    assert scalar(out) == 2
    made = relay.create_executor(mod=mod).evaluate(circle(const(1)))
    assert isinstance(made, ConstructorValue) and made.constructor is circle and made.tag == 0


def test_match_failure_names_the_value():
    mod, circle, rect = _shape_adt()
    s, r = var("s"), var("r", "int32")
    only_circle = Function([s], Match(s, [Clause(PatternConstructor(circle, [PatternVar(r)]), r)],
                                      complete=False))
    with pytest.raises(TVMError, match=r"match failed: no clause matches Rect\(int32\[\] 1"):
        relay.create_executor(mod=mod).evaluate(Call(only_circle, [rect(const(1), const(2))]))


# -- errors ---------------------------------------------------------------------------------------
def _two_arg_main():
    x, y = var("x", shape=(2, 3)), var("y", shape=(2, 3))
    return run(Function([x, y], op("add", x, y)))


def test_wrong_argument_count():
    with pytest.raises(TVMError, match=r"expected 2 argument\(s\) \(x, y\), got 3"):
        _two_arg_main()(*[np.zeros((2, 3), "float32")] * 3)
    with pytest.raises(TVMError, match=r"missing y"):
        _two_arg_main()(np.zeros((2, 3), "float32"))


def test_bad_argument_shape_and_dtype_name_the_parameter():
    f, good = _two_arg_main(), np.zeros((2, 3), "float32")
    with pytest.raises(TVMError, match=r"'y': expected float32\[2, 3\], got float32\[3, 3\]"):
        f(good, np.zeros((3, 3), "float32"))
    with pytest.raises(TVMError, match=r"argument 'x': expected float32\[2, 3\], got float64"):
        f(good.astype("float64"), good)
    with pytest.raises(TVMError, match=r"no parameter named 'z'"):
        f(good, good, z=good)


def test_runtime_error_carries_context():
    name = "test_interpreter.fail"
    if name not in OP_REGISTRY:
        def bad(a, attrs=None):
            raise ValueError("boom")
        register_op(OpDef(name, 1, type_rel=lambda ts, attrs=None: ts[0], reference=bad))
    x = var("x", shape=(2,))
    f = run(Function([x], op("add", op(name, x), x)))
    with pytest.raises(TVMError, match=r"(?s)ValueError: boom.*while executing.*\.fail"):
        f(np.zeros(2, "float32"))


def test_op_without_reference():
    name = "test_interpreter.noref"
    if name not in OP_REGISTRY:
        register_op(OpDef(name, 1, type_rel=lambda ts, attrs=None: ts[0]))
    with pytest.raises(OpNotImplemented, match="no numpy reference"):
        run(op(name, const(1.0)))


def test_runtime_checks_without_type_inference():
    ev = Evaluator(IRModule())
    with pytest.raises(TVMError, match=r"condition must be a 0-d boolean tensor, got float32\[2\]"):
        ev.eval(If(const([1.0, 2.0]), const(1), const(2)))
    with pytest.raises(TVMError, match="unbound variable %q"):
        ev.eval(op("add", var("q", "int32"), const(1)))
    with pytest.raises(TVMError, match=r"tuple field \.3: out of range"):
        ev.eval(TupleGetItem(Tuple([const(1)]), 3))


def test_executor_kind_device_and_target_are_checked():
    with pytest.raises(TVMError, match=r"kind 'woof' is not available; available kinds: 'debug'"):
        relay.create_executor("woof")
    with pytest.raises(TVMError, match="CPU only"):
        relay.create_executor(device=ember.cuda(0))
    with pytest.raises(TVMError, match="target 'cuda' is not supported"):
        relay.create_executor(target="cuda")
    with pytest.raises(TVMError, match="no function @main"):
        relay.create_executor().evaluate()


def test_free_variables_are_reported():
    x = var("x", "int32")
    with pytest.raises(TVMError, match="free variables %x"):
        run(op("add", x, const(1)))

"""No pass edits its input: every registered pass, InferType included, leaves the module it is
given structurally and identically as it was (every reachable node, every field, every type)."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from _pass_helpers import SHAPE, _step
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.ir import IRModule, Op
from ember.ir.types import Any as AnyDim
from ember.ir.types import FuncType, TensorType
from ember.ir.visitor import post_order, walk_children
from ember.relay.loops import while_loop
from ember.relay.transform import InferType, get_pass, infer_type, list_passes
from ember.runtime.ndarray import NDArray


# -- a deep fingerprint of a module -------------------------------------------------------------
def _value(v: Any) -> Any:
    """What a field holds: nodes by identity (they are fingerprinted on their own), arrays by
    their bytes, everything else (types, attrs, spans) by identity and printed value."""
    if isinstance(v, ember.ir.RelayExpr):
        return ("node", id(v))
    if isinstance(v, NDArray):
        arr = v.numpy()
        return ("array", id(v), arr.dtype.str, arr.shape, arr.tobytes())
    if isinstance(v, tuple):
        return ("tuple", id(v), tuple(_value(x) for x in v))
    if isinstance(v, relay.Clause):
        return ("clause", id(v), repr(v.lhs), id(v.rhs))
    return ("value", id(v), repr(v))


def fingerprint(mod: IRModule) -> list[Any]:
    """Every global, type definition and reachable node of ``mod``, with all their fields."""
    out: list[Any] = [("module", id(mod.functions), id(mod.type_definitions), repr(mod.attrs))]
    for gv, func in mod.functions.items():
        out.append(("global", id(gv), gv.name_hint, repr(gv.checked_type_), id(func)))
    for gtv, td in mod.type_definitions.items():
        out.append(("typedef", id(gtv), id(td), _value(td.constructors)))
    seen: set[int] = set()
    for func in mod.functions.values():
        for node in post_order(func, kids=walk_children, done=seen):
            seen.add(id(node))
            fields = tuple((f.name, _value(getattr(node, f.name)))
                           for f in dataclasses.fields(node))
            out.append((id(node), type(node).__name__, fields))
    return out


# -- random programs: dataflow, lets, if, a loop; typed and untyped ------------------------------
@st.composite
def programs(draw: Any) -> IRModule:
    """An untyped module: a random dataflow program, maybe under lets, an if or a loop."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x, y = relay.var("x", shape=SHAPE), relay.var("y", shape=SHAPE)
    pool: list[relay.Expr] = [x, y]
    for _ in range(draw(st.integers(1, 6))):
        pool.append(_step(draw, pool, rng))
    body = pool[-1]
    shape = draw(st.sampled_from(["plain", "let", "if", "loop"]))
    if shape == "let":
        v = relay.Var("v")
        body = relay.Let(v, body, relay.add(v, pool[draw(st.integers(0, len(pool) - 1))]))
    elif shape == "if":
        cond = relay.less(relay.sum(x), relay.sum(y))
        body = relay.If(cond, body, relay.negative(pool[-1]))
    elif shape == "loop":
        i = relay.var("i", shape=(), dtype="int32")
        s = relay.var("s", shape=SHAPE)
        loop = while_loop(lambda i, s: relay.less(i, relay.const(2)), [i, s],
                          lambda i, s: [relay.add(i, relay.const(1)), relay.add(s, body)])
        body = relay.TupleGetItem(relay.Call(loop, [relay.const(0), x]), 1)
    return IRModule.from_expr(relay.Function([x, y], body))


def _run_pass(name: str, mod: IRModule) -> None:
    with ember.transform.PassContext(opt_level=3):
        try:
            get_pass(name)(mod)
        except ember.TVMError:
            pass  # refusing a program is allowed; editing it is not


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.booleans())
def test_no_registered_pass_edits_its_input(mod, typed):
    if typed:
        mod = InferType()(mod)
    names = list_passes()
    assert "infertype" in names and "fuseops" in names and len(names) >= 10
    for name in names:
        before = fingerprint(mod)
        _run_pass(name, mod)
        assert fingerprint(mod) == before, f"pass {name} edited its input"


def test_infer_type_on_an_expression_leaves_it_untyped():
    x = relay.var("x", shape=(2,))
    e = relay.add(relay.negative(x), x)
    holder = IRModule.from_expr(e)
    before = fingerprint(holder)
    typed = infer_type(e)
    assert typed is not e and typed.checked_type == TensorType((2,), "float32")
    assert fingerprint(holder) == before and e.checked_type_ is None


def test_fingerprint_sees_a_type_written_into_a_node():
    x = relay.var("x", shape=(2,))
    mod = IRModule.from_expr(relay.negative(x))
    before = fingerprint(mod)
    object.__setattr__(mod["main"].body, "checked_type_", TensorType((2,), "float32"))
    assert fingerprint(mod) != before


# -- one sub-expression, two modules, two types --------------------------------------------------
def test_shared_subexpression_typed_differently_in_two_modules():
    p = relay.Var("p")  # unannotated: each module's caller decides its type
    shared = relay.Function([p], relay.negative(relay.add(p, p)))
    x2, x3 = relay.var("x", shape=(2,)), relay.var("x", shape=(3, 4), dtype="int32")
    mod2 = IRModule.from_expr(relay.Function([x2], relay.Call(shared, [x2])))
    mod3 = IRModule.from_expr(relay.Function([x3], relay.Call(shared, [x3])))
    typed2, typed3 = InferType()(mod2), InferType()(mod3)
    t2, t3 = TensorType((2,), "float32"), TensorType((3, 4), "int32")
    assert typed2["main"].body.op.checked_type == FuncType([t2], t2)
    assert typed3["main"].body.op.checked_type == FuncType([t3], t3)
    assert typed2["main"].body.op.body.checked_type == t2  # still, after typing mod3
    assert shared.checked_type_ is None and p.checked_type_ is None


def test_shared_global_typed_differently_in_two_modules():
    p = relay.Var("p")
    double = relay.Function([p], relay.add(p, p))
    mods = []
    for shape in ((5,), (1, 7)):
        mod = IRModule()
        mod["double"] = double
        x = relay.var("x", shape=shape)
        mod["main"] = relay.Function([x], mod.get_global_var("double")(x))
        mods.append(InferType()(mod))
    for mod, shape in zip(mods, ((5,), (1, 7))):
        t = TensorType(shape, "float32")
        assert mod["double"].checked_type == FuncType([t], t)
        assert mod.get_global_var("double").checked_type == FuncType([t], t)
        assert mod["main"].body.op is mod.get_global_var("double")
    assert double.checked_type_ is None


# -- let-bound recursion keeps its declared generality ------------------------------------------
def test_loop_with_unknown_dimension_is_not_narrowed_by_its_call():
    i = relay.var("i", shape=(), dtype="int32")
    x = relay.var("x", shape=(AnyDim(), 3))
    loop = while_loop(lambda i, x: relay.less(i, relay.const(3)), [i, x],
                      lambda i, x: [relay.add(i, relay.const(1)), relay.concatenate([x, x], 0)])
    x0 = relay.var("x0", shape=(2, 3))
    body = relay.TupleGetItem(relay.Call(loop, [relay.const(0), x0]), 1)
    mod = InferType()(IRModule.from_expr(relay.Function([x0], body)))
    declared = TensorType((AnyDim(), 3), "float32")
    fty = mod["main"].body.tuple_value.op.checked_type  # the let: its value, %while_loop
    assert fty == FuncType([TensorType((), "int32"), declared],
                           relay.TupleType([TensorType((), "int32"), declared]))
    concats = [n for n in post_order(mod["main"]) if isinstance(n, relay.Call)
               and isinstance(n.op, Op) and n.op.name == "concatenate"]
    assert [c.checked_type for c in concats] == [declared]
    assert mod["main"].checked_type.ret_type == declared


def test_build_and_vm_compile_leave_the_module_as_it_was():
    x = relay.var("x", shape=(2, 3))
    i, s = relay.var("i", shape=(), dtype="int32"), relay.var("s", shape=(2, 3))
    loop = while_loop(lambda i, s: relay.less(i, relay.const(2)), [i, s],
                      lambda i, s: [relay.add(i, relay.const(1)), relay.add(s, relay.tanh(x))])
    looped = IRModule.from_expr(relay.Function([x], relay.TupleGetItem(
        relay.Call(loop, [relay.const(0), x]), 1)))
    for mod in (looped, InferType()(looped)):
        before = fingerprint(mod)
        relay.vm.compile(mod, "llvm")
        assert fingerprint(mod) == before
    flat = IRModule.from_expr(relay.Function([x], relay.nn.relu(relay.add(x, relay.const(1.0)))))
    before = fingerprint(flat)
    relay.build(flat, "llvm")
    assert fingerprint(flat) == before

"""InferType: the types it finds for well-typed programs."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import relay
from ember.ir import IRModule, Op
from ember.ir.types import Any, FuncType, ShapeVar, TensorType, TupleType, TypeCall, TypeVar
from ember.ir.visitor import walk_children
from ember.relay.transform import InferType, InferTypeLocal, infer_type


def call(name, *args, **attrs):
    op = Op.get(name)
    return relay.Call(op, args, op.make_attrs(**attrs) if attrs else None)


def T(*shape, dtype="float32"):
    return TensorType(shape, dtype)


def copy_of(node, root, typed_root):
    """The typed copy of ``node`` (a node of ``root``) in ``typed_root``, InferType's copy of
    ``root``: both have the same shape, so their walks visit matching nodes in step."""
    pairs = zip(ember.ir.post_order(root, kids=walk_children),
                ember.ir.post_order(typed_root, kids=walk_children))
    for old, new in pairs:
        if old is node:
            return new
    raise AssertionError(f"{node!r} is not a node of the root")


def main_type(body_fn, *params):
    """The inferred FuncType of ``fn(params) { body_fn(*params) }``."""
    mod = InferType()(IRModule.from_expr(relay.Function(list(params), body_fn(*params))))
    return mod["main"].checked_type


def list_adt(mod):
    """``type List[A] { Cons(A, List[A]), Nil }`` added to ``mod``."""
    lst, a = relay.GlobalTypeVar("List"), relay.TypeVar("A")
    cons = relay.Constructor("Cons", [a, lst(a)], lst)
    nil = relay.Constructor("Nil", [], lst)
    mod[lst] = relay.TypeData(lst, [a], [cons, nil])
    return lst, cons, nil


# -- operators ------------------------------------------------------------------------------------
def test_broadcasting_add():
    x, y = relay.var("x", shape=(3, 1)), relay.var("y", shape=(4,))
    ty = main_type(lambda x, y: call("add", x, y), x, y)
    assert ty == FuncType([T(3, 1), T(4)], T(3, 4))


dims = st.integers(1, 4)


@st.composite
def broadcastable(draw):
    out = draw(st.lists(dims, min_size=0, max_size=4))
    def operand():
        k = draw(st.integers(0, len(out)))
        return tuple(d if draw(st.booleans()) else 1 for d in out[len(out) - k:])
    return operand(), operand()


@settings(max_examples=40, deadline=None)
@given(broadcastable())
def test_inferred_broadcast_shape_is_numpys(shapes):
    a, b = shapes
    x, y = relay.var("x", shape=a), relay.var("y", shape=b)
    out = infer_type(call("multiply", x, y)).checked_type
    assert out == T(*np.broadcast_shapes(a, b))


def test_conv2d():
    data, weight = relay.var("d", shape=(1, 3, 32, 32)), relay.var("w", shape=(8, 3, 3, 3))
    ty = main_type(lambda d, w: call("nn.conv2d", d, w, padding=(1, 1), channels=8,
                                     kernel_size=(3, 3)), data, weight)
    assert ty.ret_type == T(1, 8, 32, 32)


def test_reshape_with_zero_and_minus_one():
    x = relay.var("x", shape=(2, 3, 4))
    assert main_type(lambda x: call("reshape", x, newshape=(0, -1)), x).ret_type == T(2, 12)


def test_reductions():
    x = relay.var("x", shape=(2, 3, 4))
    assert main_type(lambda x: call("sum", x, axis=(1,), keepdims=True), x).ret_type == T(2, 1, 4)
    assert main_type(lambda x: call("mean", x), x).ret_type == T()


def test_dynamic_batch_dim_flows_through():
    x = relay.var("x", shape=(Any(), 8))
    assert main_type(lambda x: call("exp", x), x).ret_type == T(Any(), 8)
    n = ShapeVar("n")
    y = relay.var("y", shape=(n, 8))
    assert main_type(lambda y: call("add", y, y), y).ret_type.shape[0] is n


def test_dynamic_dense():
    x, w = relay.var("x", shape=(Any(), 16)), relay.var("w", shape=(10, 16))
    assert main_type(lambda x, w: call("nn.dense", x, w), x, w).ret_type == T(Any(), 10)


# -- tuples, lets, if, closures, references -------------------------------------------------------
def test_tuples_and_projections():
    x, y = relay.var("x", shape=(2,)), relay.var("y", "int32")
    tup = relay.Tuple([x, y, call("add", x, x)])
    body = relay.Tuple([relay.TupleGetItem(tup, 2), relay.TupleGetItem(tup, 1)])
    fn = relay.Function([x, y], body)
    func = infer_type(fn)
    assert func.checked_type.ret_type == TupleType([T(2), T(dtype="int32")])
    assert copy_of(tup, fn, func).checked_type == TupleType([T(2), T(dtype="int32"), T(2)])


def test_projection_of_unannotated_tuple_waits_for_its_type():
    p = relay.Var("p")  # its type only comes from the call below
    f = relay.Var("f")
    fn = relay.Function([p], relay.TupleGetItem(p, 1))
    x = relay.var("x", shape=(3,))
    body = relay.Let(f, fn, relay.Call(f, [relay.Tuple([x, relay.const(1)])]))
    assert infer_type(relay.Function([x], body)).checked_type.ret_type == T(dtype="int32")


def test_if_on_a_tensor_condition():
    x, y = relay.var("x", shape=(4,)), relay.var("y", shape=(4,))
    cond = call("equal", call("sum", x), call("sum", y))
    body = relay.If(cond, call("add", x, y), x)
    fn = relay.Function([x, y], body)
    func = infer_type(fn)
    assert copy_of(cond, fn, func).checked_type == T(dtype="bool")
    assert func.body.checked_type == T(4)


def test_let_annotation_and_inference():
    x = relay.var("x", shape=(2, 2))
    v, w = relay.Var("v"), relay.var("w", shape=(2, 2))
    body = relay.Let(v, call("negative", x), relay.Let(w, v, call("add", v, w)))
    fn = relay.Function([x], body)
    func = infer_type(fn)
    assert copy_of(v, fn, func).checked_type == T(2, 2) and func.body.checked_type == T(2, 2)


def test_closure_captures_and_is_returned():
    x, y = relay.var("x", shape=(3,)), relay.Var("y")
    inner = relay.Function([y], call("add", x, y))
    f = relay.Var("f")
    body = relay.Let(f, inner, relay.Tuple([relay.Call(f, [x]), f]))
    fn = relay.Function([x], body)
    func = infer_type(fn)
    assert copy_of(inner, fn, func).checked_type == FuncType([T(3)], T(3))
    assert func.checked_type.ret_type == TupleType([T(3), FuncType([T(3)], T(3))])


def test_local_recursion_through_let():
    i, acc, loop = relay.var("i", "int32"), relay.var("acc", shape=(2,)), relay.Var("loop")
    step = relay.Call(loop, [call("subtract", i, relay.const(1)), call("add", acc, acc)])
    fn = relay.Function([i, acc], relay.If(call("equal", i, relay.const(0)), acc, step))
    x = relay.var("x", shape=(2,))
    body = relay.Let(loop, fn, relay.Call(loop, [relay.const(3), x]))
    fn = relay.Function([x], body)
    assert copy_of(loop, fn, infer_type(fn)).checked_type == FuncType([T(dtype="int32"), T(2)],
                                                                      T(2))


def test_unknown_dims_are_refined_when_a_relation_reruns():
    p, f = relay.Var("p"), relay.Var("f")
    inner = call("add", p, p)
    x, z = relay.var("x", shape=(Any(), 4)), relay.var("z", shape=(3, 4))
    body = relay.Let(f, relay.Function([p], inner),
                     relay.Tuple([relay.Call(f, [x]), relay.Call(f, [z])]))
    fn = relay.Function([x, z], body)
    assert copy_of(inner, fn, infer_type(fn)).checked_type == T(3, 4)


def test_references():
    x = relay.var("x", shape=(2,))
    r = relay.Var("r")
    body = relay.Let(r, relay.RefCreate(x), relay.Tuple([
        relay.RefWrite(r, call("add", x, x)), relay.RefRead(r)]))
    fn = relay.Function([x], body)
    func = infer_type(fn)
    assert copy_of(r, fn, func).checked_type == relay.RefType(T(2))
    assert func.checked_type.ret_type == TupleType([TupleType([]), T(2)])


# -- global functions ---------------------------------------------------------------------------
def test_polymorphic_identity_used_at_two_types():
    mod = IRModule()
    a = relay.TypeVar("A")
    ident = relay.GlobalVar("id")
    p = relay.Var("p", a)
    mod[ident] = relay.Function([p], p, a, [a])
    x, n = relay.var("x", shape=(2,)), relay.var("n", "int32")
    mod["main"] = relay.Function([x, n], relay.Tuple([ident(x), ident(n)]))
    mod = InferType()(mod)
    assert mod["main"].checked_type.ret_type == TupleType([T(2), T(dtype="int32")])
    assert mod[ident].checked_type == FuncType([a], a, [a])


def test_unannotated_global_is_generalised():
    mod = IRModule()
    p, x, n = relay.Var("p"), relay.var("x", shape=(2,)), relay.var("n", "int32")
    mod["pair"] = relay.Function([p], relay.Tuple([p, p]))
    pair = mod.get_global_var("pair")
    mod["main"] = relay.Function([x, n], relay.Tuple([pair(x), pair(n)]))
    mod = InferType()(mod)
    fty = mod["pair"].checked_type
    (tv,) = fty.type_params
    assert isinstance(tv, TypeVar) and fty == FuncType([tv], TupleType([tv, tv]), [tv])
    assert mod["main"].checked_type.ret_type.fields[1] == TupleType([T(dtype="int32")] * 2)


def test_global_constrained_by_its_caller():
    mod = IRModule()
    p, x = relay.Var("p"), relay.var("x", shape=(5,))
    mod["double"] = relay.Function([p], call("add", p, p))  # `add` needs %p's type
    mod["main"] = relay.Function([x], mod.get_global_var("double")(x))
    mod = InferType()(mod)
    assert mod["double"].checked_type == FuncType([T(5)], T(5))


def test_mutual_recursion_is_even_is_odd():
    mod = IRModule()
    even, odd = relay.GlobalVar("is_even"), relay.GlobalVar("is_odd")
    for gv, other, base in ((even, odd, True), (odd, even, False)):
        n = relay.var("n", "int32")
        rec = relay.Call(other, [call("subtract", n, relay.const(1))])
        mod[gv] = relay.Function([n], relay.If(call("equal", n, relay.const(0)),
                                               relay.const(base), rec))
    mod = InferType()(mod)
    for gv in (even, odd):
        assert mod[gv].checked_type == FuncType([T(dtype="int32")], T(dtype="bool"))
        assert mod.get_global_var(gv.name_hint).checked_type == mod[gv].checked_type
        assert gv.checked_type_ is None  # the input's GlobalVar is left as it was


def _length(mod, cons, nil, annotate):
    length = relay.GlobalVar("length")
    b = relay.TypeVar("B")
    xs = relay.Var("xs", relay.TypeCall(cons.belong_to, [b]) if annotate else None)
    h, t = relay.Var("h"), relay.Var("t")
    rec = call("add", relay.const(1), relay.Call(length, [t]))
    body = relay.Match(xs, [
        relay.Clause(relay.PatternConstructor(cons, [relay.PatternVar(h), relay.PatternVar(t)]),
                     rec),
        relay.Clause(relay.PatternConstructor(nil), relay.const(0))])
    mod[length] = relay.Function([xs], body, relay.scalar_type("int32") if annotate else None,
                                 [b] if annotate else [])
    return length, h, t


@pytest.mark.parametrize("annotate", [True, False])
def test_list_adt_and_recursive_length(annotate):
    mod = IRModule()
    lst, cons, nil = list_adt(mod)
    length, h, t = _length(mod, cons, nil, annotate)
    x = relay.var("x", shape=(2,))
    mod["main"] = relay.Function([x], length(cons(x, cons(x, nil()))))
    before = mod[length]
    mod = InferType()(mod)
    fty = mod[length].checked_type
    (b,) = fty.type_params
    assert fty == FuncType([TypeCall(lst, [b])], T(dtype="int32"), [b])
    assert copy_of(h, before, mod[length]).checked_type is b
    assert copy_of(t, before, mod[length]).checked_type == TypeCall(lst, [b])
    assert mod["main"].checked_type.ret_type == T(dtype="int32")
    a = mod[lst].type_vars[0]
    assert cons.checked_type == FuncType([a, TypeCall(lst, [a])], TypeCall(lst, [a]), [a])


def test_constructor_values_and_tuple_patterns():
    mod = IRModule()
    _, cons, nil = list_adt(mod)
    x, p, q = relay.var("x", "int32"), relay.Var("p"), relay.Var("q")
    pair = relay.Tuple([cons(x, nil()), x])
    body = relay.Match(pair, [
        relay.Clause(relay.PatternTuple([relay.PatternConstructor(nil), relay.PatternVar(p)]), p),
        relay.Clause(relay.PatternTuple([relay.PatternWildcard(), relay.PatternVar(q)]), q)])
    mod["main"] = fn = relay.Function([x], body)
    mod = InferType()(mod)
    assert copy_of(p, fn, mod["main"]).checked_type == T(dtype="int32")
    assert mod["main"].body.checked_type == T(dtype="int32")


def test_infer_type_of_expression_uses_module_globals():
    mod = IRModule()
    _, cons, nil = list_adt(mod)
    length, _, _ = _length(mod, cons, nil, annotate=True)
    e = length(cons(relay.const(1.5), nil()))
    assert InferTypeLocal(e, mod) == T(dtype="int32")


# -- the pass itself ------------------------------------------------------------------------------
def test_infer_type_returns_new_module_and_annotates_every_node():
    x = relay.var("x", shape=(2,))
    body = call("add", call("negative", x), x)
    mod = IRModule.from_expr(relay.Function([x], body))
    with pytest.raises(ValueError, match="run relay.transform.InferType"):
        _ = body.checked_type
    out = InferType()(mod)
    assert out is not mod and out["main"] is not mod["main"]
    assert all(n.checked_type_ is not None for n in ember.ir.post_order(out["main"])
               if not isinstance(n, Op))
    assert all(n.checked_type_ is None for n in ember.ir.post_order(mod["main"]))


def test_inference_is_repeatable():
    x = relay.var("x", shape=(2,))
    mod = IRModule.from_expr(relay.Function([x], call("add", x, x)))
    first = InferType()(mod)["main"].checked_type
    assert InferType()(InferType()(mod))["main"].checked_type == first


def test_long_let_chain_does_not_recurse():
    x = relay.var("x", shape=(2,))
    vs = [relay.Var(f"v{i}") for i in range(3000)]
    body = vs[-1]
    for i in reversed(range(len(vs))):
        body = relay.Let(vs[i], call("add", x if i == 0 else vs[i - 1], x), body)
    fn = relay.Function([x], body)
    assert copy_of(vs[-1], fn, infer_type(fn)).checked_type == T(2)


def test_parsed_program():
    mod = ember.parser.fromtext("""#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32]) {
  %0 = nn.relu(%x);
  sum(%0, axis=[1])
}""")
    assert InferType()(mod)["main"].checked_type.ret_type == T(2)


# -- the unifier --------------------------------------------------------------------------------
dim_or_any = st.one_of(st.integers(1, 3), st.just(Any()))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(dim_or_any, dim_or_any), max_size=4))
def test_unify_tensor_laws(pairs):
    from ember.relay.transform._unify import Unifier, UnifyError

    a, b = T(*(p[0] for p in pairs)), T(*(p[1] for p in pairs))
    u = Unifier()
    assert u.unify(a, a) == a
    compatible = all(isinstance(x, Any) or isinstance(y, Any) or x == y for x, y in pairs)
    if not compatible:
        with pytest.raises(UnifyError, match="dimension"):
            u.unify(a, b)
        return
    merged = u.unify(a, b)
    assert merged == u.unify(b, a)
    # the concrete side wins: a dimension is Any only where both were
    assert all(isinstance(m, Any) == (isinstance(x, Any) and isinstance(y, Any))
               for m, (x, y) in zip(merged.shape, pairs))


def test_unify_unknowns_and_shape_vars():
    from ember.ir.types import IncompleteType
    from ember.relay.transform._unify import Unifier, UnifyError

    u = Unifier()
    n = ShapeVar("n")
    assert u.unify(T(n, 2), T(Any(), 2)).shape[0] is n
    with pytest.raises(UnifyError, match="dimension 0 is n vs 3"):
        u.unify(T(n), T(3))
    a, b = IncompleteType(), IncompleteType()
    u.unify(a, b)
    u.unify(b, T(Any(), 4))
    u.unify(a, T(5, 4))  # refines the shared value
    assert u.resolve(b) == T(5, 4)
    with pytest.raises(UnifyError, match="dtype float32 vs int32"):
        u.unify(a, T(5, 4, dtype="int32"))


def test_unannotated_weights_get_their_type_from_data_and_attrs():
    from ember import relay

    x = relay.var("x", shape=(1, 3, 8, 8))
    w, dw = relay.var("w"), relay.var("dw")
    y = relay.nn.conv2d(x, w, channels=4, kernel_size=(3, 3), padding=(1, 1))
    y = relay.nn.batch_norm(y, *(relay.var(n) for n in "gbmv"))[0]
    y = relay.nn.dense(relay.nn.batch_flatten(y), dw, units=10)
    mod = relay.transform.InferType()(ember.IRModule.from_expr(y))
    params = {p.name_hint: p.checked_type for p in mod["main"].params}
    assert params["w"] == relay.TensorType((4, 3, 3, 3), "float32")
    assert params["g"] == relay.TensorType((4,), "float32")
    assert params["dw"] == relay.TensorType((10, 256), "float32")
    assert mod["main"].body.checked_type == relay.TensorType((1, 10), "float32")


def _count_checkers(monkeypatch):
    from ember.relay.transform import type_infer

    made = []
    real = type_infer.ModuleChecker

    class Counting(real):
        def __init__(self, mod):
            made.append(mod)
            super().__init__(mod)

    monkeypatch.setattr(type_infer, "ModuleChecker", Counting)
    return made


def test_a_module_typed_already_is_not_checked_again(monkeypatch):
    """Passes start and end with InferType, so most runs in a build re-inferred a module the
    previous pass had just typed (the VM build ran it 37 times, 12 to 14 of them needed)."""
    x = relay.var("x", shape=(2, 3))
    mod = IRModule.from_expr(relay.Function([x], relay.nn.relu(x)))
    made = _count_checkers(monkeypatch)
    typed = InferType()(mod)
    again = InferType()(typed)
    rebuilt = InferType()(IRModule(dict(typed.functions), typed.type_definitions))
    assert len(made) == 1
    for out in (again, rebuilt):
        assert out is not typed and out["main"] is typed["main"]
        assert out["main"].checked_type == typed["main"].checked_type
    again["main"] = relay.Function([x], x)  # a copy: the typed module is left as it was
    assert typed["main"].body.op.name == "nn.relu"


def test_a_changed_module_is_checked_again(monkeypatch):
    x = relay.var("x", shape=(2, 3))
    typed = InferType()(IRModule.from_expr(relay.Function([x], x)))
    made = _count_checkers(monkeypatch)
    typed["main"] = relay.Function([x], relay.add(x, relay.ones((4,), "float32")))
    with pytest.raises(ember.TVMError, match="add: cannot broadcast"):
        InferType()(typed)
    helper = relay.Function([x], relay.nn.relu(x))
    typed["main"] = relay.Function([x], x)
    typed["helper"] = helper
    out = InferType()(typed)
    assert len(made) == 2 and out["helper"].checked_type == FuncType([T(2, 3)], T(2, 3))

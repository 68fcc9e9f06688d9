"""The Prelude: its types and accessors, that type inference accepts it, and each function
run on the interpreter against the Python equivalent."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from ember import relay
from ember.ir import Call, FuncType, Function, IRModule, TupleType, TypeCall, const, var
from ember.relay.backend.interpreter import ConstructorValue
from ember.relay.prelude import GLOBAL_DEFS, Prelude
from ember.runtime.container import ADT
from ember.runtime.errors import TVMError

I32 = relay.scalar_type("int32")
_P = Prelude()
_EX = relay.create_executor(mod=_P.mod)


def to_list_value(p: Prelude, items: list[Any]) -> ConstructorValue:
    """A Python list of arrays (or numbers) as a Prelude List value."""
    out = ConstructorValue(p.nil.tag, [], p.nil)
    for item in reversed(items):
        out = ConstructorValue(p.cons.tag, [ember.nd.array(np.asarray(item, "int32")), out], p.cons)
    return out


def from_list_value(v: ConstructorValue) -> list[Any]:
    """A Prelude List value back as a Python list (tensors as numpy)."""
    out = []
    while v.constructor.name_hint == "Cons":
        head, v = v.fields
        out.append(head.numpy() if hasattr(head, "numpy") else head)
    return out


def ints(v: ConstructorValue) -> list[int]:
    return [int(x) for x in from_list_value(v)]


def call(name: str, *args: Any) -> Any:
    return _EX.evaluate(_P.get_global_var(name))(*args)


def lam(*names: str, body) -> Function:
    vs = [var(n, "int32") for n in names]
    return Function(vs, body(*vs))


# -- structure and accessors ----------------------------------------------------------------------
def test_public_names():
    import ember.relay.backend.interpreter as interp

    assert relay.prelude.Prelude is Prelude and relay.Prelude is Prelude
    assert relay.backend.interpreter is interp and interp.ConstructorValue is ConstructorValue


def test_types_and_constructors():
    list_t, cons, nil = _P.mod.get_type("List")
    assert _P.get_type("List") is list_t
    assert list_t.name_hint == "List" and (cons.tag, nil.tag) == (0, 1)
    assert (_P.l, _P.cons, _P.nil) == (list_t, cons, nil) and _P.List is list_t
    assert [c.name_hint for c in _P.mod[_P.get_type("Option")].constructors] == ["Some", "None"]
    assert _P.tree.name_hint == "Tree" and _P.rose.name_hint == "Rose"
    assert _P.mod.get_constructor("Cons") is cons
    assert _P.get_ctor("Option", "Some") is _P.some
    assert _P.mod.get_global_type_var("List") is list_t


def test_every_function_is_fully_annotated():
    for name in GLOBAL_DEFS:
        func = _P.mod[name]
        ty = func.func_type_annotation
        assert isinstance(ty, FuncType), name
        assert getattr(_P, name) is _P.get_global_var(name)
    assert len(_P.mod["map"].type_params) == 2
    assert _P.mod["map"].ret_type == TypeCall(_P.l, [_P.mod["map"].type_params[1]])


def test_type_inference_accepts_the_prelude():
    mod = relay.transform.InferType()(_P.mod)
    ty = mod["foldl"].checked_type
    assert isinstance(ty, FuncType) and len(ty.type_params) == 2


def test_prelude_on_existing_module_is_idempotent():
    mod = IRModule()
    p1 = Prelude(mod)
    p2 = Prelude(mod)
    assert p1.map is p2.map and p1.cons is p2.cons and p1.mod is mod


def test_clashing_definitions_are_rejected():
    mod = IRModule()
    x = var("x", "int32")
    mod["map"] = Function([x], x)
    with pytest.raises(TVMError, match="already defines map"):
        Prelude(mod)


def test_unknown_names():
    with pytest.raises(TVMError, match="no function named 'nope'"):
        _P.get_global_var("nope")
    with pytest.raises(TVMError, match="no function named 'tensor_arr_float32' "
                                       r"\(the tensor-array definitions are tensor_take, "):
        _P.get_global_var("tensor_arr", "float32")


# -- running the functions ------------------------------------------------------------------------
def test_map_foldl_foldr():
    double = lam("x", body=lambda x: relay.add(x, x))
    assert ints(call("map", double, to_list_value(_P, [1, 2, 3]))) == [2, 4, 6]
    minus = lam("a", "b", body=lambda a, b: relay.subtract(a, b))
    assert int(call("foldl", minus, 10, to_list_value(_P, [1, 2, 3])).numpy()) == 4
    assert int(call("foldr", minus, 10, to_list_value(_P, [1, 2, 3])).numpy()) == -8


def test_list_accessors():
    xs = to_list_value(_P, [5, 6, 7])
    assert int(call("nth", xs, 2).numpy()) == 7
    assert int(call("length", xs).numpy()) == 3
    assert int(call("hd", xs).numpy()) == 5 and ints(call("tl", xs)) == [6, 7]
    assert ints(call("update", xs, 1, 0)) == [5, 0, 7]
    assert int(call("sum", xs).numpy()) == 18


def test_concat_rev_filter_zip():
    a, b = to_list_value(_P, [1, 2]), to_list_value(_P, [3, 4, 5])
    assert ints(call("concat", a, b)) == [1, 2, 3, 4, 5]
    assert ints(call("rev", b)) == [5, 4, 3]
    odd = lam("x", body=lambda x: relay.equal(relay.mod(x, const(2)), const(1)))
    assert ints(call("filter", odd, b)) == [3, 5]
    pairs = from_list_value(call("zip", a, b))
    assert [(int(p[0].numpy()), int(p[1].numpy())) for p in pairs] == [(1, 3), (2, 4)]
    assert all(isinstance(p, ADT) for p in pairs)


def test_foldr1_and_hd_of_nil():
    mx = lam("a", "b", body=lambda a, b: relay.maximum(a, b))
    assert int(call("foldr1", mx, to_list_value(_P, [3, 9, 2])).numpy()) == 9
    with pytest.raises(TVMError, match=r"match failed: no clause matches Nil"):
        call("hd", to_list_value(_P, []))


def test_map_accum():
    acc, x = var("acc", "int32"), var("x", "int32")
    running = Function([acc, x], relay.Tuple([relay.add(acc, x), relay.multiply(acc, x)]))
    xs = to_list_value(_P, [1, 2, 3])
    total, outs = call("map_accuml", running, 0, xs)
    assert int(total.numpy()) == 6 and ints(outs) == [0, 2, 9]
    total, outs = call("map_accumr", running, 0, xs)
    assert int(total.numpy()) == 6 and ints(outs) == [5, 6, 0]


def test_unfold():
    n = var("n", "int32")
    step = Function([n], relay.If(relay.equal(n, const(0)), _P.none(),
                                  _P.some(relay.Tuple([relay.subtract(n, const(1)), n]))))
    assert ints(call("unfoldr", step, 3)) == [3, 2, 1]
    assert ints(call("unfoldl", step, 3)) == [1, 2, 3]


def test_tree_functions():
    def leaf(v):
        return _P.rose(const(v), _P.nil())

    tree = _P.rose(const(1), _P.cons(leaf(2), _P.cons(_P.rose(const(3), _P.cons(leaf(4), _P.nil())),
                                                      _P.nil())))
    assert int(_EX.evaluate(_P.size(tree)).numpy()) == 4
    double = lam("x", body=lambda x: relay.add(x, x))
    out = _EX.evaluate(_P.tmap(double, tree))
    assert out.constructor is _P.rose and int(out.fields[0].numpy()) == 2
    assert int(from_list_value(out.fields[1])[1].fields[0].numpy()) == 6


def test_compose_iterate_id():
    inc = lam("x", body=lambda x: relay.add(x, const(1)))
    dbl = lam("x", body=lambda x: relay.multiply(x, const(2)))
    assert int(_EX.evaluate(Call(_P.compose(inc, dbl), [const(5)])).numpy()) == 11
    assert int(_EX.evaluate(Call(_P.iterate(inc, const(4)), [const(0)])).numpy()) == 4
    assert int(_EX.evaluate(_P.id(const(3))).numpy()) == 3


# -- laws -----------------------------------------------------------------------------------------
small_lists = st.lists(st.integers(-100, 100), max_size=8)


@settings(max_examples=15, deadline=None)
@given(small_lists, small_lists)
def test_list_laws(xs, ys):
    a, b = to_list_value(_P, xs), to_list_value(_P, ys)
    assert ints(call("concat", a, b)) == xs + ys
    assert ints(call("rev", call("rev", a))) == xs
    assert int(call("length", call("concat", a, b)).numpy()) == len(xs) + len(ys)
    assert int(call("sum", a).numpy()) == sum(xs)


def test_zip_type_is_a_list_of_tuples():
    mod = relay.transform.InferType()(_P.mod)
    ret = mod["zip"].checked_type.ret_type
    assert isinstance(ret, TypeCall) and isinstance(ret.args[0], TupleType)


def test_text_over_the_prelude_in_tvm_s_style():
    """Constructors and polymorphic globals as function values (``@flip(Cons)``,
    ``@map(@size2, ...)``, ``@id``), as TVM's own prelude text writes them."""
    from ember.ir.parser import parse

    text = """#[version = "0.0.5"]
def @rev2[A](%xs: List[A]) -> List[A] { @foldl(@flip(Cons), Nil, %xs) }
def @size2[A](%t: Tree[A]) -> int32 {
  match (%t) { Rose(_, %kids) => 1 + @sum(@map(@size2, %kids)) }
}
def @iter2[A](%f: fn (A) -> A, %n: int32) -> fn (A) -> A {
  if (%n == 0) { @id } else { @compose(%f, @iter2(%f, %n - 1)) }
}
def @main() {
  let %inc = fn (%x: int32) -> int32 { %x + 1 };
  (@rev2(Cons(1, Cons(2, Nil))), @size2(Rose(1, Cons(Rose(2, Nil), Nil))), @iter2(%inc, 3)(10))
}"""
    mod = relay.transform.InferType()(parse(text, init_module=Prelude().mod))
    rev, size, iterated = relay.create_executor(mod=mod).evaluate()()
    assert ints(rev) == [2, 1] and int(size.numpy()) == 2 and int(iterated.numpy()) == 13

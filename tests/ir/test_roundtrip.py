"""The round-trip laws of the text format: parse(print(x)) is structurally equal to x, and
print(parse(print(x))) == print(x), for every construct and for random programs."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember as tvm
from ember import relay
from ember.ir import (Clause, Constructor, GlobalTypeVar, Match, PatternConstructor, PatternTuple,
                      PatternVar, PatternWildcard, TypeCall, TypeData, TypeVar,
                      assert_structural_equal)
from ember.ir.parser import fromtext, parse_expr
from ember.ir.printer import astext

HEADER = '#[version = "0.0.5"]\n'

# Each text is already in printed (canonical) form, so printing its parse gives it back.
CANONICAL = {
    "spec example": """
        def @main(%a: Tensor[(1, 2), uint8], %b: Tensor[(1, 2), uint8]) {
          add(%a, %b)
        }
    """,
    "graph bindings and attrs": """
        def @main(%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32]) {
          %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
          %1 = nn.relu(%0);
          %2 = sum(%1, axis=[1], keepdims=True);
          %3 = nn.leaky_relu(%2, alpha=0.25);
          %4 = cast(%3, dtype="float16");
          (%4, %1)
        }
    """,
    "let, if, fn and attrs": """
        def @main(%c: bool, %x: Tensor[(2), float32]) -> Tensor[(2), float32] {
          let %f = fn (%y, Primitive=1) {
            nn.relu(%y)
          };
          %0 = if (%c) {
            %f(%x)
          } else {
            negative(%x)
          };
          multiply(%0, 2f)
        }
    """,
    "polymorphism, recursion and ADTs": """
        type List[A] {
          Cons(A, List[A]),
          Nil,
        }

        def @length[A](%xs: List[A]) -> int32 {
          match (%xs) {
            Cons(_, %rest: List[A]) => {
              %0 = @length(%rest);
              add(1, %0)
            },
            Nil => 0,
          }
        }

        def @main(%x: int32) -> int32 {
          %0 = Cons(%x, Nil);
          @length(%0)
        }
    """,
    "mutual recursion": """
        def @even(%n: int32) -> bool {
          %0 = equal(%n, 0);
          if (%0) {
            True
          } else {
            %1 = subtract(%n, 1);
            @odd(%1)
          }
        }

        def @odd(%n: int32) -> bool {
          %0 = equal(%n, 0);
          if (%0) {
            False
          } else {
            %1 = subtract(%n, 1);
            @even(%1)
          }
        }
    """,
    "incomplete match, tuple patterns, projections": """
        def @main(%t: (int32, (int8, bool))) -> int8 {
          match? (%t) {
            (_, (%a, %b)) => {
              %0 = (%a, %b);
              %0.0
            },
          }
        }
    """,
    "types": """
        def @main(%a: Tensor[(n, ?, 3), float32], %b: fn [A](A, (int8,)) -> A, %c: _, %d: ()) {
          (%a, %b, %c, %d)
        }
    """,
    "literals": """
        def @main() {
          (1f, 1.5f, 2i64, 3, -4i8, 5u8, True, 1f16, -1.5f64, 1e-07f, 65535u16)
        }
    """,
    "references": """
        def @main() {
          %0 = ref(0);
          %1 = ref_write(%0, 1);
          %2 = ref_read(%0);
          (%1, %2)
        }
    """,
    "shared node hoisted above the if": """
        def @main(%c: bool, %x: float32) {
          %0 = nn.relu(%x);
          if (%c) {
            add(%0, %x)
          } else {
            %0
          }
        }
    """,
    "let as an operand": """
        def @main(%x: float32) {
          %0 = {
            let %y = negative(%x);
            nn.relu(%y)
          };
          add(%0, 1f)
        }
    """,
}


@pytest.mark.parametrize("name", list(CANONICAL))
def test_canonical_text_is_a_fixpoint(name):
    text = HEADER + textwrap.dedent(CANONICAL[name]).strip("\n")
    mod = fromtext(text)
    assert mod.astext() == text
    assert_structural_equal(fromtext(mod.astext()), mod, map_free_vars=True)


def test_spec_example_with_spaced_colons_round_trips():
    mod = fromtext(HEADER + "def @main(%a : Tensor[(1, 2), uint8], %b : Tensor[(1, 2), uint8])"
                   " {\n    %0 = add(%a, %b);\n    %0\n}\n")
    assert_structural_equal(fromtext(mod.astext()), mod)


def test_metadata_constants_round_trip():
    c = relay.const(np.arange(6, dtype="float32").reshape(2, 3))
    x = relay.var("x", shape=(2, 3))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.add(relay.add(x, c), c)))
    again = fromtext(mod.astext())
    assert_structural_equal(again, mod)
    assert again.astext() == mod.astext()


def test_typed_module_parses_back_ignoring_type_comments():
    x = relay.var("x", shape=(2, 2))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(relay.add(x, x))))
    typed = relay.transform.InferType()(mod)
    assert "/* ty=" in typed.astext()
    assert_structural_equal(fromtext(typed.astext()), mod)


def test_prelude_round_trips():
    from ember.relay.prelude import Prelude

    mod = tvm.IRModule()
    Prelude(mod)
    text = mod.astext()
    again = fromtext(text)
    assert again.astext() == text
    assert_structural_equal(again, mod, map_free_vars=True)


def test_shared_nullary_constructor_call_stays_shared():
    nil = NIL()
    f = relay.Function([], relay.Tuple([CONS(relay.const(1), nil), nil, NIL()]))
    text = astext(f)
    assert "%0 = Nil;" in text and text.endswith("(%1, %0, Nil)\n}")
    assert_structural_equal(parse_expr(text, init_module=LIST_MOD), f)


def test_shared_recursive_let_function_parses_back():
    f, x = relay.var("f"), relay.var("x")
    fn = relay.Function([x], relay.Call(f, [x]))
    text = astext(relay.Let(f, fn, relay.Tuple([fn, f])))
    assert text.index("let %f = fn") < text.index("%0 = fn")  # printed twice: sharing is lost
    parse_expr(text)


def test_type_variables_named_like_type_keywords_are_renamed():
    tvs = [TypeVar(n) for n in ("Tensor", "fn", "_", "ref")]
    x = relay.var("x", tvs[0])
    f = relay.Function([x], x, tvs[0], type_params=tvs)
    text = astext(f)
    assert "fn [Tensor1, fn1, _1, ref1](%x: Tensor1) -> Tensor1" in text
    assert_structural_equal(parse_expr(text), f)


def test_long_chains_round_trip():
    x = relay.var("x", shape=(2,))
    e = x
    for _ in range(3000):
        e = relay.nn.relu(e)
    f = relay.Function([x], e)
    assert_structural_equal(parse_expr(astext(f)), f)


# -- laws over random values and programs -----------------------------------------------------
@pytest.mark.parametrize("dtype, width", [("float16", 16), ("float32", 32), ("float64", 64)])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_float_literals_are_exact(dtype, width, data):
    value = data.draw(st.floats(width=width, allow_nan=False))
    c = relay.const(np.array(value, dtype=dtype))
    back = parse_expr(astext(c)).data.numpy()
    assert back.dtype == dtype and back.tobytes() == c.data.numpy().tobytes()


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16",
                                   "uint32", "uint64"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_int_literals_are_exact(dtype, data):
    info = np.iinfo(dtype)
    value = data.draw(st.integers(int(info.min), int(info.max)))
    back = parse_expr(astext(relay.const(np.array(value, dtype=dtype)))).data.numpy()
    assert back.dtype == dtype and int(back) == value


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from(["bool", "int8", "uint64", "float16", "float32", "float64"]),
       shape=st.lists(st.integers(0, 3), min_size=1, max_size=3), seed=st.integers(0, 2**16))
def test_metadata_arrays_are_exact(dtype, shape, seed):
    raw = np.random.default_rng(seed).integers(0, 256, size=int(np.prod(shape)) * 8,
                                               dtype=np.uint8)
    arr = raw.view(np.uint8)[: int(np.prod(shape)) * np.dtype(dtype).itemsize]
    arr = arr.view(dtype).reshape(shape) if dtype != "bool" else (arr % 2).astype(bool)
    back = parse_expr(astext(relay.const(arr.reshape(shape)))).data.numpy()
    assert back.dtype == dtype and back.shape == tuple(shape)
    assert back.tobytes() == np.ascontiguousarray(arr.reshape(shape)).tobytes()


def _list_module() -> tvm.IRModule:
    mod = tvm.IRModule()
    lst, a = GlobalTypeVar("List"), TypeVar("A")
    cons = Constructor("Cons", [a, TypeCall(lst, [a])], lst)
    mod.add_type_def(lst, TypeData(lst, [a], [cons, Constructor("Nil", [], lst)]))
    return mod


LIST_MOD = _list_module()
CONS, NIL = LIST_MOD.get_constructor("Cons"), LIST_MOD.get_constructor("Nil")
NAMES = ["x", "x", "y", "x1", "0", "input.1"]
SCALAR_DTYPES = ["float32", "float16", "int32", "int64", "uint8", "bool", "float64"]


def _pick(draw, pool):
    return draw(st.sampled_from(pool))


def _block(draw, pool, depth, size=4):
    """A few expressions over ``pool`` (which may share them); the last one is the result,
    or, at top level, a tuple of all of them so that none is dead."""
    local = list(pool)
    for _ in range(draw(st.integers(1, size))):
        local.append(_expr(draw, local, depth))
    return local[-1] if depth else relay.Tuple(local[len(pool):])


def _expr(draw, pool, depth):
    kinds = ["unary", "binary", "attrs", "const", "tuple", "tensor_const", "adt"]
    if depth < 2:
        kinds += ["let", "if", "fn", "match"]
    kind = draw(st.sampled_from(kinds))
    if kind == "unary":
        return draw(st.sampled_from([relay.nn.relu, relay.negative]))(_pick(draw, pool))
    if kind == "binary":
        op = draw(st.sampled_from([relay.add, relay.multiply, relay.subtract]))
        return op(_pick(draw, pool), _pick(draw, pool))
    if kind == "attrs":
        return relay.sum(_pick(draw, pool), axis=[draw(st.integers(0, 1))],
                         keepdims=draw(st.booleans()))
    if kind == "const":
        dtype = draw(st.sampled_from(SCALAR_DTYPES))
        value = draw(st.floats(-1e4, 1e4, allow_nan=False) if dtype.startswith("float")
                     else st.integers(0, 1 if dtype == "bool" else 100))
        return relay.const(np.array(value).astype(dtype))
    if kind == "tensor_const":
        return relay.const(np.full((2,), draw(st.integers(-5, 5)), dtype="float32"))
    if kind == "tuple":
        t = relay.Tuple([_pick(draw, pool) for _ in range(draw(st.integers(0, 3)))])
        return relay.TupleGetItem(t, 0) if t.fields and draw(st.booleans()) else t
    if kind == "adt":
        return CONS(_pick(draw, pool), _pick(draw, pool)) if draw(st.booleans()) else NIL()
    return _scoped(draw, pool, depth, kind)


def _scoped(draw, pool, depth, kind):
    """Constructs that open a block: let, if, and a called function literal (a closure)."""
    if kind == "let":
        v = relay.var(draw(st.sampled_from(NAMES)))
        return relay.Let(v, _pick(draw, pool), _block(draw, pool + [v], depth + 1))
    if kind == "if":
        return relay.If(pool[0], _block(draw, pool, depth + 1), _block(draw, pool, depth + 1))
    if kind == "match":
        return _match(draw, pool, depth)
    p = relay.var(draw(st.sampled_from(NAMES)), shape=(2,))
    f = relay.Function([p], _block(draw, pool + [p], depth + 1))
    if draw(st.booleans()):
        f = f.with_attr("Primitive", 1)
    return relay.Call(f, [_pick(draw, pool)])


def _match(draw, pool, depth):
    h, u, v = (relay.var(draw(st.sampled_from(NAMES))) for _ in range(3))
    clauses = [
        Clause(PatternConstructor(CONS, [PatternVar(h), PatternWildcard()]),
               _block(draw, pool + [h], depth + 1)),
        Clause(PatternTuple([PatternVar(u), PatternVar(v)]),
               _block(draw, pool + [u, v], depth + 1)),
        Clause(PatternConstructor(NIL), _pick(draw, pool)),
    ]
    return Match(_pick(draw, pool), clauses, complete=draw(st.booleans()))


@st.composite
def programs(draw):
    """Small random functions over a few ops, constants, lets, ifs, tuples and closures,
    with shared sub-expressions and clashing variable names."""
    cond = relay.var("c", "bool")
    params = [cond] + [relay.var(draw(st.sampled_from(NAMES)), shape=(2, 3)) for _ in range(2)]
    return relay.Function(params, _block(draw, params, 0, size=8))


@settings(max_examples=80, deadline=None)
@given(func=programs())
def test_random_programs_round_trip(func):
    text = astext(func)
    again = parse_expr(text, init_module=LIST_MOD)
    assert astext(again) == text
    assert_structural_equal(again, func)


@settings(max_examples=30, deadline=None)
@given(func=programs())
def test_random_modules_round_trip(func):
    mod = tvm.IRModule.from_expr(func, type_defs=LIST_MOD.type_definitions)
    again = fromtext(mod.astext())
    assert again.astext() == mod.astext()
    assert_structural_equal(again, mod)

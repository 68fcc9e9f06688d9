"""The Prelude: Relay's standard algebraic data types and list/tree functions.

``Prelude(mod)`` adds to ``mod`` (in place) the types

    type List[A] { Cons(A, List[A]), Nil }
    type Option[A] { Some(A), None }
    type Tree[A] { Rose(A, List[Tree[A]]) }

and the polymorphic global functions named in ``GLOBAL_DEFS`` (``@map``, ``@foldl``, ...),
each fully annotated so that type inference can check it. The definitions are built with
the Python construction API; each ``_def_<name>`` below reads like its text form, which is
given in its docstring.
"""
from __future__ import annotations

from typing import Any, Callable

from ..ir.adt import (Clause, Constructor, Match, PatternConstructor, PatternTuple, PatternVar,
                      PatternWildcard, TypeData)
from ..ir.expr import Call, Function, GlobalVar, If, Let, RelayExpr, Tuple, TupleGetItem, Var
from ..ir.expr import const
from ..ir.module import IRModule
from ..ir.op import Op
from ..ir.types import FuncType, GlobalTypeVar, TupleType, Type, TypeCall, TypeVar, scalar_type
from ..runtime.errors import TVMError

GLOBAL_DEFS = ("id", "compose", "flip", "hd", "tl", "nth", "update", "insert_at", "remove_at",
               "map", "foldl", "foldr", "foldr1", "concat", "filter", "zip", "rev", "map_accuml",
               "map_accumr", "unfoldl", "unfoldr", "sum", "length", "tmap", "size", "iterate")
TYPE_DEFS = ("List", "Option", "Tree")
I32 = scalar_type("int32")
BOOL = scalar_type("bool")


def _op(name: str, *args: RelayExpr) -> Call:
    return Call(Op.get(name), args)


def _fn(args: list[Type], ret: Type) -> FuncType:
    return FuncType(args, ret)


def _ctor(c: Constructor, *pats: Any) -> PatternConstructor:
    """A constructor pattern; Vars stand for PatternVar, None for ``_``."""
    return PatternConstructor(c, [_pat(p) for p in pats])


def _pat(p: Any) -> Any:
    if p is None:
        return PatternWildcard()
    return PatternVar(p) if isinstance(p, Var) else p


class _Builder:
    """The types, constructors and GlobalVars the definitions refer to."""

    def __init__(self) -> None:
        self.gv = {name: GlobalVar(name) for name in GLOBAL_DEFS}
        a = TypeVar("A")
        self.list_t = GlobalTypeVar("List")
        self.cons = Constructor("Cons", [a, TypeCall(self.list_t, [a])], self.list_t)
        self.nil = Constructor("Nil", [], self.list_t)
        self.list_def = TypeData(self.list_t, [a], [self.cons, self.nil])
        b = TypeVar("A")
        self.option_t = GlobalTypeVar("Option")
        self.some = Constructor("Some", [b], self.option_t)
        self.none = Constructor("None", [], self.option_t)
        self.option_def = TypeData(self.option_t, [b], [self.some, self.none])
        c = TypeVar("A")
        self.tree_t = GlobalTypeVar("Tree")
        self.rose = Constructor("Rose", [c, self.List(TypeCall(self.tree_t, [c]))], self.tree_t)
        self.tree_def = TypeData(self.tree_t, [c], [self.rose])

    def List(self, a: Type) -> TypeCall:
        return TypeCall(self.list_t, [a])

    def Option(self, a: Type) -> TypeCall:
        return TypeCall(self.option_t, [a])

    def Tree(self, a: Type) -> TypeCall:
        return TypeCall(self.tree_t, [a])

    def call(self, name: str, *args: RelayExpr) -> Call:
        return Call(self.gv[name], args)


def _tvars(names: str) -> list[TypeVar]:
    return [TypeVar(n) for n in names]


def _def_id(b: _Builder) -> Function:
    """fn [A](%x: A) -> A { %x }"""
    (a,) = _tvars("A")
    x = Var("x", a)
    return Function([x], x, a, [a])


def _def_compose(b: _Builder) -> Function:
    """fn [A, B, C](%f: fn(B) -> C, %g: fn(A) -> B) -> fn(A) -> C { fn (%x) { %f(%g(%x)) } }"""
    a, bt, c = _tvars("ABC")
    f, g, x = Var("f", _fn([bt], c)), Var("g", _fn([a], bt)), Var("x", a)
    inner = Function([x], Call(f, [Call(g, [x])]), c)
    return Function([f, g], inner, _fn([a], c), [a, bt, c])


def _def_flip(b: _Builder) -> Function:
    """fn [A, B, C](%f: fn(A, B) -> C) -> fn(B, A) -> C { fn (%y, %x) { %f(%x, %y) } }"""
    a, bt, c = _tvars("ABC")
    f, x, y = Var("f", _fn([a, bt], c)), Var("x", a), Var("y", bt)
    return Function([f], Function([y, x], Call(f, [x, y]), c), _fn([bt, a], c), [a, bt, c])


def _def_hd(b: _Builder) -> Function:
    """fn [A](%xs: List[A]) -> A { match? (%xs) { Cons(%x, _) => %x } }"""
    (a,) = _tvars("A")
    xs, x = Var("xs", b.List(a)), Var("x", a)
    return Function([xs], Match(xs, [Clause(_ctor(b.cons, x, None), x)], False), a, [a])


def _def_tl(b: _Builder) -> Function:
    """fn [A](%xs: List[A]) -> List[A] { match? (%xs) { Cons(_, %rest) => %rest } }"""
    (a,) = _tvars("A")
    xs, rest = Var("xs", b.List(a)), Var("rest", b.List(a))
    return Function([xs], Match(xs, [Clause(_ctor(b.cons, None, rest), rest)], False),
                    b.List(a), [a])


def _def_nth(b: _Builder) -> Function:
    """fn [A](%xs: List[A], %n: int32) -> A { if (%n == 0) { @hd(%xs) } else
    { @nth(@tl(%xs), %n - 1) } }"""
    (a,) = _tvars("A")
    xs, n = Var("xs", b.List(a)), Var("n", I32)
    body = If(_op("equal", n, const(0)), b.call("hd", xs),
              b.call("nth", b.call("tl", xs), _op("subtract", n, const(1))))
    return Function([xs, n], body, a, [a])


def _def_update(b: _Builder) -> Function:
    """fn [A](%xs: List[A], %n: int32, %v: A) -> List[A]: %xs with element %n set to %v."""
    (a,) = _tvars("A")
    xs, n, v = Var("xs", b.List(a)), Var("n", I32), Var("v", a)
    rest = b.call("update", b.call("tl", xs), _op("subtract", n, const(1)), v)
    body = If(_op("equal", n, const(0)), b.cons(v, b.call("tl", xs)),
              b.cons(b.call("hd", xs), rest))
    return Function([xs, n, v], body, b.List(a), [a])


def _def_insert_at(b: _Builder) -> Function:
    """fn [A](%xs: List[A], %n: int32, %v: A) -> List[A]: %xs with %v before element %n (at
    the end when %n is the length; ember's, not TVM's: ONNX's SequenceInsert)."""
    (a,) = _tvars("A")
    xs, n, v = Var("xs", b.List(a)), Var("n", I32), Var("v", a)
    x, rest = Var("x", a), Var("rest", b.List(a))
    later = b.cons(x, b.call("insert_at", rest, _op("subtract", n, const(1)), v))
    body = If(_op("equal", n, const(0)), b.cons(v, xs),
              Match(xs, [Clause(_ctor(b.cons, x, rest), later)], False))
    return Function([xs, n, v], body, b.List(a), [a])


def _def_remove_at(b: _Builder) -> Function:
    """fn [A](%xs: List[A], %n: int32) -> List[A]: %xs without element %n (ember's, not
    TVM's: ONNX's SequenceErase)."""
    (a,) = _tvars("A")
    xs, n = Var("xs", b.List(a)), Var("n", I32)
    x, rest = Var("x", a), Var("rest", b.List(a))
    keep = If(_op("equal", n, const(0)), rest,
              b.cons(x, b.call("remove_at", rest, _op("subtract", n, const(1)))))
    return Function([xs, n], Match(xs, [Clause(_ctor(b.cons, x, rest), keep)], False),
                    b.List(a), [a])


def _def_map(b: _Builder) -> Function:
    """fn [A, B](%f: fn(A) -> B, %xs: List[A]) -> List[B] { match (%xs) {
    Cons(%x, %rest) => Cons(%f(%x), @map(%f, %rest)), Nil => Nil } }"""
    a, bt = _tvars("AB")
    f, xs = Var("f", _fn([a], bt)), Var("xs", b.List(a))
    x, rest = Var("x", a), Var("rest", b.List(a))
    body = Match(xs, [Clause(_ctor(b.cons, x, rest), b.cons(Call(f, [x]), b.call("map", f, rest))),
                      Clause(_ctor(b.nil), b.nil())])
    return Function([f, xs], body, b.List(bt), [a, bt])


def _def_foldl(b: _Builder) -> Function:
    """fn [A, B](%f: fn(A, B) -> A, %acc: A, %xs: List[B]) -> A { match (%xs) {
    Cons(%x, %rest) => @foldl(%f, %f(%acc, %x), %rest), Nil => %acc } }"""
    a, bt = _tvars("AB")
    f, acc, xs = Var("f", _fn([a, bt], a)), Var("acc", a), Var("xs", b.List(bt))
    x, rest = Var("x", bt), Var("rest", b.List(bt))
    step = b.call("foldl", f, Call(f, [acc, x]), rest)
    body = Match(xs, [Clause(_ctor(b.cons, x, rest), step), Clause(_ctor(b.nil), acc)])
    return Function([f, acc, xs], body, a, [a, bt])


def _def_foldr(b: _Builder) -> Function:
    """fn [A, B](%f: fn(A, B) -> B, %acc: B, %xs: List[A]) -> B { match (%xs) {
    Cons(%x, %rest) => %f(%x, @foldr(%f, %acc, %rest)), Nil => %acc } }"""
    a, bt = _tvars("AB")
    f, acc, xs = Var("f", _fn([a, bt], bt)), Var("acc", bt), Var("xs", b.List(a))
    x, rest = Var("x", a), Var("rest", b.List(a))
    step = Call(f, [x, b.call("foldr", f, acc, rest)])
    body = Match(xs, [Clause(_ctor(b.cons, x, rest), step), Clause(_ctor(b.nil), acc)])
    return Function([f, acc, xs], body, bt, [a, bt])


def _def_foldr1(b: _Builder) -> Function:
    """fn [A](%f: fn(A, A) -> A, %xs: List[A]) -> A { match? (%xs) {
    Cons(%x, Nil) => %x, Cons(%y, %rest) => %f(%y, @foldr1(%f, %rest)) } }"""
    (a,) = _tvars("A")
    f, xs = Var("f", _fn([a, a], a)), Var("xs", b.List(a))
    x, y, rest = Var("x", a), Var("y", a), Var("rest", b.List(a))
    clauses = [Clause(_ctor(b.cons, x, _ctor(b.nil)), x),
               Clause(_ctor(b.cons, y, rest), Call(f, [y, b.call("foldr1", f, rest)]))]
    return Function([f, xs], Match(xs, clauses, False), a, [a])


def _cons_fn(b: _Builder, a: Type, flipped: bool = False) -> Function:
    """``Cons`` as an annotated function (``fn (%acc, %x)`` when flipped)."""
    x, acc = Var("x", a), Var("acc", b.List(a))
    return Function([acc, x] if flipped else [x, acc], b.cons(x, acc), b.List(a))


def _def_concat(b: _Builder) -> Function:
    """fn [A](%xs: List[A], %ys: List[A]) -> List[A] { @foldr(Cons, %ys, %xs) }"""
    (a,) = _tvars("A")
    xs, ys = Var("xs", b.List(a)), Var("ys", b.List(a))
    return Function([xs, ys], b.call("foldr", _cons_fn(b, a), ys, xs), b.List(a), [a])


def _def_filter(b: _Builder) -> Function:
    """fn [A](%f: fn(A) -> bool, %xs: List[A]) -> List[A]: the elements where %f holds."""
    (a,) = _tvars("A")
    f, xs = Var("f", _fn([a], BOOL)), Var("xs", b.List(a))
    x, rest = Var("x", a), Var("rest", b.List(a))
    kept = If(Call(f, [x]), b.cons(x, b.call("filter", f, rest)), b.call("filter", f, rest))
    body = Match(xs, [Clause(_ctor(b.cons, x, rest), kept), Clause(_ctor(b.nil), b.nil())])
    return Function([f, xs], body, b.List(a), [a])


def _def_zip(b: _Builder) -> Function:
    """fn [A, B](%xs: List[A], %ys: List[B]) -> List[(A, B)] { match ((%xs, %ys)) {
    (Cons(%x, %xr), Cons(%y, %yr)) => Cons((%x, %y), @zip(%xr, %yr)), _ => Nil } }"""
    a, bt = _tvars("AB")
    xs, ys = Var("xs", b.List(a)), Var("ys", b.List(bt))
    x, xr, y, yr = Var("x", a), Var("xr", b.List(a)), Var("y", bt), Var("yr", b.List(bt))
    both = PatternTuple([_ctor(b.cons, x, xr), _ctor(b.cons, y, yr)])
    body = Match(Tuple([xs, ys]), [Clause(both, b.cons(Tuple([x, y]), b.call("zip", xr, yr))),
                                   Clause(PatternWildcard(), b.nil())])
    return Function([xs, ys], body, b.List(TupleType([a, bt])), [a, bt])


def _def_rev(b: _Builder) -> Function:
    """fn [A](%xs: List[A]) -> List[A] { @foldl(fn (%acc, %x) { Cons(%x, %acc) }, Nil, %xs) }"""
    (a,) = _tvars("A")
    xs = Var("xs", b.List(a))
    return Function([xs], b.call("foldl", _cons_fn(b, a, flipped=True), b.nil(), xs),
                    b.List(a), [a])


def _def_map_accuml(b: _Builder) -> Function:
    """fn [A, B, C](%f: fn(A, B) -> (A, C), %acc: A, %xs: List[B]) -> (A, List[C]):
    map left to right, threading an accumulator; returns the last one and the results."""
    a, bt, c = _tvars("ABC")
    f, acc, xs = Var("f", _fn([a, bt], TupleType([a, c]))), Var("acc", a), Var("xs", b.List(bt))
    x, rest = Var("x", bt), Var("rest", b.List(bt))
    res, nxt = Var("res", TupleType([a, c])), Var("next", TupleType([a, b.List(c)]))
    step = Let(res, Call(f, [acc, x]),
               Let(nxt, b.call("map_accuml", f, TupleGetItem(res, 0), rest),
                   Tuple([TupleGetItem(nxt, 0),
                          b.cons(TupleGetItem(res, 1), TupleGetItem(nxt, 1))])))
    body = Match(xs, [Clause(_ctor(b.cons, x, rest), step),
                      Clause(_ctor(b.nil), Tuple([acc, b.nil()]))])
    return Function([f, acc, xs], body, TupleType([a, b.List(c)]), [a, bt, c])


def _def_map_accumr(b: _Builder) -> Function:
    """fn [A, B, C](%f: fn(A, B) -> (A, C), %acc: A, %xs: List[B]) -> (A, List[C]):
    like map_accuml but threading the accumulator right to left (a foldr)."""
    a, bt, c = _tvars("ABC")
    f, acc, xs = Var("f", _fn([a, bt], TupleType([a, c]))), Var("acc", a), Var("xs", b.List(bt))
    state_t = TupleType([a, b.List(c)])
    x, state, res = Var("x", bt), Var("state", state_t), Var("res", TupleType([a, c]))
    step = Function([x, state], Let(res, Call(f, [TupleGetItem(state, 0), x]), Tuple(
        [TupleGetItem(res, 0), b.cons(TupleGetItem(res, 1), TupleGetItem(state, 1))])), state_t)
    body = b.call("foldr", step, Tuple([acc, b.nil()]), xs)
    return Function([f, acc, xs], body, state_t, [a, bt, c])


def _def_unfoldr(b: _Builder) -> Function:
    """fn [A, B](%f: fn(A) -> Option[(A, B)], %seed: A) -> List[B] { match (%f(%seed)) {
    Some(%v) => Cons(%v.1, @unfoldr(%f, %v.0)), None => Nil } }"""
    a, bt = _tvars("AB")
    f, seed = Var("f", _fn([a], b.Option(TupleType([a, bt])))), Var("seed", a)
    v = Var("v", TupleType([a, bt]))
    more = b.cons(TupleGetItem(v, 1), b.call("unfoldr", f, TupleGetItem(v, 0)))
    body = Match(Call(f, [seed]), [Clause(_ctor(b.some, v), more),
                                   Clause(_ctor(b.none), b.nil())])
    return Function([f, seed], body, b.List(bt), [a, bt])


def _def_unfoldl(b: _Builder) -> Function:
    """fn [A, B](%f: fn(A) -> Option[(A, B)], %seed: A) -> List[B] { @rev(@unfoldr(%f, %seed)) }"""
    a, bt = _tvars("AB")
    f, seed = Var("f", _fn([a], b.Option(TupleType([a, bt])))), Var("seed", a)
    return Function([f, seed], b.call("rev", b.call("unfoldr", f, seed)), b.List(bt), [a, bt])


def _def_sum(b: _Builder) -> Function:
    """fn (%xs: List[int32]) -> int32 { @foldl(fn (%x, %y) { %x + %y }, 0, %xs) }"""
    xs, x, y = Var("xs", b.List(I32)), Var("x", I32), Var("y", I32)
    plus = Function([x, y], _op("add", x, y), I32)
    return Function([xs], b.call("foldl", plus, const(0), xs), I32)


def _def_length(b: _Builder) -> Function:
    """fn [A](%xs: List[A]) -> int32 { match (%xs) { Cons(_, %rest) => 1 + @length(%rest),
    Nil => 0 } }"""
    (a,) = _tvars("A")
    xs, rest = Var("xs", b.List(a)), Var("rest", b.List(a))
    one_more = _op("add", const(1), b.call("length", rest))
    body = Match(xs, [Clause(_ctor(b.cons, None, rest), one_more), Clause(_ctor(b.nil), const(0))])
    return Function([xs], body, I32, [a])


def _def_tmap(b: _Builder) -> Function:
    """fn [A, B](%f: fn(A) -> B, %t: Tree[A]) -> Tree[B] { match (%t) { Rose(%v, %kids) =>
    Rose(%f(%v), @map(fn (%k) { @tmap(%f, %k) }, %kids)) } }"""
    a, bt = _tvars("AB")
    f, t = Var("f", _fn([a], bt)), Var("t", b.Tree(a))
    v, kids, k = Var("v", a), Var("kids", b.List(b.Tree(a))), Var("k", b.Tree(a))
    on_kid = Function([k], b.call("tmap", f, k), b.Tree(bt))
    body = Match(t, [Clause(_ctor(b.rose, v, kids),
                            b.rose(Call(f, [v]), b.call("map", on_kid, kids)))])
    return Function([f, t], body, b.Tree(bt), [a, bt])


def _def_size(b: _Builder) -> Function:
    """fn [A](%t: Tree[A]) -> int32 { match (%t) { Rose(_, %kids) =>
    1 + @sum(@map(fn (%k) { @size(%k) }, %kids)) } }"""
    (a,) = _tvars("A")
    t, kids, k = Var("t", b.Tree(a)), Var("kids", b.List(b.Tree(a))), Var("k", b.Tree(a))
    sizes = b.call("map", Function([k], b.call("size", k), I32), kids)
    body = Match(t, [Clause(_ctor(b.rose, None, kids), _op("add", const(1), b.call("sum", sizes)))])
    return Function([t], body, I32, [a])


def _def_iterate(b: _Builder) -> Function:
    """fn [A](%f: fn(A) -> A, %n: int32) -> fn(A) -> A: %f composed with itself %n times."""
    (a,) = _tvars("A")
    f, n, x = Var("f", _fn([a], a)), Var("n", I32), Var("x", a)
    body = If(_op("equal", n, const(0)), Function([x], x, a),
              b.call("compose", f, b.call("iterate", f, _op("subtract", n, const(1)))))
    return Function([f, n], body, _fn([a], a), [a])


_DEFS: dict[str, Callable[[_Builder], Function]] = {
    name: globals()[f"_def_{name}"] for name in GLOBAL_DEFS}


def _install(mod: IRModule) -> None:
    """Add the Prelude's types and functions to ``mod`` (which has none of them yet)."""
    clash = [n for n in (*GLOBAL_DEFS, *TYPE_DEFS) if n in mod]
    if clash:
        raise TVMError(f"Prelude: the module already defines {', '.join(clash)} but not the "
                       "whole Prelude; rename these definitions or use a fresh module")
    b = _Builder()
    for td in (b.list_def, b.option_def, b.tree_def):
        mod.add_type_def(td.header, td)
    for name in GLOBAL_DEFS:
        mod.add(b.gv[name], _DEFS[name](b))


class Prelude:
    """The standard List / Option / Tree types and functions, added to ``mod`` in place.

    Accessors as in TVM: ``p.mod``, ``p.get_type("List")`` -> ``(List, Cons, Nil)``,
    ``p.get_global_var("map")``, ``p.get_ctor("List", "Cons")``, and attributes ``p.map``,
    ``p.foldl``, ..., ``p.l``/``p.List``, ``p.cons``, ``p.nil``, ``p.optional``, ``p.some``,
    ``p.none``, ``p.tree``, ``p.rose``. Tensor-array definitions (dtype-specific) are not
    part of ember's Prelude.
    """

    def __init__(self, mod: IRModule | None = None) -> None:
        self.mod = IRModule() if mod is None else mod
        self.load_prelude()

    def load_prelude(self) -> None:
        """Add the definitions unless ``mod`` has them already, then bind the accessors."""
        if "List" not in {g.name_hint for g in self.mod.type_definitions}:
            _install(self.mod)
        self.l, self.cons, self.nil = self.mod.get_type("List")
        self.List = self.l
        self.optional, self.some, self.none = self.mod.get_type("Option")
        self.tree, self.rose = self.mod.get_type("Tree")
        for name in GLOBAL_DEFS:
            setattr(self, name, self.get_global_var(name))

    @staticmethod
    def get_name(canonical: str, dtype: str | None = None) -> str:
        """The name of a definition; dtype-specific names are ``<canonical>_<dtype>``."""
        if dtype is None:
            return canonical
        return f"tensor_{dtype}_t" if canonical == "tensor_t" else f"{canonical}_{dtype}"

    def _missing(self, what: str, name: str, dtype: str | None) -> TVMError:
        note = " (ember's Prelude has no dtype-specific tensor-array definitions)" if dtype else ""
        return TVMError(f"Prelude: no {what} named {name!r}{note}")

    def get_global_var(self, canonical: str, dtype: str | None = None) -> GlobalVar:
        """The GlobalVar of the Prelude function ``canonical`` (``"map"``, ``"foldl"``, ...)."""
        name = self.get_name(canonical, dtype)
        if name not in {g.name_hint for g in self.mod.functions}:
            raise self._missing("function", name, dtype)
        return self.mod.get_global_var(name)

    def get_type(self, canonical: str, dtype: str | None = None) -> tuple[Any, ...]:
        """``(GlobalTypeVar, *constructors)`` of a Prelude type, e.g. ``(List, Cons, Nil)``."""
        name = self.get_name(canonical, dtype)
        if name not in {g.name_hint for g in self.mod.type_definitions}:
            raise self._missing("type", name, dtype)
        return self.mod.get_type(name)

    def get_ctor(self, ty_name: str, canonical: str, dtype: str | None = None) -> Constructor:
        """The constructor ``canonical`` of the type ``ty_name``."""
        name = self.get_name(canonical, dtype)
        for ctor in self.get_type(ty_name)[1:]:
            if ctor.name_hint == name:
                return ctor
        raise self._missing(f"constructor of {ty_name}", name, dtype)


# -- GradCell: lazily initialised gradients (LazyGradientInit) -----------------------------------
GRAD_CELL_DEFS = ("GradCell", "FromGradCell", "AddGradCell", "MultiplyGradCell")
GRAD_CELL_TEXT = """#[version = "0.0.5"]
type GradCell[T] {
  Raw(T),
  One(fn () -> T),
  Zero(fn () -> T),
}

def @FromGradCell[T](%g: GradCell[T]) -> T {
  match (%g) {
    Raw(%x) => %x,
    One(%f) => %f(),
    Zero(%f) => %f(),
  }
}

def @AddGradCell[T](%add: fn (T, T) -> T, %l: GradCell[T], %r: GradCell[T]) -> GradCell[T] {
  match (%l) {
    Zero(_) => %r,
    _ => match (%r) {
      Zero(_) => %l,
      _ => Raw(%add(@FromGradCell(%l), @FromGradCell(%r))),
    },
  }
}

def @MultiplyGradCell[T](%mul: fn (T, T) -> T, %l: GradCell[T], %r: GradCell[T]) -> GradCell[T] {
  match (%l) {
    Zero(_) => %l,
    One(_) => %r,
    _ => match (%r) {
      Zero(_) => %r,
      One(_) => %l,
      _ => Raw(%mul(@FromGradCell(%l), @FromGradCell(%r))),
    },
  }
}
"""


def with_grad_cell(mod: IRModule) -> IRModule:
    """A copy of ``mod`` with the GradCell type and its functions (unless it has them):

    ``type GradCell[T] { Raw(T), One(fn () -> T), Zero(fn () -> T) }`` holds a tensor that is
    known (Raw), or all ones or all zeros, made only when needed; ``@FromGradCell`` forces
    one, ``@AddGradCell(add, l, r)`` skips adding a Zero, ``@MultiplyGradCell(mul, l, r)``
    skips multiplying by a One and gives the Zero for a Zero factor.
    """
    if "GradCell" in mod:
        missing = [n for n in GRAD_CELL_DEFS if n not in mod]
        if missing:
            raise TVMError(f"GradCell: the module defines GradCell but not {', '.join(missing)}")
        return mod
    clash = [n for n in GRAD_CELL_DEFS if n in mod]
    if clash:
        raise TVMError(f"GradCell: the module already defines {', '.join(clash)}")
    from ..ir.parser import parse

    return parse(GRAD_CELL_TEXT, "<GradCell>", init_module=mod)

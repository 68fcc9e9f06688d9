"""to_cps / ToCPS and un_cps: continuation-passing style.

``to_cps(fn, mod)`` turns ``fn(params) -> R`` into ``fn[answer](params, %k: fn (R) -> answer)
-> answer``: every intermediate value is passed on to the rest of the computation instead of
being returned. Inside, each function literal gets a continuation parameter too (its type is
``fn (args, fn (ret) -> answer) -> answer``), calls pass the continuation, ``if`` and ``match``
bind the continuation to a variable once and call it from each branch, and operator calls,
tuples, projections, constructors and references bind their result and continue. Global
functions that ``fn`` refers to are converted too, once each, and added to ``mod`` as
``@<name>_cps`` (``mod`` is updated in place, as in TVM, so the result runs against it).
Tensor, tuple and reference types are unchanged; function types change as above.

``un_cps(fn)`` gives back a direct-style function: it calls the CPS function with the
identity continuation. Parameters and results that are functions stay in CPS form.

The conversion runs on ``ember.ir.trampoline``: deep programs need no Python recursion.
"""
from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from ...ir.adt import Clause, Constructor, Match
from ...ir.expr import (Call, Constant, Function, GlobalVar, If, Let, RefCreate, RefRead,
                        RefWrite, RelayExpr, Tuple, TupleGetItem, Var)
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.trampoline import run
from ...ir.types import FuncType, RelayRefType, TupleType, Type, TypeVar
from ...runtime.errors import TVMError
from ._fresh import fresh_copy
from .type_infer import infer_type

__all__ = ["ToCPS", "to_cps", "un_cps"]

Step = Generator[Any, Any, Any]
Cont = Callable[[RelayExpr], Step]  # a meta-continuation: atom -> step building the rest


def cps_type(ty: Type, answer: Type) -> Type:
    """The type of a value after the conversion."""
    if isinstance(ty, FuncType):
        args = [cps_type(a, answer) for a in ty.arg_types]
        k = FuncType([cps_type(ty.ret_type, answer)], answer)
        return FuncType([*args, k], answer, ty.type_params)
    if isinstance(ty, TupleType):
        return TupleType([cps_type(f, answer) for f in ty.fields])
    if isinstance(ty, RelayRefType):
        return RelayRefType(cps_type(ty.value, answer))
    return ty


class _ToVar:
    """The continuation bound to a relay variable: continuing with ``x`` calls it."""

    def __init__(self, var: Var) -> None:
        self.var = var

    def __call__(self, x: RelayExpr) -> Step:
        return Call(self.var, (x,))
        yield


class _Converter:
    def __init__(self, mod: IRModule, answer: TypeVar, done: dict[str, GlobalVar]) -> None:
        self.mod, self.answer, self.done = mod, answer, done
        self.vars: dict[Var, Var] = {}

    def _type(self, e: RelayExpr) -> Type | None:
        ty = e.checked_type_ or (e.type_annotation if isinstance(e, Var) else None)
        return None if ty is None else cps_type(ty, self.answer)

    def var(self, v: Var) -> Var:
        new = self.vars.get(v)
        if new is None:
            new = self.vars[v] = Var(v.name_hint, self._type(v), span=v.span)
        return new

    def reify(self, k: Cont, ty: Type | None) -> Step:
        """The meta-continuation as a relay function ``fn (%x) { ... }`` (or the variable a
        continuation is already bound to)."""
        if isinstance(k, _ToVar):
            return k.var
        x = Var("x", ty)
        body = yield k(x)
        return Function((x,), body)

    def atoms(self, exprs: tuple[RelayExpr, ...], k: Callable[[list[RelayExpr]], Step]) -> Step:
        """Convert ``exprs`` left to right, then continue with their atoms."""
        done: list[RelayExpr] = []

        def step(i: int) -> Step:
            if i == len(exprs):
                return (yield k(list(done)))

            def got(a: RelayExpr) -> Step:
                done.append(a)
                return (yield step(i + 1))

            return (yield self.cps(exprs[i], got))

        return (yield step(0))

    def bind(self, value: RelayExpr, k: Cont, name: str = "v") -> Step:
        v = Var(name)
        return Let(v, value, (yield k(v)))

    def cps(self, e: RelayExpr, k: Cont) -> Step:
        if isinstance(e, Var):
            return (yield k(self.var(e)))
        if isinstance(e, (Constant, Op, Constructor)):
            return (yield k(e))
        if isinstance(e, GlobalVar):
            return (yield k(self.global_var(e)))
        if isinstance(e, Function):
            return (yield k((yield self.function(e))))
        if isinstance(e, Let):
            return (yield self.cps(e.value, lambda a: self._let(e, a, k)))
        if isinstance(e, Tuple):
            return (yield self.atoms(e.fields, lambda xs: self.bind(Tuple(tuple(xs)), k, "t")))
        if isinstance(e, TupleGetItem):
            return (yield self.cps(e.tuple_value,
                                   lambda a: self.bind(TupleGetItem(a, e.index), k)))
        if isinstance(e, If):
            return (yield self.cps(e.cond, lambda c: self._branch(
                e, c, [e.true_branch, e.false_branch], k)))
        if isinstance(e, Match):
            return (yield self.cps(e.data, lambda d: self._branch(
                e, d, [c.rhs for c in e.clauses], k)))
        if isinstance(e, RefCreate):
            return (yield self.cps(e.value, lambda a: self.bind(RefCreate(a), k, "r")))
        if isinstance(e, RefRead):
            return (yield self.cps(e.ref, lambda a: self.bind(RefRead(a), k)))
        if isinstance(e, RefWrite):
            return (yield self.atoms((e.ref, e.value),
                                     lambda xs: self.bind(RefWrite(xs[0], xs[1]), k, "u")))
        if isinstance(e, Call):
            return (yield self._call(e, k))
        raise TVMError(f"to_cps: cannot convert a {type(e).__name__}")

    def _let(self, e: Let, a: RelayExpr, k: Cont) -> Step:
        body = yield self.cps(e.body, k)
        return Let(self.var(e.var), a, body)

    def _branch(self, e: RelayExpr, head: RelayExpr, arms: list[RelayExpr], k: Cont) -> Step:
        if isinstance(k, _ToVar):  # already a variable: no need to bind it again
            kv, bound = k.var, True
        else:
            ty = self._type(e)
            kv, bound = Var("k", FuncType([ty], self.answer) if ty else None), False
        to_k = _ToVar(kv)
        new = []
        for arm in arms:
            new.append((yield self.cps(arm, to_k)))
        if isinstance(e, If):
            out: RelayExpr = If(head, new[0], new[1])
        else:
            match: Match = e  # type: ignore[assignment]
            clauses = tuple(Clause(self._pattern(c.lhs), r) for c, r in zip(match.clauses, new))
            out = Match(head, clauses, match.complete)
        return out if bound else Let(kv, (yield self.reify(k, self._type(e))), out)


    def _pattern(self, pat: Any) -> Any:
        from ...ir.visitor import _map_pattern

        return _map_pattern(pat, self.var)

    def _call(self, e: Call, k: Cont) -> Step:
        if isinstance(e.op, (Op, Constructor)):
            return (yield self.atoms(e.args, lambda xs: self.bind(
                Call(e.op, tuple(xs), e.attrs, e.type_args), k)))

        def call(xs: list[RelayExpr]) -> Step:
            cont = yield self.reify(k, self._type(e))
            return Call(xs[0], (*xs[1:], cont), e.attrs)

        return (yield self.atoms((e.op, *e.args), call))

    def function(self, f: Function) -> Step:
        ret = self._type(f.body) if f.body.checked_type_ is not None else None
        kv = Var("k", FuncType([ret], self.answer) if ret is not None else None)
        body = yield self.cps(f.body, _ToVar(kv))
        params = tuple(self.var(p) for p in f.params)
        return Function((*params, kv), body, self.answer, f.type_params, f.attrs, span=f.span)

    def global_var(self, gv: GlobalVar) -> GlobalVar:
        if gv.name_hint not in self.mod:
            return gv
        if gv.name_hint not in self.done:
            new = GlobalVar(f"{gv.name_hint}_cps")
            self.done[gv.name_hint] = new
            func = self.mod[gv.name_hint]
            self.mod.add(new, _convert(func, self.mod, self.done))
        return self.done[gv.name_hint]


def _convert(func: Function, mod: IRModule, done: dict[str, GlobalVar]) -> Function:
    typed = infer_type(fresh_copy(func), mod)
    if not isinstance(typed, Function):
        raise TypeError(f"to_cps: expected a relay.Function, got {type(typed).__name__}")
    answer = TypeVar("answer")
    conv = _Converter(mod, answer, done)
    ret = cps_type(typed.body.checked_type, answer)
    k = Var("k", FuncType([ret], answer))
    body = run(conv.cps(typed.body, _ToVar(k)))
    params = tuple(conv.var(p) for p in typed.params)
    return Function((*params, k), body, answer, (*typed.type_params, answer), typed.attrs)


def to_cps(func: Any, mod: IRModule | None = None) -> Function:
    """``func`` in continuation-passing style (module docstring)."""
    if not isinstance(func, Function):
        raise TypeError(f"to_cps: expected a relay.Function, got {type(func).__name__}")
    use_mod = mod if mod is not None else IRModule()
    return _convert(func, use_mod, {})


ToCPS = to_cps  # TVM's other name: relay.transform.ToCPS(expr, mod)


def un_cps(func: Any) -> Function:
    """The direct-style function of a CPS function: it passes the identity continuation."""
    if not isinstance(func, Function) or not func.params:
        raise TypeError(f"un_cps: expected a CPS relay.Function (its last parameter the "
                        f"continuation), got {type(func).__name__}")
    *params, k = func.params
    kty = k.type_annotation
    if not isinstance(kty, FuncType) or len(kty.arg_types) != 1:
        raise TypeError(f"un_cps: the last parameter %{k.name_hint} must be the continuation, "
                        f"a function of one argument; it has type {kty}")
    new_params = [Var(p.name_hint, p.type_annotation) for p in params]
    x = Var("x", kty.arg_types[0])
    body = Call(func, (*new_params, Function((x,), x)))
    return Function(tuple(new_params), body, kty.arg_types[0], tuple(
        t for t in func.type_params if t is not kty.ret_type))

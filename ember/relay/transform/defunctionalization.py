"""Defunctionalization: a first-order program from a higher-order one.

``Defunctionalization(func, mod)`` takes a function whose own parameters and result are not
functions (``main`` of a gradient, of a program using ``@map``, ...) and returns one in which
no value is a function:

- every function type ``fn (A) -> B`` that a value has becomes an algebraic data type of its
  own, with one constructor per function literal of that type; the constructor's fields are
  the literal's free variables (``let %k = fn (%x) { add(%x, %y) }`` becomes
  ``let %k = Fn3_0(%y)``);
- calling a function value becomes calling that type's ``@apply_<n>``, which matches the
  constructor and runs the literal's body;
- a global function used as a value is first eta-expanded (``@id`` -> ``fn (%x) { @id(%x) }``);
  a global function that is called is cloned once per distinct instantiation of its type
  parameters, with its types substituted (``@map_1``), and defunctionalized too.

The new types, apply functions and clones are added to ``mod`` (in place, as in TVM, so the
result runs against it); ``func`` itself is left as it was. ``mod`` must type-check. Values
of polymorphic function type inside ``func`` get the type their use gives them.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from ...ir.adt import Clause, Constructor, Match, PatternConstructor, PatternVar, TypeData
from ...ir.expr import Call, Function, GlobalVar, Let, RelayExpr, Var
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.types import (FuncType, GlobalTypeVar, Type, TypeVar, fold_type,
                         type_children, type_equal, type_hash)
from ...ir.visitor import ExprMutator, free_vars, post_order
from ...runtime.errors import TVMError
from ._fresh import fresh_copy
from ._unify import rebuild_type
from .type_infer import infer_type

__all__ = ["Defunctionalization"]

_WHERE = "Defunctionalization"


class _Key:
    """A type as a dictionary key (structural equality and hash)."""

    def __init__(self, ty: Type) -> None:
        self.ty, self.hash = ty, type_hash(ty)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and type_equal(self.ty, other.ty)

    def __hash__(self) -> int:
        return self.hash


def _has_func(ty: Type | None) -> bool:
    return ty is not None and bool(fold_type(ty, lambda t, kids: isinstance(t, FuncType)
                                             or any(kids)))


def _subst(ty: Type | None, mapping: dict[int, Type]) -> Type | None:
    """``ty`` with the type variables in ``mapping`` (by identity) replaced; annotations that
    still name other type variables are dropped (None: inferred from use)."""
    if ty is None:
        return None
    out = fold_type(ty, lambda t, k: mapping.get(id(t), t) if isinstance(t, TypeVar)
                    else rebuild_type(t, k))
    left = fold_type(out, lambda t, kids: isinstance(t, TypeVar) or any(kids))
    return None if left else out


def _bind(pattern: Type, concrete: Type, params: Sequence[TypeVar], out: dict[int, Type]) -> None:
    """Solve ``pattern`` (which names ``params``) against ``concrete``, into ``out``."""
    ids = {id(p) for p in params}
    stack = [(pattern, concrete)]
    while stack:
        p, c = stack.pop()
        if isinstance(p, TypeVar) and id(p) in ids:
            out.setdefault(id(p), c)
        else:
            stack.extend(zip(type_children(p), type_children(c)))


class _State:
    """What the conversion adds to the module: one ADT and apply function per function type,
    and the clones of global functions."""

    def __init__(self, mod: IRModule) -> None:
        self.mod = mod
        self.counter = itertools.count()
        self.adts: dict[_Key, _FnADT] = {}
        self.clones: dict[tuple[str, tuple[_Key, ...]], GlobalVar] = {}

    def func_adt(self, fty: FuncType) -> _FnADT:
        key = _Key(fty)
        if key not in self.adts:
            n = next(self.counter)
            self.adts[key] = _FnADT(GlobalTypeVar(self._fresh(f"Fn{n}")),
                                    GlobalVar(self._fresh(f"apply_{n}")), fty)
        return self.adts[key]

    def _fresh(self, name: str) -> str:
        while name in self.mod:
            name += "_"
        return name

    def defunc_type(self, ty: Type) -> Type:
        def conv(t: Type, kids: list[Type]) -> Type:
            if isinstance(t, FuncType):
                if t.type_params:
                    raise TVMError(f"{_WHERE}: a value of polymorphic function type {t} is "
                                   "not supported")
                return self.func_adt(t).gtv
            return rebuild_type(t, kids)
        return fold_type(ty, conv)  # type: ignore[no-any-return]

    def clone(self, gv: GlobalVar, subst: dict[int, Type]) -> GlobalVar:
        func = self.mod[gv.name_hint]
        key = (gv.name_hint, tuple(_Key(subst[id(t)]) if id(t) in subst else _Key(t)
                                   for t in func.type_params))
        if key not in self.clones:
            new = GlobalVar(self._fresh(f"{gv.name_hint}_{next(self.counter)}"))
            self.clones[key] = new
            self.mod.add(new, _convert(self, _monomorphic(func, subst)))
        return self.clones[key]

    def finish(self) -> None:
        for adt in self.adts.values():
            self.mod.add_type_def(adt.gtv, TypeData(adt.gtv, (), tuple(adt.ctors)))
        for adt in self.adts.values():
            f = Var("f", adt.gtv)
            args = [Var(f"a{i}", self.defunc_type(t)) for i, t in enumerate(adt.fty.arg_types)]
            clauses = tuple(
                Clause(PatternConstructor(arm.ctor, [PatternVar(v) for v in arm.fields]),
                       fresh_copy(arm.body, dict(zip(arm.params, args)))) for arm in adt.arms)
            self.mod.add(adt.apply, Function((f, *args), Match(f, clauses, True),
                                             self.defunc_type(adt.fty.ret_type)))


class _FnADT:
    """The data type standing for one function type, and the function applying it."""

    def __init__(self, gtv: GlobalTypeVar, apply: GlobalVar, fty: FuncType) -> None:
        self.gtv, self.apply, self.fty = gtv, apply, fty
        self.ctors: list[Constructor] = []
        self.arms: list[_Arm] = []


class _Arm:
    """One function literal of a function type: its constructor, the variables its fields
    bind, its parameters and its (converted) body."""

    def __init__(self, ctor: Constructor, fields: list[Var], params: list[Var],
                 body: RelayExpr) -> None:
        self.ctor, self.fields, self.params, self.body = ctor, fields, params, body


def _monomorphic(func: Function, subst: dict[int, Type]) -> Function:
    """A copy of ``func`` with its type parameters replaced (annotations naming type variables
    that are not substituted are dropped)."""
    copy = fresh_copy(func)
    assert isinstance(copy, Function), "a copy of a function is a function"
    params = []
    rename: dict[Var, RelayExpr] = {}
    for p in copy.params:
        new = Var(p.name_hint, _subst(p.type_annotation, subst))
        rename[p] = new
        params.append(new)
    body = _Retype(subst).visit(fresh_copy(copy.body, rename))
    return Function(tuple(params), body, _subst(copy.ret_type, subst), (), copy.attrs)


class _Retype(ExprMutator):
    """Substitute type variables in the annotations of bound variables and function
    literals; polymorphic literals become monomorphic (typed by their use)."""

    def __init__(self, subst: dict[int, Type]) -> None:
        super().__init__()
        self.subst = subst

    def visit_var(self, v: Var) -> RelayExpr:
        ty = _subst(v.type_annotation, self.subst)
        return v if ty is v.type_annotation else Var(v.name_hint, ty, span=v.span)

    def visit_function(self, f: Function) -> RelayExpr:
        params = tuple(self.visit(p) for p in f.params)
        return Function(params, self.visit(f.body), _subst(f.ret_type, self.subst), (),
                        f.attrs, span=f.span)


class _EtaExpand(ExprMutator):
    """Global functions in value position become function literals that call them."""

    def __init__(self, mod: IRModule) -> None:
        super().__init__()
        self.mod = mod

    def visit_global_var(self, gv: GlobalVar) -> RelayExpr:
        if gv.name_hint not in self.mod:
            return gv
        func = self.mod[gv.name_hint]
        params = tuple(Var(p.name_hint) for p in func.params)
        return Function(params, Call(gv, params))

    def visit_call(self, call: Call) -> RelayExpr:
        args = tuple(self.visit(a) for a in call.args)
        op = call.op if isinstance(call.op, GlobalVar) else self.visit(call.op)
        if op is call.op and all(a is b for a, b in zip(args, call.args)):
            return call
        return Call(op, args, call.attrs, call.type_args, span=call.span)


class _Defunc(ExprMutator):
    """The conversion of one typed, monomorphic function body."""

    def __init__(self, state: _State, recursive: dict[Function, Var]) -> None:
        super().__init__()
        self.state = state
        self.types: dict[Var, Type] = {}
        self.recursive = recursive  # literal -> the let variable it calls itself through

    def _type(self, e: RelayExpr) -> Type:
        ty = e.checked_type_ or (e.type_annotation if isinstance(e, Var) else None)
        if ty is None:
            raise TVMError(f"{_WHERE}: untyped {type(e).__name__} (an ember bug)")
        return ty

    def visit_var(self, v: Var) -> RelayExpr:
        ty = self.state.defunc_type(self._type(v))
        new = Var(v.name_hint, ty, span=v.span)
        self.types[new] = ty
        return new

    def visit_function(self, f: Function) -> RelayExpr:
        fty = self._type(f)
        if not isinstance(fty, FuncType):
            raise TVMError(f"{_WHERE}: a function literal of type {fty} (an ember bug)")
        adt = self.state.func_adt(fty)
        gtv, ctors, arms = adt.gtv, adt.ctors, adt.arms
        params = [self.visit(p) for p in f.params]
        body = self.visit(f.body)
        own = self.recursive.get(f)
        me = self.memo_map.get(own) if own is not None else None
        captured = [v for v in free_vars(Function(params, body))
                    if v in self.types and v is not me]
        ctor = Constructor(f"{gtv.name_hint}_{len(ctors)}", [self.types[v] for v in captured],
                           gtv)
        ctors.append(ctor)
        fields = [Var(v.name_hint, self.types[v]) for v in captured]
        subst: dict[Var, RelayExpr] = dict(zip(captured, fields))
        if me is not None:  # a recursive reference is the same closure, rebuilt
            subst[me] = Call(ctor, tuple(fields))
        arms.append(_Arm(ctor, fields, params, fresh_copy(body, subst)))
        return Call(ctor, tuple(captured))

    def visit_call(self, call: Call) -> RelayExpr:
        args = tuple(self.visit(a) for a in call.args)
        op = call.op
        if isinstance(op, (Op, Constructor)):
            return Call(op, args, call.attrs, call.type_args, span=call.span)
        if isinstance(op, GlobalVar) and op.name_hint in self.state.mod:
            func = self.state.mod[op.name_hint]
            subst: dict[int, Type] = {}
            for p, a in zip(func.params, call.args):
                if p.type_annotation is not None:
                    _bind(p.type_annotation, self._type(a), func.type_params, subst)
            if func.ret_type is not None:
                _bind(func.ret_type, self._type(call), func.type_params, subst)
            return Call(self.state.clone(op, subst), args, span=call.span)
        fty = self._type(op)
        if not isinstance(fty, FuncType):
            raise TVMError(f"{_WHERE}: calling a value of type {fty}")
        apply = self.state.func_adt(fty).apply
        return Call(apply, (self.visit(op), *args), span=call.span)

    def visit_global_var(self, gv: GlobalVar) -> RelayExpr:
        return gv  # only in call position after eta-expansion (visit_call handles it)


def _convert(state: _State, func: Function) -> Function:
    """Defunctionalize one monomorphic function (its parameters may be function-typed: they
    become ADT values)."""
    eta = _EtaExpand(state.mod).visit(func)
    typed = infer_type(eta, state.mod)
    assert isinstance(typed, Function), "type inference keeps a function a function"
    recursive = {e.value: e.var for e in post_order(typed) if isinstance(e, Let)
                 and isinstance(e.value, Function) and e.var in free_vars(e.value)}
    conv = _Defunc(state, recursive)
    params = tuple(conv.visit(p) for p in typed.params)
    body = conv.visit(typed.body)
    ret = state.defunc_type(typed.body.checked_type)
    return Function(params, body, ret, (), typed.attrs, span=typed.span)


def Defunctionalization(func: Any, mod: IRModule) -> Function:  # noqa: N802 (TVM's name)
    """``func`` as a first-order function; ``mod`` gains the types and functions it uses
    (module docstring)."""
    if not isinstance(func, Function):
        raise TypeError(f"{_WHERE}: expected a relay.Function, got {type(func).__name__}")
    if not isinstance(mod, IRModule):
        raise TypeError(f"{_WHERE}: expected an IRModule for mod, got {type(mod).__name__}")
    if func.type_params:
        raise TVMError(f"{_WHERE}: the function must not be polymorphic (it has type "
                       f"parameters {', '.join(t.name_hint for t in func.type_params)})")
    typed = infer_type(func, mod)
    fty = typed.checked_type
    for i, ty in enumerate((*fty.arg_types, fty.ret_type)):  # type: ignore[attr-defined]
        if _has_func(ty):
            what = "its result" if i == len(fty.arg_types) else f"parameter {i}"  # type: ignore
            raise TVMError(f"{_WHERE}: the function must be first order, but {what} has "
                           f"type {ty}")
    state = _State(mod)
    out = _convert(state, func)
    state.finish()
    return out


"""A hypothesis strategy of random well-typed Relay modules, for laws over whole programs.

``modules()`` draws an IRModule with the types ``List[A]`` and ``Option[A]``, a few global
functions with random, fully annotated signatures that call each other (recursion included),
and ``@main``. Expressions are drawn *for a type*: each construct is chosen among those that
can produce that type (a variable in scope, a constant, an operator with attrs, ``if``,
``let``, a tuple projection, a called closure, a call of a global, a ``match`` on a list or
an option, a constructor), so the module type-checks by construction; ``InferType`` accepting
it is part of every law. Constants come in several dtypes, as literals and as metadata.

    from program_strategies import modules

    @given(mod=modules())
    def test_law(mod): ...
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

import ember as tvm
from ember import relay
from ember.ir import (Clause, Constructor, FuncType, GlobalTypeVar, GlobalVar, Match,
                      PatternConstructor, PatternTuple, PatternVar, PatternWildcard, RelayRefType,
                      TensorType, TupleType, Type, TypeCall, TypeData, TypeVar)

DTYPES = ("float32", "float16", "float64", "int32", "int64", "int8", "uint8", "bool")
FLOATS = ("float32", "float16", "float64")
SHAPES = ((), (), (2,), (1, 3), (2, 3))
# Names that clash, need cleaning, or hold a '/': the printer must keep them apart.
NAMES = ("x", "x", "y", "x1", "0", "input.1", "conv1/weight", "a_b")


def _list_module() -> tuple[tvm.IRModule, dict[str, Any]]:
    mod = tvm.IRModule()
    lst, opt, a, b = GlobalTypeVar("List"), GlobalTypeVar("Option"), TypeVar("A"), TypeVar("A")
    cons, nil = Constructor("Cons", [a, TypeCall(lst, [a])], lst), Constructor("Nil", [], lst)
    some, none = Constructor("Some", [b], opt), Constructor("None", [], opt)
    mod.add_type_def(lst, TypeData(lst, [a], [cons, nil]))
    mod.add_type_def(opt, TypeData(opt, [b], [some, none]))
    return mod, {"List": lst, "Option": opt, "Cons": cons, "Nil": nil, "Some": some,
                 "None": none}


@dataclass
class _Gen:
    """The state of one draw: the hypothesis ``draw``, the ADTs and the globals' types."""

    draw: Any
    adt: dict[str, Any]
    globals: dict[GlobalVar, FuncType] = field(default_factory=dict)
    max_depth: int = 3
    poly: GlobalVar | None = None  # @pick, when the module has it

    # -- types ----------------------------------------------------------------------------------
    def tensor_type(self, dtype: str | None = None) -> TensorType:
        shape = self.draw(st.sampled_from(SHAPES))
        return TensorType(shape, dtype or self.draw(st.sampled_from(DTYPES)))

    def type(self, depth: int = 0) -> Type:
        kinds = ["tensor"] * 4 + (["tuple", "list", "option", "fn", "ref"] if depth < 2 else [])
        kind = self.draw(st.sampled_from(kinds))
        if kind == "tensor":
            return self.tensor_type()
        if kind == "tuple":
            return TupleType([self.type(depth + 1) for _ in range(self.draw(st.integers(0, 3)))])
        if kind == "fn":
            n = self.draw(st.integers(0, 2))
            return FuncType([self.type(depth + 1) for _ in range(n)], self.type(depth + 1))
        if kind == "ref":
            return RelayRefType(self.type(depth + 1))
        name = "List" if kind == "list" else "Option"
        return TypeCall(self.adt[name], [self.type(depth + 1)])

    def name(self) -> str:
        return self.draw(st.sampled_from(NAMES))

    def binder(self, ty: Type) -> relay.Var:
        """A let or pattern variable, annotated or not (an unannotated one is never used in
        an expression: only annotated variables have a type the generator can match)."""
        return relay.var(self.name(), ty if self.draw(st.booleans()) else None)

    # -- expressions ------------------------------------------------------------------------------
    def expr(self, ty: Type, env: list[relay.Var], depth: int) -> relay.Expr:
        """An expression of type ``ty`` over the variables ``env``."""
        same = [v for v in env if _same_type(v.type_annotation, ty)]
        kinds = ["var"] * 3 if same else []
        kinds += self.kinds_for(ty)
        if depth < self.max_depth:
            kinds += ["if", "let", "project", "closure", "recursive_closure", "match_list",
                      "match_option", "ref_read"]
            if not isinstance(ty, TypeVar) and self.poly:
                kinds += ["poly_call"]
            if any(_same_type(f.ret_type, ty) for f in self.globals.values()):
                kinds += ["global"] * 2
            if self.callables(ty, env):
                kinds += ["call_var"] * 2
        kind = self.draw(st.sampled_from(kinds))
        if kind == "var":
            return self.draw(st.sampled_from(same))
        return getattr(self, "make_" + kind)(ty, env, depth)

    def kinds_for(self, ty: Type) -> list[str]:
        if isinstance(ty, TensorType):
            kinds = ["const", "const"]
            if ty.dtype == "bool":
                return kinds + ["logical", "compare"]
            kinds += ["arith", "unary", "cast"]
            if ty.dtype in FLOATS:
                kinds += ["clip", "leaky_relu"]
            if ty.shape and ty.shape[-1] == 1 or len(ty.shape) == 2 and ty.shape[0] == 1:
                kinds += ["sum"]
            return kinds
        if isinstance(ty, TupleType):
            return ["tuple"] + (["ref_write"] if not ty.fields else [])
        if isinstance(ty, RelayRefType):
            return ["ref"]
        if isinstance(ty, TypeVar):
            return []  # only a variable (or a construct around one) has a type parameter's type
        if isinstance(ty, FuncType):
            fits = [gv for gv, ft in self.globals.items() if _same_type(ft, ty)]
            return ["fn"] + (["global_value"] if fits else [])
        return ["ctor"]

    def sub(self, ty: Type, env: list[relay.Var], depth: int) -> relay.Expr:
        return self.expr(ty, env, depth + 1)

    def make_const(self, ty: TensorType, env: Any, depth: int) -> relay.Expr:
        shape, dtype = tuple(int(d) for d in ty.shape), ty.dtype
        if dtype == "bool":
            value = np.array(self.draw(st.lists(st.booleans(), min_size=int(np.prod(shape)),
                                                max_size=int(np.prod(shape)))), dtype=bool)
        elif dtype in FLOATS:
            value = np.array(self.draw(st.lists(
                st.floats(-1e3, 1e3, allow_nan=False, width=16 if dtype == "float16" else 32),
                min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))), dtype=dtype)
        else:
            info = np.iinfo(dtype)
            value = np.array(self.draw(st.lists(st.integers(int(info.min), int(info.max)),
                                                min_size=int(np.prod(shape)),
                                                max_size=int(np.prod(shape)))), dtype=dtype)
        return relay.const(value.reshape(shape), dtype)

    def make_arith(self, ty: TensorType, env: Any, depth: int) -> relay.Expr:
        op = self.draw(st.sampled_from([relay.add, relay.subtract, relay.multiply,
                                        relay.maximum]))
        # the right operand is often a scalar: broadcasting, and the literal forms
        right_ty = ty if self.draw(st.booleans()) else TensorType((), ty.dtype)
        left = self.sub(ty, env, depth)
        if right_ty is ty and self.draw(st.integers(0, 2)) == 0:
            return op(left, left)  # a shared node: the text must keep it shared
        return op(left, self.sub(right_ty, env, depth))

    def make_unary(self, ty: TensorType, env: Any, depth: int) -> relay.Expr:
        ops = [relay.negative, relay.abs, relay.nn.relu] if ty.dtype[0] != "u" else [relay.abs]
        return self.draw(st.sampled_from(ops))(self.sub(ty, env, depth))

    def make_cast(self, ty: TensorType, env: Any, depth: int) -> relay.Expr:
        source = TensorType(ty.shape, self.draw(st.sampled_from(DTYPES)))
        return relay.cast(self.sub(source, env, depth), ty.dtype)

    def make_clip(self, ty: TensorType, env: Any, depth: int) -> relay.Expr:
        low = self.draw(st.floats(-10, 0, width=16))
        return relay.clip(self.sub(ty, env, depth), low, low + self.draw(st.floats(0, 10,
                                                                                  width=16)))

    def make_leaky_relu(self, ty: TensorType, env: Any, depth: int) -> relay.Expr:
        alpha = self.draw(st.sampled_from([0.1, 0.25, 0.5]))
        return relay.nn.leaky_relu(self.sub(ty, env, depth), alpha=alpha)

    def make_sum(self, ty: TensorType, env: Any, depth: int) -> relay.Expr:
        """A keepdims reduction over an axis of extent 1 in ``ty``, from extent 2 or 3."""
        axis = len(ty.shape) - 1 if int(ty.shape[-1]) == 1 else 0
        shape = list(ty.shape)
        shape[axis] = self.draw(st.sampled_from([2, 3]))
        data = self.sub(TensorType(shape, ty.dtype), env, depth)
        return relay.sum(data, axis=[axis], keepdims=True)

    def make_logical(self, ty: TensorType, env: Any, depth: int) -> relay.Expr:
        if self.draw(st.booleans()):
            return relay.logical_not(self.sub(ty, env, depth))
        return relay.logical_and(self.sub(ty, env, depth), self.sub(ty, env, depth))

    def make_compare(self, ty: TensorType, env: Any, depth: int) -> relay.Expr:
        operand = TensorType(ty.shape, self.draw(st.sampled_from(DTYPES[:-1])))
        op = self.draw(st.sampled_from([relay.less, relay.equal, relay.greater_equal]))
        return op(self.sub(operand, env, depth), self.sub(operand, env, depth))

    def make_ref(self, ty: RelayRefType, env: Any, depth: int) -> relay.Expr:
        return relay.RefCreate(self.sub(ty.value, env, depth))

    def make_ref_read(self, ty: Type, env: Any, depth: int) -> relay.Expr:
        return relay.RefRead(self.sub(RelayRefType(ty), env, depth))

    def make_ref_write(self, ty: TupleType, env: Any, depth: int) -> relay.Expr:
        value_ty = self.type(2)
        return relay.RefWrite(self.sub(RelayRefType(value_ty), env, depth),
                              self.sub(value_ty, env, depth))

    def make_poly_call(self, ty: Type, env: Any, depth: int) -> relay.Expr:
        """A call of the polymorphic global ``@pick[A](%c: bool, %a: A, %b: A) -> A`` at
        ``ty``: inference instantiates A."""
        cond = self.sub(TensorType((), "bool"), env, depth)
        return relay.Call(self.poly, [cond, self.sub(ty, env, depth), self.sub(ty, env, depth)])

    def make_tuple(self, ty: TupleType, env: Any, depth: int) -> relay.Expr:
        fields: list[relay.Expr] = []
        for f in ty.fields:
            earlier = [e for e, t in zip(fields, ty.fields) if _same_type(t, f)]
            shared = earlier and self.draw(st.booleans())
            fields.append(earlier[0] if shared else self.sub(f, env, depth))
        return relay.Tuple(fields)

    def make_fn(self, ty: FuncType, env: list[relay.Var], depth: int) -> relay.Expr:
        params = [relay.var(self.name(), t) for t in ty.arg_types]
        body = self.sub(ty.ret_type, env + params, depth)
        func = relay.Function(params, body, ty.ret_type)
        return func.with_attr("Inline", 1) if self.draw(st.integers(0, 4)) == 0 else func

    def make_ctor(self, ty: TypeCall, env: Any, depth: int) -> relay.Expr:
        (elem,) = ty.args
        name = ty.func.name_hint
        stop = depth >= self.max_depth or self.draw(st.booleans())
        if name == "List":
            if stop:
                return self.adt["Nil"]()
            return self.adt["Cons"](self.sub(elem, env, depth), self.sub(ty, env, depth))
        return self.adt["None"]() if stop else self.adt["Some"](self.sub(elem, env, depth))

    def make_if(self, ty: Type, env: Any, depth: int) -> relay.Expr:
        cond = self.sub(TensorType((), "bool"), env, depth)
        return relay.If(cond, self.sub(ty, env, depth), self.sub(ty, env, depth))

    def make_let(self, ty: Type, env: list[relay.Var], depth: int) -> relay.Expr:
        bound_ty = self.type(1)
        v = self.binder(bound_ty)
        return relay.Let(v, self.sub(bound_ty, env, depth), self.sub(ty, env + [v], depth))

    def make_project(self, ty: Type, env: Any, depth: int) -> relay.Expr:
        others = [self.type(2) for _ in range(self.draw(st.integers(0, 2)))]
        index = self.draw(st.integers(0, len(others)))
        fields = others[:index] + [ty] + others[index:]
        return relay.TupleGetItem(self.sub(TupleType(fields), env, depth), index)

    def make_closure(self, ty: Type, env: Any, depth: int) -> relay.Expr:
        arg_types = [self.type(2) for _ in range(self.draw(st.integers(0, 2)))]
        func = self.make_fn(FuncType(arg_types, ty), env, depth)
        return relay.Call(func, [self.sub(t, env, depth) for t in arg_types])

    def make_recursive_closure(self, ty: Type, env: list[relay.Var], depth: int) -> relay.Expr:
        """``let %f = fn (...) { ... %f(...) ... }; %f(...)``: a let-bound function that may
        call itself (the one place a let's variable is in scope in its own value)."""
        arg_types = [self.type(2) for _ in range(self.draw(st.integers(0, 2)))]
        f = relay.var(self.name(), FuncType(arg_types, ty))
        params = [relay.var(self.name(), t) for t in arg_types]
        func = relay.Function(params, self.sub(ty, env + params + [f], depth), ty)
        return relay.Let(f, func, relay.Call(f, [self.sub(t, env, depth) for t in arg_types]))

    @staticmethod
    def callables(ty: Type, env: list[relay.Var]) -> list[relay.Var]:
        """The function-typed variables in scope that return ``ty``."""
        return [v for v in env if isinstance(v.type_annotation, FuncType)
                and _same_type(v.type_annotation.ret_type, ty)]

    def make_call_var(self, ty: Type, env: list[relay.Var], depth: int) -> relay.Expr:
        f = self.draw(st.sampled_from(self.callables(ty, env)))
        return relay.Call(f, [self.sub(t, env, depth) for t in f.type_annotation.arg_types])

    def make_global_value(self, ty: FuncType, env: Any, depth: int) -> relay.Expr:
        fits = [gv for gv, ft in self.globals.items() if _same_type(ft, ty)]
        return self.draw(st.sampled_from(fits))

    def make_global(self, ty: Type, env: Any, depth: int) -> relay.Expr:
        fits = [gv for gv, ft in self.globals.items() if _same_type(ft.ret_type, ty)]
        gv = self.draw(st.sampled_from(fits))
        return relay.Call(gv, [self.sub(t, env, depth) for t in self.globals[gv].arg_types])

    def make_match_list(self, ty: Type, env: list[relay.Var], depth: int) -> relay.Expr:
        elem = self.type(2)
        data = self.sub(TypeCall(self.adt["List"], [elem]), env, depth)
        head, rest = self.binder(elem), self.binder(TypeCall(self.adt["List"], [elem]))
        cons_pat = PatternConstructor(self.adt["Cons"], [PatternVar(head), PatternVar(rest)])
        clauses = [Clause(cons_pat, self.sub(ty, env + [head, rest], depth))]
        if self.draw(st.booleans()):
            clauses.append(Clause(PatternConstructor(self.adt["Nil"]), self.sub(ty, env, depth)))
        else:
            clauses.append(Clause(PatternWildcard(), self.sub(ty, env, depth)))
        return Match(data, clauses, complete=self.draw(st.booleans()))

    def make_match_option(self, ty: Type, env: list[relay.Var], depth: int) -> relay.Expr:
        elem = self.type(2)
        opt = TypeCall(self.adt["Option"], [elem])
        data = relay.Tuple([self.sub(opt, env, depth), self.sub(opt, env, depth)])
        a, b = self.binder(elem), self.binder(elem)
        both = PatternTuple([PatternConstructor(self.adt["Some"], [PatternVar(a)]),
                             PatternConstructor(self.adt["Some"], [PatternVar(b)])])
        clauses = [Clause(both, self.sub(ty, env + [a, b], depth)),
                   Clause(PatternWildcard(), self.sub(ty, env, depth))]
        return Match(data, clauses, complete=self.draw(st.booleans()))


def _same_type(a: Type | None, b: Type) -> bool:
    return a is not None and tvm.ir.structural_equal(a, b)


@st.composite
def modules(draw: Any, max_globals: int = 3, max_depth: int = 3) -> tvm.IRModule:
    """A random well-typed module: List/Option, up to ``max_globals`` annotated global
    functions (which may call each other and themselves) and ``@main``."""
    mod, adt = _list_module()
    gen = _Gen(draw, adt, max_depth=max_depth)
    names = ["main"] + [f"f{i}" for i in range(draw(st.integers(0, max_globals)))]
    if draw(st.booleans()):
        names[-1] = "model/" + names[-1]  # a global name with a '/'
    for name in names:
        arg_types = [gen.type() for _ in range(draw(st.integers(0, 3)))]
        gen.globals[GlobalVar(name)] = FuncType(arg_types, gen.type())
    if draw(st.booleans()):
        gen.poly = GlobalVar("pick")
    for gv, ft in gen.globals.items():
        params = [relay.var(gen.name(), t) for t in ft.arg_types]
        body = gen.expr(ft.ret_type, params, 0)
        mod[gv] = relay.Function(params, body, ft.ret_type)
    if gen.poly is not None:
        mod[gen.poly] = _pick(gen)
    return mod


def _pick(gen: _Gen) -> relay.Function:
    """``def @pick[A](%c: bool, %a: A, %b: A) -> A``, its body drawn over A (so lets, ifs,
    matches and closures of a type parameter's type, and calls of itself)."""
    a = TypeVar("A")
    params = [relay.var("c", "bool"), relay.var(gen.name(), a), relay.var(gen.name(), a)]
    gen.globals[gen.poly] = FuncType([TensorType((), "bool"), a, a], a)  # self-calls at A
    body = gen.expr(a, params, 1)
    return relay.Function(params, body, a, type_params=[a])

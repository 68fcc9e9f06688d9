"""The typing rules of Relay expressions, one method per node kind.

``ExprChecker`` walks a function children-first (``post_order``, iterative) and gives every
node a type that may still contain unknowns (``IncompleteType``). Unknowns are solved by the
``Unifier``. Operator calls become deferred constraints: the op's ``type_rel`` runs once the
argument types are known, and again whenever they become more precise; ``solve`` iterates
them to a fixpoint. The module-level driver (global functions, generalisation, writing the
types back) is in ``type_infer.py``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...ir.adt import (
    Constructor,
    Match,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    TypeData,
)
from ...ir.expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    Let,
    RefCreate,
    RefRead,
    RefWrite,
    RelayExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.types import (
    FuncType,
    IncompleteType,
    RelayRefType,
    TensorType,
    TupleType,
    Type,
    TypeCall,
)
from ...ir.visitor import children, post_order
from ...runtime.errors import InternalError, TypeInferenceError
from ._deferred import Deferred, Projection, Relation
from ._diagnose import callee_name, global_by_name, located
from ._patterns import missing_case, show_pattern
from ._unify import Unifier, UnifyError, instantiate, show_type

BOOL = TensorType((), "bool")
CONSTANT_TYPES_KEPT = 4096
_CONSTANT_TYPES: dict[tuple[tuple[int, ...], str], TensorType] = {}
Owner = tuple[str, Any]  # (name shown in messages, the global function being checked)


class ExprChecker:
    """Types expressions against a module's globals and type definitions."""

    def __init__(self, mod: IRModule) -> None:
        self.mod = mod
        self.uf = Unifier()
        self.types: dict[RelayExpr, Type] = {}
        self.skeletons: dict[Function, FuncType] = {}
        self.global_types: dict[GlobalVar, FuncType] = {}
        self.poly_ok: set[GlobalVar] = set()  # globals whose uses may be instantiated
        self.deferred: list[Deferred] = []
        self.owner: Owner = ("expr", None)
        self.bound: set[Var] = set()
        self.used: dict[Var, None] = {}
        self.let_of: dict[Var, Let] = {}  # let variables whose binding was not checked yet

    # -- errors ---------------------------------------------------------------------------------
    def fail(self, node: Any, msg: str, owner: Owner | None = None) -> TypeInferenceError:
        name, func = owner or self.owner
        return TypeInferenceError(located(msg, node, name, func))

    def unify_at(self, node: Any, actual: Type, expected: Type, fmt: str,
                 owner: Owner | None = None) -> Type:
        """Unify; on failure raise ``fmt`` filled with {expected}, {actual} and {detail}
        (the detail names the expected side first: ``dtype float32 vs int32``)."""
        try:
            return self.uf.unify(expected, actual)
        except UnifyError as err:
            msg = fmt.format(expected=show_type(self.uf.resolve(expected)),
                             actual=show_type(self.uf.resolve(actual)), detail=err.detail)
            raise self.fail(node, msg, owner) from None

    # -- walking --------------------------------------------------------------------------------
    def check_expr(self, expr: RelayExpr) -> Type:
        """Type ``expr`` and everything below it (children first, without recursion)."""
        for node in post_order(expr, on_enter=self._enter, kids=_check_order):
            rule = _RULES.get(type(node))
            if rule is None:
                raise self.fail(node, f"type inference does not know {type(node).__name__} nodes")
            ty = rule(self, node)
            if ty is not None:
                self.types[node] = ty
        return self.type_of(expr)

    def _enter(self, node: RelayExpr) -> None:
        if isinstance(node, Let):
            self.let_of[node.var] = node
        # ``let %f = fn (...) {...}`` (a local, maybe recursive, function): %f has the type the
        # function declares from the start, so that neither its recursive calls nor the calls
        # in the let's body narrow it (a ``?`` parameter stays ``?``; while_loop relies on it).
        if (isinstance(node, Let) and isinstance(node.value, Function)
                and node.var.type_annotation is None and node.var not in self.types):
            self.types[node.var] = self.skeleton(node.value)

    def type_of(self, e: RelayExpr) -> Type:
        ty = self.types.get(e)
        if ty is not None:
            return ty
        if isinstance(e, GlobalVar):
            return self.global_use(e)
        if isinstance(e, Constructor):
            return instantiate(self.ctor_type(e))[0]
        if isinstance(e, Op):
            raise self.fail(e, f"operator {e.name} can only be called; to pass it as a value, "
                               "wrap it in a function")
        raise InternalError(f"type inference: no type for {type(e).__name__} node")

    def var_type(self, v: Var) -> Type:
        ty = self.types.get(v)
        if ty is None:
            ty = self.types[v] = v.type_annotation or IncompleteType()
        return ty

    def skeleton(self, f: Function) -> FuncType:
        """The type of ``f`` from its annotations, with unknowns where they are missing."""
        sk = self.skeletons.get(f)
        if sk is None:
            params = tuple(self.var_type(p) for p in f.params)
            sk = FuncType(params, f.ret_type or IncompleteType(), f.type_params)
            self.skeletons[f] = sk
        return sk

    def solve(self) -> None:
        """Run deferred constraints until none of them learns anything new."""
        for _ in range(10_000):
            ran = [c.step(self) for c in self.deferred]  # every one steps: no short-circuit
            if not any(ran):
                return
        raise InternalError("type inference did not reach a fixpoint")

    # -- globals and constructors ---------------------------------------------------------------
    def global_use(self, gv: GlobalVar) -> Type:
        gv = self.lookup_global(gv)
        fty = self.global_types[gv]
        if gv not in self.poly_ok:  # inside its own recursive group: monomorphic
            return FuncType(fty.arg_types, fty.ret_type)
        return instantiate(fty)[0] if fty.type_params else fty

    def lookup_global(self, gv: GlobalVar) -> GlobalVar:
        """The module's GlobalVar for ``gv`` (matched by name if it is another object)."""
        if gv in self.global_types:
            return gv
        same = global_by_name(self.mod, gv)
        if same is None:
            defined = ", ".join("@" + g.name_hint for g in self.mod.functions) or "none"
            raise self.fail(gv, f"unknown global function @{gv.name_hint}; the module "
                                f"defines {defined}")
        if same not in self.global_types:
            ty = getattr(self.mod.functions[same], "checked_type_", None)
            if isinstance(self.mod.functions[same], Function) or not isinstance(ty, FuncType):
                raise InternalError(f"global @{gv.name_hint} was not checked before its use")
            self.global_types[same] = ty  # an already typed non-Relay function
            self.poly_ok.add(same)
        return same

    def type_data(self, c: Constructor) -> TypeData:
        head = c.belong_to
        td = self.mod.type_definitions.get(head) if head is not None else None
        if td is None and head is not None:  # another GlobalTypeVar object of the same name
            same = next((g for g in self.mod.type_definitions if g.name_hint == head.name_hint),
                        None)
            td = self.mod.type_definitions.get(same) if same is not None else None
        if td is None or not any(k is c for k in td.constructors):
            owner = head.name_hint if head is not None else "no type"
            raise self.fail(c, f"constructor {c.name_hint} belongs to {owner}, which this "
                               "module does not define; add the type definition to the module")
        return td

    def ctor_type(self, c: Constructor) -> FuncType:
        """``fn[type vars](inputs) -> Head[type vars]``."""
        td = self.type_data(c)
        return FuncType(c.inputs, TypeCall(td.header, td.type_vars), td.type_vars)

    # -- rules ----------------------------------------------------------------------------------
    def _var(self, e: Var) -> Type:
        let = self.let_of.get(e)
        if let is not None and let.value in self.types:  # met as the binder, after its value
            del self.let_of[e]
            self._bind_let(let)
        else:
            self.used[e] = None
        return self.var_type(e)

    def _constant(self, e: Constant) -> Type:
        # One TensorType per shape and dtype: a model has thousands of constants of a few
        # types, and building a TensorType (normalising dims, parsing the dtype) is slow.
        key = (tuple(e.data.shape), str(e.data.dtype))
        ty = _CONSTANT_TYPES.get(key)
        if ty is None:
            if len(_CONSTANT_TYPES) >= CONSTANT_TYPES_KEPT:
                _CONSTANT_TYPES.clear()
            ty = _CONSTANT_TYPES[key] = TensorType(*key)
        return ty

    def _tuple(self, e: Tuple) -> Type:
        return TupleType(tuple(self.type_of(f) for f in e.fields))

    def _leaf(self, e: RelayExpr) -> None:
        return None  # globals, constructors and ops are typed at each use (type_of)

    def _tuple_get_item(self, e: TupleGetItem) -> Type:
        tup = self.uf.shallow(self.type_of(e.tuple_value))
        if isinstance(tup, TupleType):  # the usual case: no need to wait
            return Projection.field(self, e, tup)
        out = IncompleteType()
        self.defer(Projection(e, [tup], out, self.owner))
        return out

    def _let(self, e: Let) -> Type:
        if self.let_of.pop(e.var, None) is not None:  # the variable was met in its value
            self._bind_let(e)
        return self.type_of(e.body)

    def _bind_let(self, e: Let) -> None:
        # Done where the walk meets the variable, right after the value and before the body
        # (unless the value uses the variable): the body then sees the variable's type, and
        # nothing in it waits for the let (a deep tuple in A-normal form would otherwise
        # leave every projection waiting).
        self.bound.add(e.var)
        fmt = (f"let %{e.var.name_hint}: the value has type {{actual}}, but the variable is "
               "annotated {expected} ({detail})")
        self.unify_at(e, self.type_of(e.value), self.var_type(e.var), fmt)

    def _if(self, e: If) -> Type:
        cond = self.type_of(e.cond)
        self.unify_at(e, cond, BOOL, "if: the condition must be a 0-d bool tensor (bool), "
                                     "got {actual}")
        fmt = ("if: the branches have different types: the then-branch has {expected}, the "
               "else-branch has {actual} ({detail})")
        return self.unify_at(e, self.type_of(e.false_branch), self.type_of(e.true_branch), fmt)

    def _function(self, e: Function) -> Type:
        sk = self.skeleton(e)
        self.bound.update(e.params)
        fmt = (f"{self._fn_label(e)}: the result type is {{expected}}, but the body has type "
               "{actual} ({detail})")
        self.unify_at(e, self.type_of(e.body), sk.ret_type, fmt)
        return sk

    def _fn_label(self, e: Function) -> str:
        name, func = self.owner
        return name if func is e else "fn"

    def _call(self, e: Call) -> Type:
        if isinstance(e.op, Op):
            return self._op_call(e)
        name = callee_name(e.op)
        callee = self.uf.shallow(self.type_of(e.op))
        args = [self.type_of(a) for a in e.args]
        if isinstance(callee, IncompleteType):
            # Calling an unknown: it is a function whose parameters are unknowns too (so that
            # a later call with more precise arguments refines them).
            params = tuple(IncompleteType() for _ in args)
            callee = self.unify_at(e, callee, FuncType(params, IncompleteType()),
                                   f"{name}: {{detail}}")
            callee = self.uf.shallow(callee)
        if not isinstance(callee, FuncType):
            raise self.fail(e, f"{name} is not a function: it has type {show_type(callee)}")
        if callee.type_params:
            callee = instantiate(callee)[0]
        if len(args) != len(callee.arg_types):
            raise self.fail(e, f"{name}: expected {len(callee.arg_types)} argument(s), "
                               f"got {len(args)}")
        for i, (a, p) in enumerate(zip(args, callee.arg_types)):
            fmt = f"{name}: argument {i}{self._param_name(e.op, i)}: "
            self.unify_at(e, a, p, fmt + "expected {expected}, got {actual} ({detail})")
        return callee.ret_type

    def _param_name(self, callee: RelayExpr, i: int) -> str:
        func = callee
        if isinstance(callee, GlobalVar) and callee in self.mod.functions:
            func = self.mod.functions[callee]
        if isinstance(func, Function) and i < len(func.params):
            return f" (%{func.params[i].name_hint})"
        return ""

    def _op_call(self, e: Call) -> Type:
        od = e.op.op_def  # type: ignore[attr-defined]
        if od.type_rel is None:
            raise self.fail(e, f"{od.name}: the operator has no type relation")
        if od.num_inputs is not None and len(e.args) != od.num_inputs:
            names = f" ({', '.join(od.arg_names)})" if od.arg_names else ""
            raise self.fail(e, f"{od.name}: expected {od.num_inputs} argument(s){names}, "
                               f"got {len(e.args)}")
        out = IncompleteType()
        self.defer(Relation(e, [self.type_of(a) for a in e.args], out, self.owner))
        return out

    def defer(self, c: Deferred) -> None:
        c.step(self)
        self.deferred.append(c)

    def _ref_create(self, e: RefCreate) -> Type:
        return RelayRefType(self.type_of(e.value))

    def _ref_read(self, e: RefRead) -> Type:
        out = IncompleteType()
        self.unify_at(e, self.type_of(e.ref), RelayRefType(out),
                      "RefRead: expected a reference, got {actual}")
        return out

    def _ref_write(self, e: RefWrite) -> Type:
        fmt = ("RefWrite: cannot store a value of type {expected} in a reference of type "
               "{actual} ({detail})")
        self.unify_at(e, self.type_of(e.ref), RelayRefType(self.type_of(e.value)), fmt)
        return TupleType(())

    def _match(self, e: Match) -> Type:
        data = self.type_of(e.data)
        out: Type | None = None
        for i, clause in enumerate(e.clauses):
            self.check_pattern(clause.lhs, data, e)
            rhs = self.type_of(clause.rhs)
            fmt = (f"match: clause {i} ({show_pattern(clause.lhs)}) has type {{actual}}, but the "
                   "clauses before it have type {expected} ({detail})")
            out = rhs if out is None else self.unify_at(e, rhs, out, fmt)
        if e.complete:
            missing = missing_case([c.lhs for c in e.clauses], self._siblings)
            if missing is not None:
                raise self.fail(e, f"match is not exhaustive: missing {missing} (use match? "
                                   "for a match that may fail at run time)")
        return out if out is not None else IncompleteType()

    def _siblings(self, c: Constructor) -> tuple[Constructor, ...]:
        return self.type_data(c).constructors

    def check_pattern(self, pat: Pattern, ty: Type, match: Match) -> None:
        """Unify the pattern's shape with ``ty`` and give its variables their types
        (sub-patterns left to right, from a stack: patterns may nest deeply)."""
        stack = [(pat, ty)]
        while stack:
            p, t = stack.pop()
            subs = self._check_one_pattern(p, t, match)
            stack.extend(reversed(subs))

    def _check_one_pattern(self, p: Pattern, ty: Type, match: Match) -> list[tuple[Pattern, Type]]:
        """Check ``p`` itself against ``ty``; return its sub-patterns with their types."""
        if isinstance(p, PatternVar):
            self.bound.add(p.var)
            fmt = (f"match: pattern variable %{p.var.name_hint} is annotated {{expected}}, but "
                   "the value it matches has type {actual} ({detail})")
            self.unify_at(match, ty, self.var_type(p.var), fmt)
        elif isinstance(p, PatternConstructor):
            fty = instantiate(self.ctor_type(p.constructor))[0]
            fmt = (f"match: pattern {show_pattern(p)} matches values of type {{expected}}, but "
                   "the matched value has type {actual}")
            self.unify_at(match, ty, fty.ret_type, fmt)
            if len(p.patterns) != len(fty.arg_types):
                raise self.fail(match, f"match: pattern {show_pattern(p)} has {len(p.patterns)} "
                                       f"sub-pattern(s), but {p.constructor.name_hint} has "
                                       f"{len(fty.arg_types)} field(s)")
            return list(zip(p.patterns, fty.arg_types))
        elif isinstance(p, PatternTuple):
            fields = tuple(IncompleteType() for _ in p.patterns)
            fmt = (f"match: pattern {show_pattern(p)} matches a tuple of {len(fields)} fields, "
                   "but the matched value has type {actual}")
            self.unify_at(match, ty, TupleType(fields), fmt)
            return list(zip(p.patterns, fields))
        return []


def _check_order(e: RelayExpr) -> tuple[RelayExpr, ...]:
    """The children checked before ``e``: a let's value comes before its variable."""
    return (e.value, e.var, e.body) if isinstance(e, Let) else children(e)


_RULES: dict[type, Callable[[ExprChecker, Any], Type | None]] = {
    Var: ExprChecker._var, Constant: ExprChecker._constant, Tuple: ExprChecker._tuple,
    GlobalVar: ExprChecker._leaf, Constructor: ExprChecker._leaf, Op: ExprChecker._leaf,
    TupleGetItem: ExprChecker._tuple_get_item, Let: ExprChecker._let, If: ExprChecker._if,
    Function: ExprChecker._function, Call: ExprChecker._call, Match: ExprChecker._match,
    RefCreate: ExprChecker._ref_create, RefRead: ExprChecker._ref_read,
    RefWrite: ExprChecker._ref_write,
}

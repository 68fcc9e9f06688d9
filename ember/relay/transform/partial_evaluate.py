"""PartialEvaluate: run what is known at compile time, leave a residual program for the rest.

Each global function is evaluated with its parameters unknown (``_partial_values`` describes
what is tracked). Known results replace computation:

- an operator call whose arguments are all known tensors is computed (its numpy reference,
  as FoldConstant does; stateful ops and calls without arguments are left);
- tuples, projections of known tuples, constructor applications and ``match`` on a known
  constructor are resolved (``hd(Cons(%x, Nil))`` is ``%x``);
- ``if`` with a known condition keeps one branch; with an unknown one both branches are
  evaluated, each with its own copy of what is known of references;
- calls of known functions (local closures, let-bound functions, global functions) are
  inlined. A recursive function is inlined only when every argument has a known shape (a
  known tensor, tuple, list, ...) and at most ``max_depth`` calls deep, which unrolls loops
  over known data and leaves loops over run-time data as calls (and no call is inlined more
  than 2000 calls deep, which stops recursion through references);
- references created during evaluation are tracked: reading one gives its known contents,
  writing one records them; a residual ``ref`` exists only for those that escape (passed to
  unknown code, captured by a residual closure, or written differently by the two sides of
  a dynamic branch).

The output binds every residual value with ``let`` (A-normal form) and may hold dead
bindings: follow with ``DeadCodeElimination`` (as TVM's tests do, with ``inline_once=True``).
The evaluation runs on ``ember.ir.trampoline``, so deep programs and deep inlining need no
Python recursion.
"""
from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...ir.adt import (Clause, Constructor, Match, PatternConstructor, PatternTuple, PatternVar,
                       PatternWildcard)
from ...ir.expr import (Call, Constant, Function, GlobalVar, If, Let, RefCreate, RefRead,
                        RefWrite, RelayExpr, Tuple, TupleGetItem, Var)
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.trampoline import run
from ...ir.transform import ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ...ir.visitor import free_vars, is_primitive
from ..analysis import all_type_vars
from ...runtime.errors import TVMError
from ...runtime.ndarray import array as nd_array
from ._fresh import fresh_copy
from ._helpers import infer
from ._partial_values import (PV, LetList, RefState, SClosure, SCtor, SRef, Store, STensor,
                              STuple, refs_reachable)
from .remove_unused_functions import call_graph, recursive_functions
from .to_a_normal_form import to_a_normal_form
from .type_infer import infer_type

__all__ = ["PartialEvaluate", "partial_evaluate"]

Step = Generator[Any, Any, Any]
_UNIT = PV(STuple([]), Tuple(()))
_NEVER_FOLD = frozenset({"annotation.stop_fusion"})
_MAX_NESTING = 2000


class _Evaluator:
    def __init__(self, mod: IRModule, max_depth: int, recursive_globals: set[str]) -> None:
        self.mod, self.max_depth = mod, max_depth
        self.recursive_globals = recursive_globals
        self.free: dict[Function, list[Var]] = {}
        self.depth: dict[Function, int] = {}
        self.nesting = 0  # inlined calls in progress, of any function

    # -- materializing: the run-time form of a partial value ------------------------------------
    def materialize(self, pv: PV, ll: LetList, store: Store) -> Step:
        if pv.dyn is not None and ll.sees(pv.where):
            return pv.dyn
        s = pv.static
        if isinstance(s, STensor):
            pv.dyn, pv.where = Constant(nd_array(s.value)), None
            return pv.dyn
        if isinstance(s, STuple):
            fields = []
            for f in s.fields:
                fields.append((yield self.materialize(f, ll, store)))
            out = ll.push(Tuple(tuple(fields)), "t")
        elif isinstance(s, SCtor):
            fields = []
            for f in s.fields:
                fields.append((yield self.materialize(f, ll, store)))
            out = ll.push(Call(s.ctor, tuple(fields)), "c")
        elif isinstance(s, SRef):
            yield self.escape(s, ll, store)
            return s.residual
        elif isinstance(s, SClosure):
            return (yield self.residualize(pv, s, ll, store))
        else:
            raise TVMError("PartialEvaluate: a value with no static or run-time form "
                           "(an ember bug)")
        pv.dyn, pv.where = out, ll
        return out

    def escape(self, ref: SRef, ll: LetList, store: Store) -> Step:
        """Hand ``ref`` over to run time: its residual ref holds the known contents."""
        if ref.residual is None:
            init = yield self.materialize(ref.init, ref.home, store)
            ref.residual = ref.home.push(RefCreate(init), "r")
        state = store.refs.get(ref)
        if state is None or state.escaped:
            return None
        if state.known is not ref.init:
            value = yield self.materialize(state.known, ll, store)  # type: ignore[arg-type]
            ll.push(RefWrite(ref.residual, value), "u")
        state.escaped, state.known = True, None
        return None

    def residualize(self, pv: PV, clo: SClosure, ll: LetList, store: Store) -> Step:
        """A residual function literal for a closure: its body evaluated with unknown
        parameters, after every reference it can reach has escaped."""
        for ref in refs_reachable(list(clo.env.values())):
            yield self.escape(ref, ll, store)
        func = fresh_copy(clo.func, keep=_monomorphic)
        assert isinstance(func, Function), "a copy of a function is a function"
        params = func.params
        fvar = Var(f"f{id(pv) % 10000}")
        pv.dyn, pv.where = fvar, ll  # a recursive reference inside is this variable
        inner = LetList(ll)
        env = dict(zip(clo.func.params, (PV(None, p, None) for p in params)))
        env.update(clo.env)
        if clo.self_var is not None:
            env[clo.self_var] = pv
        inner_store = store.copy()
        body = yield self.eval(clo.func.body, env, inner, inner_store)
        result = yield self.materialize(body, inner, inner_store)
        ll.binds.append((fvar, Function(params, inner.wrap(result), None, (), func.attrs)))
        return fvar

    # -- evaluation ---------------------------------------------------------------------------
    def eval(self, e: RelayExpr, env: dict[Var, PV], ll: LetList, store: Store) -> Step:
        handler = getattr(self, f"eval_{type(e).__name__}", None)
        if handler is None:
            raise TVMError(f"PartialEvaluate: cannot evaluate a {type(e).__name__}")
        return (yield handler(e, env, ll, store))

    def eval_Var(self, e: Var, env: dict[Var, PV], ll: LetList, store: Store) -> Step:
        pv = env.get(e)
        return PV(None, e, None) if pv is None else pv
        yield  # a step

    def eval_Constant(self, e: Constant, env: Any, ll: LetList, store: Store) -> Step:
        return PV(STensor(e.data.numpy()), e, None)
        yield

    def eval_GlobalVar(self, e: GlobalVar, env: Any, ll: LetList, store: Store) -> Step:
        func = self.mod.functions.get(e) if e in self.mod.functions else (
            self.mod[e.name_hint] if e.name_hint in self.mod else None)
        if not isinstance(func, Function) or is_primitive(func):
            return PV(None, e, None)
        return PV(SClosure(func, {}, recursive=e.name_hint in self.recursive_globals), e, None)
        yield

    def eval_Op(self, e: Op, env: Any, ll: LetList, store: Store) -> Step:
        return PV(None, e, None)
        yield

    eval_Constructor = eval_Op

    def eval_Function(self, e: Function, env: dict[Var, PV], ll: LetList, store: Store) -> Step:
        if is_primitive(e):
            return PV(None, e, None)
        return PV(SClosure(e, self._captured(e, env)))
        yield

    def _captured(self, func: Function, env: dict[Var, PV], skip: Var | None = None) -> dict:
        fvs = self.free.get(func)
        if fvs is None:
            fvs = self.free[func] = free_vars(func)
        return {v: env.get(v) or PV(None, v, None) for v in fvs if v is not skip}

    def eval_Tuple(self, e: Tuple, env: dict[Var, PV], ll: LetList, store: Store) -> Step:
        fields = []
        for f in e.fields:
            fields.append((yield self.eval(f, env, ll, store)))
        return PV(STuple(fields))

    def eval_TupleGetItem(self, e: TupleGetItem, env: Any, ll: LetList, store: Store) -> Step:
        tup = yield self.eval(e.tuple_value, env, ll, store)
        if isinstance(tup.static, STuple):
            return tup.static.fields[e.index]
        value = yield self.materialize(tup, ll, store)
        return PV(None, ll.push(TupleGetItem(value, e.index)), ll)

    def eval_Let(self, e: Let, env: dict[Var, PV], ll: LetList, store: Store) -> Step:
        while isinstance(e, Let):  # a let chain in a loop, not a step per binding
            value = e.value
            if isinstance(value, Function) and e.var in self._captured_vars(value):
                clo = SClosure(value, self._captured(value, env, e.var), e.var, recursive=True)
                env[e.var] = PV(clo)
            else:
                env[e.var] = yield self.eval(value, env, ll, store)
            e = e.body  # type: ignore[assignment]
        return (yield self.eval(e, env, ll, store))

    def _captured_vars(self, func: Function) -> list[Var]:
        if func not in self.free:
            self.free[func] = free_vars(func)
        return self.free[func]

    def eval_If(self, e: If, env: dict[Var, PV], ll: LetList, store: Store) -> Step:
        cond = yield self.eval(e.cond, env, ll, store)
        if isinstance(cond.static, STensor):
            branch = e.true_branch if bool(cond.static.value) else e.false_branch
            return (yield self.eval(branch, env, ll, store))
        c = yield self.materialize(cond, ll, store)
        (t, f) = yield self.branches([(e.true_branch, {}), (e.false_branch, {})], env, ll, store)
        return PV(None, ll.push(If(c, t, f)), ll)

    def branches(self, arms: list[tuple[RelayExpr, dict[Var, PV]]], env: dict[Var, PV],
                 ll: LetList, store: Store) -> Step:
        """Evaluate each arm of a dynamic branch in its own let list and store copy; refs
        known differently afterwards escape at the end of each arm."""
        results, stores, lists = [], [], []
        for body, binds in arms:
            arm_ll, arm_store = LetList(ll), store.copy()
            arm_env = dict(env)
            arm_env.update(binds)
            pv = yield self.eval(body, arm_env, arm_ll, arm_store)
            results.append((yield self.materialize(pv, arm_ll, arm_store)))
            stores.append(arm_store)
            lists.append(arm_ll)
        for ref, state in store.refs.items():
            after = [s.refs[ref] for s in stores]
            same = all(not a.escaped and a.known is after[0].known for a in after)
            if state.escaped or same:
                if same:
                    state.known = after[0].known
                continue
            for arm_ll, arm_store in zip(lists, stores):
                yield self.escape(ref, arm_ll, arm_store)
            state.escaped, state.known = True, None
        return [arm_ll.wrap(r) for arm_ll, r in zip(lists, results)]

    def eval_Match(self, e: Match, env: dict[Var, PV], ll: LetList, store: Store) -> Step:
        data = yield self.eval(e.data, env, ll, store)
        for clause in e.clauses:
            binds: dict[Var, PV] = {}
            verdict = _match(clause.lhs, data, binds)
            if verdict is True:
                env.update(binds)
                return (yield self.eval(clause.rhs, env, ll, store))
            if verdict is None:
                break  # not decidable at compile time: a residual match
        else:
            raise TVMError("PartialEvaluate: no clause of a match fits a value known at "
                           "compile time (the program fails when it runs)")
        d = yield self.materialize(data, ll, store)
        arms, pats = [], []
        for clause in e.clauses:
            fresh = fresh_copy(Match(Var("_"), (clause,), e.complete),  # type: ignore
                               keep=_monomorphic).clauses[0].lhs
            binds = dict(zip(_pattern_vars(clause.lhs),
                             (PV(None, v, None) for v in _pattern_vars(fresh))))
            arms.append((clause.rhs, binds))
            pats.append(fresh)
        rhs = yield self.branches(arms, env, ll, store)
        return PV(None, ll.push(Match(d, tuple(Clause(p, r) for p, r in zip(pats, rhs)),
                                      e.complete)), ll)

    def eval_RefCreate(self, e: RefCreate, env: Any, ll: LetList, store: Store) -> Step:
        value = yield self.eval(e.value, env, ll, store)
        ref = SRef(ll, value)
        store.refs[ref] = RefState(value)
        return PV(ref)

    def eval_RefRead(self, e: RefRead, env: Any, ll: LetList, store: Store) -> Step:
        ref = yield self.eval(e.ref, env, ll, store)
        state = store.refs.get(ref.static) if isinstance(ref.static, SRef) else None
        if state is not None and not state.escaped:
            return state.known
        r = yield self.materialize(ref, ll, store)
        return PV(None, ll.push(RefRead(r)), ll)

    def eval_RefWrite(self, e: RefWrite, env: Any, ll: LetList, store: Store) -> Step:
        ref = yield self.eval(e.ref, env, ll, store)
        value = yield self.eval(e.value, env, ll, store)
        state = store.refs.get(ref.static) if isinstance(ref.static, SRef) else None
        if state is not None and not state.escaped:
            state.known = value
            return _UNIT
        r = yield self.materialize(ref, ll, store)
        v = yield self.materialize(value, ll, store)
        ll.push(RefWrite(r, v), "u")
        return _UNIT

    def eval_Call(self, e: Call, env: dict[Var, PV], ll: LetList, store: Store) -> Step:
        callee = yield self.eval(e.op, env, ll, store)
        args = []
        for a in e.args:
            args.append((yield self.eval(a, env, ll, store)))
        if isinstance(e.op, Op):
            return (yield self.call_op(e, args, ll, store))
        if isinstance(e.op, Constructor):
            return PV(SCtor(e.op, args))
        clo = callee.static
        if isinstance(clo, SClosure) and self._inline(clo, args):
            return (yield self.inline(callee, clo, args, ll, store))
        f = yield self.materialize(callee, ll, store)
        dyn_args = []
        for a in args:
            dyn_args.append((yield self.materialize(a, ll, store)))
        return PV(None, ll.push(Call(f, tuple(dyn_args), e.attrs, e.type_args)), ll)

    def _inline(self, clo: SClosure, args: list[PV]) -> bool:
        if self.nesting >= _MAX_NESTING:  # e.g. recursion through a reference
            return False
        if not clo.recursive:
            return True
        return (self.depth.get(clo.func, 0) < self.max_depth
                and all(a.static is not None and not isinstance(a.static, SRef) for a in args))

    def inline(self, callee: PV, clo: SClosure, args: list[PV], ll: LetList,
               store: Store) -> Step:
        func = clo.func
        if len(args) != len(func.params):
            raise TVMError(f"PartialEvaluate: a function of {len(func.params)} parameter(s) is "
                           f"called with {len(args)} argument(s)")
        env = dict(clo.env)
        if clo.self_var is not None:
            env[clo.self_var] = callee
        env.update(zip(func.params, args))
        self.depth[func] = self.depth.get(func, 0) + 1
        self.nesting += 1
        try:
            return (yield self.eval(func.body, env, ll, store))
        finally:
            self.depth[func] -= 1
            self.nesting -= 1

    def call_op(self, e: Call, args: list[PV], ll: LetList, store: Store) -> Step:
        op, ty = e.op, e.checked_type_
        foldable = bool(args) and (op.name not in _NEVER_FOLD  # type: ignore[union-attr]
                    and not op.op_def.extra.get("stateful")  # type: ignore[union-attr]
                    and op.op_def.reference is not None  # type: ignore[union-attr]
                    and isinstance(ty, TensorType) and all(isinstance(d, int) for d in ty.shape)
                    and all(isinstance(a.static, STensor) for a in args))
        if foldable:
            value = op.op_def.reference(*(a.static.value for a in args),  # type: ignore
                                        attrs=e.attrs)
            arr = np.asarray(value).astype(ty.dtype)  # type: ignore[union-attr]
            return PV(STensor(arr), Constant(nd_array(arr)), None)
        dyn_args = []
        for a in args:
            dyn_args.append((yield self.materialize(a, ll, store)))
        return PV(None, ll.push(Call(op, tuple(dyn_args), e.attrs, e.type_args)), ll)


def _monomorphic(ty: Any) -> bool:
    """Annotations naming type variables are dropped from residual binders: inlined from a
    polymorphic function, they would name its type parameters where they are not bound."""
    return ty is None or not all_type_vars(ty)


def _pattern_vars(pat: Any) -> list[Var]:
    from ...ir.adt import pattern_vars

    return list(pattern_vars(pat))


def _match(pat: Any, pv: PV, binds: dict[Var, PV]) -> bool | None:
    """True/False when ``pv`` is known enough to decide the pattern, None otherwise."""
    stack = [(pat, pv)]
    undecided = False
    while stack:
        p, v = stack.pop()
        if isinstance(p, PatternWildcard):
            continue
        if isinstance(p, PatternVar):
            binds[p.var] = v
            continue
        s = v.static
        if isinstance(p, PatternConstructor):
            if not isinstance(s, SCtor):
                undecided = True
                continue
            if s.ctor.tag != p.constructor.tag or s.ctor.name_hint != p.constructor.name_hint:
                return False
            stack.extend(zip(p.patterns, s.fields))
        elif isinstance(p, PatternTuple):
            if not isinstance(s, STuple):
                undecided = True
                continue
            stack.extend(zip(p.patterns, s.fields))
    return None if undecided else True


def partial_evaluate(func: Function, mod: IRModule, max_depth: int = 64,
                     recursive_globals: set[str] | None = None) -> Function:
    """The residual function of a typed ``func`` (module docstring). ``recursive_globals``:
    the module's recursive functions (``recursive_functions``), computed here when not given;
    the pass computes them once for all of the module's functions."""
    anf = infer_type(to_a_normal_form(func), mod)
    assert isinstance(anf, Function), "ToANormalForm keeps a function a function"
    if recursive_globals is None:
        recursive_globals = recursive_functions(call_graph(mod))
    ev = _Evaluator(mod, max_depth, recursive_globals)
    ll = LetList()
    store = Store()

    def body() -> Step:
        env = {p: PV(None, p, None) for p in anf.params}
        pv = yield ev.eval(anf.body, env, ll, store)
        return (yield ev.materialize(pv, ll, store))

    result = run(body())
    return Function(anf.params, ll.wrap(result), anf.ret_type, anf.type_params, anf.attrs,
                    span=func.span)


@dataclass(frozen=True)
class PartialEvaluate(ModulePass):
    """Evaluate the statically known parts of every global function (module docstring).

    ``max_depth`` bounds how deep recursive functions are inlined.
    """

    name: ClassVar[str] = "PartialEvaluate"
    opt_level: ClassVar[int] = 1
    max_depth: int = 64

    def __post_init__(self) -> None:
        if isinstance(self.max_depth, bool) or not isinstance(self.max_depth, int) \
                or self.max_depth < 0:
            raise ValueError(f"PartialEvaluate: max_depth must be an integer >= 0, got "
                             f"{self.max_depth!r}")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        typed = infer(mod)
        out = typed.copy()
        recursive = recursive_functions(call_graph(typed))  # once: it reads every function
        for gv, func in typed.functions.items():
            if (isinstance(func, Function) and not is_primitive(func)
                    and not func.get_attr("Compiler")):
                out.add(gv, partial_evaluate(func, typed, self.max_depth, recursive))
        return infer(out)


register_pass("PartialEvaluate", PartialEvaluate)

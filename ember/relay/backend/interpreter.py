"""The reference interpreter: runs any Relay program on numpy, one node at a time.

It is the oracle the compiled executors are tested against, so it favours clarity: a loop
over a stack of work items and an environment dict per function activation (JAX's
``eval_jaxpr``, torch.fx's ``Interpreter.run``), with operators run by their numpy
``reference``. The loop never recurses in Python, so deep Relay recursion is only bounded
by memory, and calls in tail position reuse the caller's slot (a ``while_loop`` runs in
constant space however many times it iterates).

Runtime values: tensors are ``NDArray``; tuples are ``ADT`` with tag 0; values of algebraic
data types are ``ConstructorValue``; references are ``RefValue``; functions are ``Closure``
(callable from Python), or an ``Op`` / ``Constructor`` used as a value.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ...ir.adt import Constructor, Match
from ...ir.expr import (Call, Constant, Function, GlobalVar, If, Let, RefCreate, RefRead,
                        RefWrite, RelayExpr, Tuple, TupleGetItem, Var)
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.visitor import free_vars
from ...runtime.device import Device, cpu
from ...runtime.errors import InternalError, OpNotImplemented, TVMError
from ...runtime.ndarray import NDArray
from ._values import ADT, ConstructorValue, RefValue  # noqa: F401  (public runtime values)
from ._values import (Closure, check_value, describe_value, from_numpy, is_tuple, make_tuple,
                      match_pattern, to_numpy, to_value)
from .registry import register_evaluator

InterpreterClosure = Closure  # TVM's name for the same thing
Frame = dict  # Var -> value bindings and memoised node -> value results of one activation
_MISSING = object()
_MAX_TRACE = 8


def _brief(node: Any, within: Function | None) -> str:
    """One line for error context: ``%4 = nn.dense(%3, %w)``, numbered as in ``within``."""
    try:
        from ...ir.printer import short_text

        return short_text(node, within)
    except Exception:  # the printer is optional here: fall back to a sketch of the node
        if isinstance(node, Call):
            op = node.op
            name = getattr(op, "name", None) or getattr(op, "name_hint", type(op).__name__)
            prefix = "@" if isinstance(op, GlobalVar) else "%" if isinstance(op, Var) else ""
            return f"{prefix}{name}(...)"
        return type(node).__name__.lower()


def _span_text(node: RelayExpr) -> str:
    return f" at {node.span}" if getattr(node, "span", None) is not None else ""


class _Machine:
    """One evaluation: a stack of work items ``(step, node, frame)`` and a stack of values.

    ``eval`` pushes the steps of a node; a ``finish_*`` step pops the values of the node's
    children and pushes the node's value. ``leave`` marks the end of a function activation.
    """

    def __init__(self, evaluator: "Evaluator") -> None:
        self.ev = evaluator
        self.todo: list[tuple[Callable[..., None], Any, Any]] = []
        self.vals: list[Any] = []

    def call(self, fn: Any, args: Sequence[Any]) -> Any:
        self.apply(fn, list(args), None, None)
        return self.run()

    def eval_expr(self, expr: RelayExpr, frame: Frame) -> Any:
        self.todo.append((_Machine.eval, expr, frame))
        return self.run()

    def run(self) -> Any:
        todo, node = self.todo, None
        try:
            while todo:
                step, node, frame = todo.pop()
                step(self, node, frame)
        except Exception as err:
            raise self._with_context(err, node) from err
        return self.vals.pop()

    def _with_context(self, err: Exception, node: Any) -> Exception:
        """Re-raise ``err`` with the node being executed and the active functions."""
        if getattr(err, "_ember_context", False) or isinstance(err, InternalError):
            return err
        lines = [str(err) if isinstance(err, TVMError) else f"{type(err).__name__}: {err}"]
        frames = [clo for step, clo, _ in reversed(self.todo) if step is _Machine.leave]
        if isinstance(node, RelayExpr) and not isinstance(node, (Var, Function)):
            lines.append(f"  while executing {_brief(node, frames[0].func if frames else None)}")
        lines += [f"  in {clo.describe()}" for clo in frames[:_MAX_TRACE]]
        if len(frames) > _MAX_TRACE:
            lines.append(f"  ... and {len(frames) - _MAX_TRACE} more enclosing calls")
        cls = type(err) if isinstance(err, TVMError) else TVMError
        try:
            new = cls("\n".join(lines))
        except Exception:  # an exception class with a different constructor
            new = TVMError("\n".join(lines))
        new._ember_context = True  # type: ignore[attr-defined]
        return new

    # -- helpers ------------------------------------------------------------------------------
    def push_evals(self, exprs: Sequence[RelayExpr], frame: Frame) -> None:
        for e in reversed(exprs):  # pushed in reverse so the first one runs first
            self.todo.append((_Machine.eval, e, frame))

    def take(self, n: int) -> list[Any]:
        if n == 0:
            return []
        out = self.vals[-n:]
        del self.vals[-n:]
        return out

    def produce(self, node: RelayExpr | None, frame: Frame | None, value: Any) -> None:
        """Push a node's value and memoise it in its frame (a shared node runs once)."""
        if node is not None and frame is not None:
            frame[node] = value
        self.vals.append(value)

    # -- eval: one entry per node class -------------------------------------------------------
    def eval(self, node: RelayExpr, frame: Frame) -> None:
        value = frame.get(node, _MISSING)
        if value is not _MISSING:
            self.vals.append(value)
            return
        handler = _EVAL.get(type(node))
        if handler is None:
            raise TVMError(f"interpreter: cannot evaluate a {type(node).__name__}")
        handler(self, node, frame)

    def eval_Var(self, node: Var, frame: Frame) -> None:
        raise TVMError(f"unbound variable %{node.name_hint}: it is free in the program and no "
                       "value was given for it")

    def eval_Constant(self, node: Constant, frame: Frame) -> None:
        self.vals.append(node.data)

    def eval_itself(self, node: RelayExpr, frame: Frame) -> None:
        self.vals.append(node)  # Op and Constructor are function values

    def eval_GlobalVar(self, node: GlobalVar, frame: Frame) -> None:
        self.vals.append(self.ev.global_closure(node))

    def eval_Function(self, node: Function, frame: Frame) -> None:
        self.produce(node, frame, self.ev.make_closure(node, frame))

    def eval_Tuple(self, node: Tuple, frame: Frame) -> None:
        self.todo.append((_Machine.finish_tuple, node, frame))
        self.push_evals(node.fields, frame)

    def finish_tuple(self, node: Tuple, frame: Frame) -> None:
        self.produce(node, frame, make_tuple(self.take(len(node.fields))))

    def eval_Call(self, node: Call, frame: Frame) -> None:
        self.todo.append((_Machine.finish_call, node, frame))
        self.push_evals(node.args, frame)
        if not isinstance(node.op, (Op, Constructor)):
            self.todo.append((_Machine.eval, node.op, frame))

    def finish_call(self, node: Call, frame: Frame) -> None:
        args = self.take(len(node.args))
        fn = node.op if isinstance(node.op, (Op, Constructor)) else self.vals.pop()
        self.apply(fn, args, node, frame)

    def apply(self, fn: Any, args: list[Any], node: Call | None, frame: Frame | None) -> None:
        if isinstance(fn, Closure):
            self.enter(fn, args, node, frame)
        elif isinstance(fn, Op):
            self.produce(node, frame, self.ev.call_op(fn, args, node))
        elif isinstance(fn, Constructor):
            if len(args) != len(fn.inputs):
                raise TVMError(f"constructor {fn.name_hint}: expected {len(fn.inputs)} "
                               f"argument(s), got {len(args)}")
            self.produce(node, frame, ConstructorValue(fn.tag, args, fn))
        else:
            raise TVMError(f"cannot call {describe_value(fn)}: it is not a function")

    def enter(self, clo: Closure, args: list[Any], node: Call | None, frame: Frame | None) -> None:
        new_frame = clo.bind_args(args)
        if self.todo and self.todo[-1][0] is _Machine.leave:
            self.todo.pop()  # a tail call: the caller has nothing left to do, reuse its slot
        elif node is not None:
            self.todo.append((_Machine.finish_store, node, frame))
        self.todo.append((_Machine.leave, clo, None))
        self.todo.append((_Machine.eval, clo.func.body, new_frame))

    def finish_store(self, node: RelayExpr, frame: Frame) -> None:
        frame[node] = self.vals[-1]

    def leave(self, clo: Closure, frame: None) -> None:
        pass  # the callee's result is already on the value stack

    def eval_Let(self, node: Let, frame: Frame) -> None:
        if isinstance(node.value, Function):
            # A let-bound function may call itself: its closure sees its own binding.
            frame[node.var] = self.ev.make_closure(node.value, frame, rec_var=node.var)
            self.todo.append((_Machine.eval, node.body, frame))
            return
        self.todo.append((_Machine.finish_let, node, frame))
        self.todo.append((_Machine.eval, node.value, frame))

    def finish_let(self, node: Let, frame: Frame) -> None:
        frame[node.var] = self.vals.pop()
        self.todo.append((_Machine.eval, node.body, frame))

    def eval_If(self, node: If, frame: Frame) -> None:
        self.todo.append((_Machine.finish_if, node, frame))
        self.todo.append((_Machine.eval, node.cond, frame))

    def finish_if(self, node: If, frame: Frame) -> None:
        cond = self.vals.pop()
        if not isinstance(cond, NDArray) or cond.shape != ():
            raise TVMError("if: the condition must be a 0-d boolean tensor, got "
                           f"{describe_value(cond)}{_span_text(node)}")
        branch = node.true_branch if bool(np.asarray(cond)) else node.false_branch
        self.todo.append((_Machine.eval, branch, frame))

    def eval_Match(self, node: Match, frame: Frame) -> None:
        self.todo.append((_Machine.finish_match, node, frame))
        self.todo.append((_Machine.eval, node.data, frame))

    def finish_match(self, node: Match, frame: Frame) -> None:
        value = self.vals.pop()
        for clause in node.clauses:
            binds: dict[Var, Any] = {}
            if match_pattern(clause.lhs, value, binds):
                frame.update(binds)
                self.todo.append((_Machine.eval, clause.rhs, frame))
                return
        raise TVMError(f"match failed: no clause matches {describe_value(value)}"
                       f"{_span_text(node)}")

    def eval_TupleGetItem(self, node: TupleGetItem, frame: Frame) -> None:
        self.todo.append((_Machine.finish_getitem, node, frame))
        self.todo.append((_Machine.eval, node.tuple_value, frame))

    def finish_getitem(self, node: TupleGetItem, frame: Frame) -> None:
        tup, i = self.vals.pop(), node.index
        if not is_tuple(tup):
            raise TVMError(f"tuple field .{i}: the value is {describe_value(tup)}, not a tuple")
        if not 0 <= i < len(tup):
            raise TVMError(f"tuple field .{i}: out of range for a tuple of {len(tup)} fields")
        self.produce(node, frame, tup[i])

    def eval_RefCreate(self, node: RefCreate, frame: Frame) -> None:
        self.todo.append((_Machine.finish_ref_create, node, frame))
        self.todo.append((_Machine.eval, node.value, frame))

    def finish_ref_create(self, node: RefCreate, frame: Frame) -> None:
        self.produce(node, frame, RefValue(self.vals.pop()))

    def eval_RefRead(self, node: RefRead, frame: Frame) -> None:
        self.todo.append((_Machine.finish_ref_read, node, frame))
        self.todo.append((_Machine.eval, node.ref, frame))

    def finish_ref_read(self, node: RefRead, frame: Frame) -> None:
        # Not memoised: a shared read may see a later write.
        self.vals.append(_as_ref(self.vals.pop(), "ref read").value)

    def eval_RefWrite(self, node: RefWrite, frame: Frame) -> None:
        self.todo.append((_Machine.finish_ref_write, node, frame))
        self.push_evals((node.ref, node.value), frame)

    def finish_ref_write(self, node: RefWrite, frame: Frame) -> None:
        ref, value = self.take(2)
        _as_ref(ref, "ref write").value = value
        self.vals.append(make_tuple([]))


def _as_ref(value: Any, what: str) -> RefValue:
    if not isinstance(value, RefValue):
        raise TVMError(f"{what}: the value is {describe_value(value)}, not a reference")
    return value


_EVAL: dict[type, Callable[..., None]] = {
    Var: _Machine.eval_Var, Constant: _Machine.eval_Constant, GlobalVar: _Machine.eval_GlobalVar,
    Op: _Machine.eval_itself, Constructor: _Machine.eval_itself,
    Function: _Machine.eval_Function, Tuple: _Machine.eval_Tuple, Call: _Machine.eval_Call,
    Let: _Machine.eval_Let, If: _Machine.eval_If, Match: _Machine.eval_Match,
    TupleGetItem: _Machine.eval_TupleGetItem, RefCreate: _Machine.eval_RefCreate,
    RefRead: _Machine.eval_RefRead, RefWrite: _Machine.eval_RefWrite,
}


class Evaluator:
    """Runs the expressions and functions of one IRModule (best type-checked first)."""

    def __init__(self, mod: IRModule) -> None:
        self.mod = mod
        self._globals: dict[GlobalVar, Closure] = {}
        self._free_vars: dict[Function, list[Var]] = {}

    def global_closure(self, gv: GlobalVar) -> Closure:
        clo = self._globals.get(gv)
        if clo is None:
            func = self.mod.functions.get(gv)
            if func is None:  # a GlobalVar of another module copy: look it up by name
                if gv.name_hint not in self.mod:
                    raise TVMError(f"call to unknown global function @{gv.name_hint}")
                func = self.mod[gv.name_hint]
            clo = self._globals[gv] = Closure(func, {}, self, name=f"@{gv.name_hint}")
        return clo

    def make_closure(self, func: Function, frame: Frame, rec_var: Var | None = None) -> Closure:
        fvs = self._free_vars.get(func)
        if fvs is None:
            fvs = self._free_vars[func] = free_vars(func)
        env: dict[Var, Any] = {}
        for v in fvs:
            if v is rec_var:
                continue
            value = frame.get(v, _MISSING)
            if value is _MISSING:
                raise TVMError(f"unbound variable %{v.name_hint} captured by a closure")
            env[v] = value
        clo = Closure(func, env, self, name=f"%{rec_var.name_hint}" if rec_var else None)
        if rec_var is not None:
            env[rec_var] = clo
        return clo

    def call_op(self, op: Op, args: list[Any], node: Call | None) -> Any:
        """Run ``op`` on tensor values through its numpy reference."""
        ref = op.op_def.reference
        if ref is None:
            raise OpNotImplemented(f"{op.name}: has no numpy reference, so the interpreter "
                                   "cannot run it")
        np_args = [to_numpy(a, op.name, i) for i, a in enumerate(args)]
        out = ref(*np_args, attrs=None if node is None else node.attrs)
        return from_numpy(out, None if node is None else node.checked_type_, op.name)

    def call(self, fn: Any, args: Sequence[Any]) -> Any:
        """Apply a function value to runtime values."""
        return _Machine(self).call(fn, args)

    def eval(self, expr: RelayExpr, env: Mapping[Var, Any] | None = None) -> Any:
        """The value of ``expr`` with its free variables taken from ``env``."""
        return _Machine(self).eval_expr(expr, dict(env or {}))


# -- executors --------------------------------------------------------------------------------
def _infer_type(mod: IRModule) -> IRModule:
    try:
        from ..transform import InferType
    except ImportError:  # type inference not built yet: run the program unchecked
        return mod
    return InferType()(mod)


def _fresh_name(mod: IRModule, base: str) -> str:
    name, i = base, 0
    while name in mod:
        i += 1
        name = f"{base}{i}"
    return name


def _bound_tensor(v: Var, value: Any) -> NDArray:
    where = f"evaluate: binds[%{v.name_hint}]"
    tensor = to_value(value, v.type_annotation, where)
    if not isinstance(tensor, NDArray):
        raise TVMError(f"{where}: only tensors can be bound, got {describe_value(tensor)}")
    check_value(tensor, v.type_annotation, where, {})
    return tensor


class Executor(ABC):
    """What ``relay.create_executor`` returns: ``evaluate(expr=None, binds=None)``.

    ``evaluate()`` gives a callable running ``mod["main"]``; ``evaluate(func_or_global)`` a
    callable for that function; ``evaluate(expr)`` the value of an expression right away.
    ``binds`` maps free Vars of ``expr`` to tensor values.
    """

    def __init__(self, mod: IRModule, device: Device | None = None, target: Any = "llvm") -> None:
        self.mod = mod
        self.device = cpu(0) if device is None else device
        self.target = target

    @abstractmethod
    def _make_executor(self, expr: Function | GlobalVar | None = None) -> Callable[..., Any]:
        """A Python callable running ``expr`` (``mod["main"]`` when None)."""

    def evaluate(self, expr: RelayExpr | None = None,
                 binds: Mapping[Var, Any] | None = None) -> Any:
        if binds:
            if expr is None:
                raise TVMError("evaluate: binds= needs an expression to bind into")
            for v, value in reversed(list(binds.items())):
                expr = Let(v, Constant(_bound_tensor(v, value)), expr)
        if expr is None or isinstance(expr, GlobalVar):
            return self._make_executor(expr)
        fvs = free_vars(expr)
        if fvs:
            names = ", ".join(f"%{v.name_hint}" for v in fvs)
            raise TVMError(f"evaluate: the expression has free variables {names}; give their "
                           "values with binds={var: value} or make them function parameters")
        if isinstance(expr, Function):
            return self._make_executor(expr)
        return self._make_executor(Function([], expr))()


class Interpreter(Executor):
    """The ``"debug"`` executor: type-checks the module, then runs it on the interpreter."""

    def _make_executor(self, expr: Function | GlobalVar | None = None) -> Closure:
        mod = self.mod
        if expr is None or isinstance(expr, GlobalVar):
            name = "main" if expr is None else expr.name_hint
            if name not in {g.name_hint for g in mod.functions}:
                raise TVMError(f"evaluate: the module has no function @{name}; pass the "
                               "expression to evaluate(expr)")
        else:
            mod = mod.copy()
            name = _fresh_name(mod, "main")
            mod.add(name, expr)
        mod = _infer_type(mod)
        return Evaluator(mod).global_closure(mod.get_global_var(name))


register_evaluator("debug", Interpreter)

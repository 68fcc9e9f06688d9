"""AnnotateTarget: mark which compiler each operator call goes to, with begin/end annotations.

For every call in a function (``main`` and the other global functions that are neither
fused nor already partitioned) the first target of ``targets`` that takes it wins; ``default``
(ember's own compiler) takes the rest. A target takes an op call when the op's attribute
``target.<name>`` (``tvm.ir.register_op_attr``) says so (a function of the call, the older
``(attrs, args)`` form, or a bool),
and a call of a composite function (``Composite="<name>.<pattern>"``, from MergeComposite) when
``<name>`` is one of ``targets``.

Each argument of an annotated call is wrapped as it enters the call's region
(``compiler_begin(arg, target)``), and a computed argument is first closed in its own region
(``compiler_end(value, its target)``); every use gets annotations of its own, as in TVM, so
that MergeCompilerRegions can join or keep apart each edge. With ``include_non_call_ops``
(the default), tuples and tuple projections join the region of their fields when those all
agree (``default`` otherwise); without it, they stay between regions. A function's result is
closed in its region. Lets, ifs, matches and the insides of nested functions are left outside
every region (the values they read are closed first).

Relay-era call: ``relay.transform.AnnotateTarget(["ccompiler"])``; run InferType first (the
support checks may read argument types; the pass types the module it is given).
"""
from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ...ir.expr import Call, Function, GlobalVar, RelayExpr, Tuple, TupleGetItem
from ...ir.module import IRModule
from ...ir.op import OP_REGISTRY, Op
from ...ir.printer import short_text
from ...ir.transform import ModulePass, PassContext
from ...ir.visitor import ExprMutator, is_primitive, post_order, walk_children
from ...runtime.errors import TVMError
from ...runtime.registry import get_global_func
from ..op.annotation import compiler_begin, compiler_end
from ..op.contrib.register import has_pattern_table
from ._regions import DEFAULT, annotation_kind
from .type_infer import InferType

__all__ = ["AnnotateTarget"]


def _check_targets(targets: Any) -> tuple[str, ...]:
    names = [targets] if isinstance(targets, str) else targets
    if not isinstance(names, Sequence) or not names or not all(
            isinstance(t, str) for t in names):
        raise TypeError(f"AnnotateTarget: targets must be a compiler name or a non-empty list "
                        f"of names, got {targets!r}")
    dups = sorted({t for t in names if names.count(t) > 1})
    if dups:
        raise ValueError(f"AnnotateTarget: target {dups[0]!r} is listed twice in {list(names)}")
    for t in names:
        if t == DEFAULT or not t.isidentifier():
            raise ValueError(f"AnnotateTarget: {t!r} is not a usable target name ('default' "
                             "is ember's own compiler; names are identifiers)")
        if not _known_target(t):
            raise ValueError(
                f"AnnotateTarget: unknown target {t!r}: no operator has the attribute "
                f"'target.{t}' (tvm.ir.register_op_attr(op, 'target.{t}')), no pattern table "
                f"is registered for it and there is no codegen 'relay.ext.{t}'")
    return tuple(names)


def _known_target(name: str) -> bool:
    key = f"target.{name}"
    return (any(key in d.extra for d in OP_REGISTRY.values()) or has_pattern_table(name)
            or get_global_func(f"relay.ext.{name}", allow_missing=True) is not None)


def _composite_target(func: Function) -> str | None:
    name = func.get_attr("Composite")
    return str(name).split(".", 1)[0] if name is not None and "." in str(name) else None


class _Annotator(ExprMutator):
    """Rebuild a function body with annotations; ``target`` records each new node's target."""

    def __init__(self, targets: tuple[str, ...], include_non_call_ops: bool) -> None:
        super().__init__()
        self.targets, self.include_non_call_ops = targets, include_non_call_ops
        self.target: dict[RelayExpr, str] = {}

    def skip(self, expr: RelayExpr) -> bool:
        return isinstance(expr, Function)  # composite, fused or local functions: opaque

    def target_of_call(self, call: Call) -> str:
        if isinstance(call.op, Op):
            for t in self.targets:
                if _supports(call, t):
                    return t
        elif isinstance(call.op, Function) and _composite_target(call.op) in self.targets:
            return str(_composite_target(call.op))
        return DEFAULT

    def enter(self, arg: RelayExpr, target: str) -> RelayExpr:
        """``arg`` (visited) as read by a node of ``target``'s region."""
        own = self.target.get(arg)
        if own is not None and not (isinstance(arg, Call) and not arg.args):
            arg = compiler_end(arg, own)  # a computed value leaves its region first
        return compiler_begin(arg, target)

    def leave(self, value: RelayExpr) -> RelayExpr:
        """``value`` (visited) as read outside every region."""
        own = self.target.get(value)
        return value if own is None else compiler_end(value, own)

    def visit_call(self, e: Call) -> RelayExpr:
        if annotation_kind(e) is not None:
            raise TVMError(f"AnnotateTarget: the function is already annotated "
                           f"({short_text(e)}); run the pass on an unannotated module")
        target = self.target_of_call(e)
        args = [self.enter(self.visit(a), target) for a in e.args]
        new = Call(self.visit(e.op), tuple(args), e.attrs, e.type_args, span=e.span)
        self.target[new] = target
        return new

    def _joined(self, e: RelayExpr, fields: list[RelayExpr], make: Any) -> RelayExpr:
        if not self.include_non_call_ops or not fields:
            return self._outside(e)
        visited = [self.visit(f) for f in fields]
        found = {self.target.get(f, DEFAULT) for f in visited}
        target = found.pop() if len(found) == 1 else DEFAULT
        new = make([self.enter(f, target) for f in visited])
        self.target[new] = target
        return new

    def visit_tuple(self, e: Tuple) -> RelayExpr:
        return self._joined(e, list(e.fields), lambda f: Tuple(tuple(f), span=e.span))

    def visit_tuple_getitem(self, e: TupleGetItem) -> RelayExpr:
        return self._joined(e, [e.tuple_value],
                            lambda f: TupleGetItem(f[0], e.index, span=e.span))

    def _outside(self, e: RelayExpr) -> RelayExpr:
        return self.rebuild(e, [self.leave(self.visit(c)) for c in walk_children(e)])

    visit_let = visit_if = visit_match = visit_ref_create = _outside
    visit_ref_read = visit_ref_write = _outside


def _supports(call: Call, target: str) -> bool:
    check = call.op.get_attr(f"target.{target}")
    if check is None or isinstance(check, bool):
        return bool(check)
    if not callable(check):
        raise TypeError(f"AnnotateTarget: attribute 'target.{target}' of {call.op.name} must "
                        f"be a bool or a function of the call, got {type(check).__name__}")
    try:
        if _takes_two(check):  # the older signature, check(attrs, args)
            return bool(check(call.attrs, list(call.args)))
        return bool(check(call))
    except Exception as err:
        raise TVMError(f"AnnotateTarget: the 'target.{target}' check of {call.op.name} failed "
                       f"on {short_text(call)}: {type(err).__name__}: {err}") from err


def with_body(func: Function, body: RelayExpr) -> Function:
    """``func`` on a new body (untyped: the BYOC passes type the module they return)."""
    return Function(func.params, body, func.ret_type, func.type_params, func.attrs,
                    span=func.span)


def _takes_two(check: Any) -> bool:
    try:
        params = inspect.signature(check).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) == 2 and all(p.default is p.empty for p in positional)


def annotate_function(func: Function, targets: tuple[str, ...],
                      include_non_call_ops: bool = True) -> Function:
    """``func`` with its calls annotated for ``targets`` (see the module docstring)."""
    annotator = _Annotator(targets, include_non_call_ops)
    return with_body(func, annotator.leave(annotator.visit(func.body)))


def annotatable(func: Any) -> bool:
    """A global function the BYOC passes work on: not fused, not already offloaded."""
    return (isinstance(func, Function) and not is_primitive(func)
            and func.get_attr("Compiler") is None)


@dataclass(frozen=True)
class AnnotateTarget(ModulePass):
    """Annotate each call with the first of ``targets`` that supports it (see the module)."""

    name: ClassVar[str] = "AnnotateTarget"
    opt_level: ClassVar[int] = 0
    targets: Any = ()
    include_non_call_ops: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", _check_targets(self.targets))

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        mod = InferType()(mod)
        out = mod.copy()
        for gv, func in mod.functions.items():
            if annotatable(func):
                out.add(gv, annotate_function(func, self.targets, self.include_non_call_ops))
        return InferType()(out)


def has_annotations(func: Function) -> bool:
    """Whether ``func``'s body holds compiler_begin/end annotations (outside nested
    functions)."""
    return any(annotation_kind(n) is not None
               for n in post_order(func.body, skip=lambda n: isinstance(n, Function)))


def annotated_functions(mod: IRModule) -> list[tuple[GlobalVar, Function]]:
    """The global functions of ``mod`` that MergeCompilerRegions and PartitionGraph work on:
    annotatable ones holding annotations."""
    return [(gv, f) for gv, f in mod.functions.items() if annotatable(f) and has_annotations(f)]


"""Matching a pattern against an expression.

``Matcher(root)`` matches patterns against ``root`` and the expressions inside it. A match
records, per pattern, the expressions it matched (``memo``), so that a pattern used twice
matches the same expression both times, and so that ``partition`` and ``rewrite`` can find
what each sub-pattern matched; a failed alternative rolls its records back.

The matcher recurses over the *pattern* (as deep as the pattern is, a few levels), never
over the program: the dominator checks walk the expression graph from explicit stacks.
Types needed by ``has_type``/``has_dtype``/``has_shape`` come from the expression when it
has them, else from one type inference of ``root``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir.expr import Call, Constant, Function, If, Let, RelayExpr, Tuple, TupleGetItem, Var
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.structural import structural_equal
from ...ir.types import Any as AnyDim
from ...ir.types import TensorType, Type
from ...ir.visitor import children
from . import pattern as P
from .graph import ExprGraph

_COMMUTATIVE = ("add", "multiply")
# The matcher recurses over the pattern, a handful of Python frames per level: a pattern
# nested deeper than this (built in a loop) is refused before it exhausts the stack.
MAX_PATTERN_DEPTH = 100


class Matcher:
    """Matches patterns against ``root`` and its sub-expressions (``mod`` types globals)."""

    def __init__(self, root: RelayExpr, mod: IRModule | None = None) -> None:
        self.root, self.mod = root, mod
        self.memo: dict[P.DFPattern, list[RelayExpr]] = {}
        self._matched: list[P.DFPattern] = []
        self._memoize = True
        self._graph: ExprGraph | None = None
        self._types: dict[int, Type] | None = None
        self._checked: P.DFPattern | None = None  # the last pattern ``match`` found shallow

    @property
    def graph(self) -> ExprGraph:
        if self._graph is None:
            self._graph = ExprGraph(self.root)
        return self._graph

    def match(self, pattern: P.DFPattern, expr: RelayExpr) -> bool:
        """Whether ``expr`` matches ``pattern``; afterwards ``memo`` says what matched what."""
        if pattern is not self._checked:  # partition/rewrite match one pattern many times
            _check_depth(pattern)
            self._checked = pattern
        self.memo, self._matched, self._memoize = {}, [], True
        return self.visit(pattern, expr)

    # -- the memo ---------------------------------------------------------------------------
    def visit(self, pattern: P.DFPattern, expr: RelayExpr) -> bool:
        if self._memoize and pattern in self.memo:
            return expr is self.memo[pattern][0]
        mark = len(self._matched)
        if self._dispatch(pattern, expr):
            self.memo.setdefault(pattern, []).append(expr)
            self._matched.append(pattern)
            return True
        self._rollback(mark)
        return False

    def _rollback(self, mark: int) -> None:
        while len(self._matched) > mark:
            pattern = self._matched.pop()
            self.memo[pattern].pop()
            if not self.memo[pattern]:
                del self.memo[pattern]

    def _visit_unmemoized(self, pattern: P.DFPattern, expr: RelayExpr) -> bool:
        # A dominator's path matches many expressions: each is recorded, none binds.
        self._memoize = False
        try:
            return self.visit(pattern, expr)
        finally:
            self._memoize = True

    def _dispatch(self, pattern: P.DFPattern, expr: RelayExpr) -> bool:
        for klass in type(pattern).__mro__:
            rule = _RULES.get(klass)
            if rule is not None:
                return rule(self, pattern, expr)
        raise TypeError(f"dataflow_pattern: cannot match a {type(pattern).__name__}")

    # -- leaves -----------------------------------------------------------------------------
    def _expr(self, p: P.ExprPattern, expr: RelayExpr) -> bool:
        return expr is p.expr or (not isinstance(p.expr, Op) and structural_equal(p.expr, expr))

    def _var(self, p: P.VarPattern, expr: RelayExpr) -> bool:
        return isinstance(expr, Var) and (not p.name or p.name == expr.name_hint)

    def _constant(self, p: P.ConstantPattern, expr: RelayExpr) -> bool:
        return isinstance(expr, Constant)

    def _wildcard(self, p: P.WildcardPattern, expr: RelayExpr) -> bool:
        return True

    # -- structure --------------------------------------------------------------------------
    def _all(self, patterns: tuple[P.DFPattern, ...] | None, exprs: tuple[Any, ...]) -> bool:
        """Each pattern matches its expression (None: anything); on failure the records made
        here are rolled back."""
        if patterns is None:
            return True
        mark = len(self._matched)
        if len(patterns) == len(exprs) and all(self.visit(p, e) for p, e in zip(patterns, exprs)):
            return True
        self._rollback(mark)
        return False

    def _call(self, p: P.CallPattern, expr: RelayExpr) -> bool:
        if not isinstance(expr, Call):
            return False
        mark = len(self._matched)
        if self.visit(p.op, expr.op):
            if self._all(p.args, expr.args):
                return True
            if _op_name(p) in _COMMUTATIVE and p.args is not None and len(p.args) == 2:
                return self._all((p.args[1], p.args[0]), expr.args)
            return False
        self._rollback(mark)
        return self._reassociate(p, expr)

    def _reassociate(self, p: P.CallPattern, expr: Call) -> bool:
        """``(a * b) / c`` also matches ``(a / c) * b`` and ``a * (b / c)``, and the other
        way round, as in the Relay-era matcher."""
        args = p.args or ()
        if len(args) != 2:
            return False
        if _op_name(p) == "divide" and _binary(args[0], "multiply") \
                and _is_op(expr, "multiply") and any(_is_op(a, "divide") for a in expr.args):
            mul_args = args[0].args  # type: ignore[union-attr]
            for k in range(2):
                div = P.CallPattern(p.op, [mul_args[k], args[1]])
                if self.visit(P.CallPattern(args[0].op, [mul_args[1 - k], div]),  # type: ignore
                              expr):
                    return True
            return False
        if _op_name(p) == "multiply" and _is_op(expr, "divide") \
                and any(_is_op(a, "multiply") for a in expr.args):
            for k in range(2):
                if _binary(args[k], "divide"):
                    div_args = args[k].args  # type: ignore[union-attr]
                    mul = P.CallPattern(p.op, [div_args[0], args[1 - k]])
                    return self.visit(P.CallPattern(args[k].op,  # type: ignore[union-attr]
                                                    [mul, div_args[1]]), expr)
        return False

    def _function(self, p: P.FunctionPattern, expr: RelayExpr) -> bool:
        return isinstance(expr, Function) and self._all(p.params, expr.params) \
            and self.visit(p.body, expr.body)

    def _tuple(self, p: P.TuplePattern, expr: RelayExpr) -> bool:
        return isinstance(expr, Tuple) and self._all(p.fields, expr.fields)

    def _tuple_get_item(self, p: P.TupleGetItemPattern, expr: RelayExpr) -> bool:
        return isinstance(expr, TupleGetItem) and p.index in (-1, expr.index) \
            and self.visit(p.tuple_value, expr.tuple_value)

    def _if(self, p: P.IfPattern, expr: RelayExpr) -> bool:
        return isinstance(expr, If) and self._all((p.cond, p.true_branch, p.false_branch),
                                                  (expr.cond, expr.true_branch, expr.false_branch))

    def _let(self, p: P.LetPattern, expr: RelayExpr) -> bool:
        return isinstance(expr, Let) and self._all((p.var, p.value, p.body),
                                                   (expr.var, expr.value, expr.body))

    def _alt(self, p: P.AltPattern, expr: RelayExpr) -> bool:
        return self.visit(p.left, expr) or self.visit(p.right, expr)

    # -- properties -------------------------------------------------------------------------
    def _attr(self, p: P.AttrPattern, expr: RelayExpr) -> bool:
        if not self.visit(p.pattern, expr):
            return False
        if isinstance(expr, Op):
            have: Callable[[str], Any] = expr.get_attr
        elif isinstance(expr, Call):
            names = set(expr.attrs.keys()) if expr.attrs is not None else set()
            have = lambda k: expr.attrs[k] if k in names else None  # type: ignore[index]
        elif isinstance(expr, Function):
            have = lambda k: expr.get_attr(k)
        else:
            return False
        return all(_same_value(want, have(key)) for key, want in p.attrs.items())

    def _type(self, p: P.TypePattern, expr: RelayExpr) -> bool:
        return self.visit(p.pattern, expr) and structural_equal(self.type_of(expr), p.type)

    def _dtype(self, p: P.DataTypePattern, expr: RelayExpr) -> bool:
        if not self.visit(p.pattern, expr):
            return False
        ty = self.type_of(expr)
        return isinstance(ty, TensorType) and str(ty.dtype) == p.dtype

    def _shape(self, p: P.ShapePattern, expr: RelayExpr) -> bool:
        if not self.visit(p.pattern, expr):
            return False
        ty = self.type_of(expr)
        return isinstance(ty, TensorType) and len(ty.shape) == len(p.shape) and \
            all(_same_dim(want, have) for want, have in zip(p.shape, ty.shape))

    def type_of(self, expr: RelayExpr) -> Type:
        """``expr``'s type: its own, else from one inference of the whole ``root``."""
        if expr.checked_type_ is not None:
            return expr.checked_type_
        if self._types is None:
            self._types = _infer_types(self.root, self.mod)
        ty = self._types.get(id(expr))
        if ty is None:  # not inside root: infer it alone
            from ..transform.type_infer import InferTypeLocal

            ty = InferTypeLocal(expr, self.mod)
        return ty

    # -- domination -------------------------------------------------------------------------
    def _dominator(self, p: P.DominatorPattern, expr: RelayExpr) -> bool:
        if expr not in self.graph or not self.visit(p.child, expr):
            return False
        return self._matches_path(p, expr) and self._dominates_parent(p, expr)

    def _matches_path(self, p: P.DominatorPattern, expr: RelayExpr) -> bool:
        """Going from ``expr`` towards its inputs, every node matches ``path`` until one
        matches ``parent`` (one and the same parent on every branch)."""
        stack, seen = [expr], {id(expr)}
        while stack:
            node = stack.pop()
            for arg in children(node):
                if id(arg) in seen or (isinstance(node, Call) and arg is node.op):
                    continue
                seen.add(id(arg))
                if self.visit(p.parent, arg):
                    continue
                if not self._visit_unmemoized(p.path, arg):
                    return False
                stack.append(arg)
        return True

    def _dominates_parent(self, p: P.DominatorPattern, expr: RelayExpr) -> bool:
        """Some node that ``expr`` dominates matches ``parent``."""
        stack, seen = [expr], {id(expr)}
        while stack:
            for node in self.graph.dominated_by(stack.pop()):
                if id(node) in seen:
                    continue
                seen.add(id(node))
                if self.visit(p.parent, node):
                    return True
                stack.append(node)
        return False


_RULES: dict[type, Callable[[Matcher, Any, RelayExpr], bool]] = {
    P.ExprPattern: Matcher._expr, P.VarPattern: Matcher._var,
    P.ConstantPattern: Matcher._constant, P.WildcardPattern: Matcher._wildcard,
    P.CallPattern: Matcher._call, P.FunctionPattern: Matcher._function,
    P.TuplePattern: Matcher._tuple, P.TupleGetItemPattern: Matcher._tuple_get_item,
    P.IfPattern: Matcher._if, P.LetPattern: Matcher._let, P.AltPattern: Matcher._alt,
    P.AttrPattern: Matcher._attr, P.TypePattern: Matcher._type,
    P.DataTypePattern: Matcher._dtype, P.ShapePattern: Matcher._shape,
    P.DominatorPattern: Matcher._dominator,
}


def _check_depth(pattern: P.DFPattern) -> None:
    depth: dict[int, int] = {}
    for p in P.post_order(pattern):
        depth[id(p)] = 1 + max((depth[id(q)] for q in P.inputs(p)), default=0)
        if depth[id(p)] > MAX_PATTERN_DEPTH:
            raise ValueError(f"dataflow_pattern: the pattern is nested {depth[id(p)]} deep "
                             f"or more (the matcher allows {MAX_PATTERN_DEPTH}): build a "
                             "long chain as several shorter patterns")


def _op_name(p: P.CallPattern) -> str | None:
    op = p.op
    return op.expr.name if isinstance(op, P.ExprPattern) and isinstance(op.expr, Op) else None


def _binary(p: P.DFPattern, name: str) -> bool:
    """``p`` is a call pattern of op ``name`` with two argument patterns."""
    return isinstance(p, P.CallPattern) and _op_name(p) == name and p.args is not None \
        and len(p.args) == 2


def _is_op(expr: Any, name: str) -> bool:
    return isinstance(expr, Call) and isinstance(expr.op, Op) and expr.op.name == name


def _same_dim(want: Any, have: Any) -> bool:
    if isinstance(want, AnyDim) or isinstance(have, AnyDim):
        return isinstance(want, AnyDim) and isinstance(have, AnyDim)
    return bool(want == have) if isinstance(want, (int, np.integer)) else \
        structural_equal(want, have)


def _same_value(want: Any, have: Any) -> bool:
    """An attribute value as a script writes it (a list, an int, a str) against the stored
    one (a tuple, an int, an enum, a DataType)."""
    if have is None:
        return want is None
    if isinstance(have, np.ndarray):
        have = have.tolist()
    if isinstance(want, np.ndarray):
        want = want.tolist()
    if isinstance(want, (list, tuple)) or isinstance(have, (list, tuple)):
        return isinstance(want, (list, tuple)) and isinstance(have, (list, tuple)) and \
            len(want) == len(have) and all(_same_value(w, h) for w, h in zip(want, have))
    if isinstance(want, str) and not isinstance(have, str):
        return str(have) == want
    if isinstance(want, (bool, int, float, str, np.generic)):
        return bool(want == have)
    return structural_equal(want, have)


def _infer_types(root: RelayExpr, mod: IRModule | None) -> dict[int, Type]:
    """The type of every node of ``root`` (by id), from one type inference of ``root``."""
    from ..transform.type_infer import infer_type

    typed = infer_type(root, mod)
    types: dict[int, Type] = {}
    stack = [(root, typed)]
    while stack:
        orig, new = stack.pop()
        if id(orig) in types or new.checked_type_ is None:
            continue
        types[id(orig)] = new.checked_type_
        kids, new_kids = children(orig), children(new)
        if len(kids) == len(new_kids):
            stack.extend(zip(kids, new_kids))
    return types


def match(pattern: P.DFPattern, expr: RelayExpr) -> bool:
    """Whether ``expr`` matches ``pattern``."""
    if not isinstance(pattern, P.DFPattern):
        raise TypeError(f"match: expected a dataflow pattern, got {type(pattern).__name__}")
    if not isinstance(expr, RelayExpr):
        raise TypeError(f"match: expected a relay expression, got {type(expr).__name__}")
    return Matcher(expr).match(pattern, expr)

"""``partition`` and ``rewrite``: act on every match of a pattern in a program.

Both first *group* the matches (``_Grouper``): walking from the program's result towards its
inputs, each node not yet in a group that matches the pattern starts one. A group is the
matched region: the nodes from its root down to the expressions its leaf patterns matched
(wildcards, variables; those become the group's inputs, except the constants that
``is_constant()`` matched, which stay inside). A region that overlaps an earlier group, or
whose inner values are used outside it, is not a group. Functions made by an earlier
``partition`` (attribute ``PartitionedFromPattern``) are left alone.

- ``partition(pattern, expr, attrs, check)`` replaces each group (whose root passes
  ``check``) by a call of a function holding the region, with the attributes
  ``PartitionedFromPattern`` (the ops of the region, ``"nn.conv2d_nn.relu_"``) and ``attrs``;
  its parameters are ``FunctionVar_<group>_<k>``.
- ``rewrite(callbacks, expr)`` calls ``callback.callback(pre, post, node_map)`` at each group
  root and uses what it returns; ``node_map`` maps each sub-pattern to the (rewritten)
  expressions it matched. Callbacks run in turn until the program stops changing (at most
  100 rounds), or once with ``rewrite_once``.

Every walk over the program is iterative.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...ir.adt import Constructor, Match
from ...ir.expr import (Call, Constant, Function, GlobalVar, If, Let, RelayExpr, Tuple,
                        TupleGetItem, Var)
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.structural import structural_equal
from ...ir.visitor import post_order, rebuild, walk_children
from ...runtime.errors import TVMError
from . import pattern as P
from .matcher import Matcher

PARTITIONED_FROM_PATTERN = "PartitionedFromPattern"
_SHAREABLE = (Op, Constant, Var, GlobalVar, Constructor)
MAX_ROUNDS = 100


@dataclass
class _Group:
    root: RelayExpr
    matched: dict[P.DFPattern, list[RelayExpr]]
    args: list[RelayExpr] = field(default_factory=list)
    function: Function | None = None
    name: str = ""


def _region_label(node: RelayExpr) -> str:
    """This node's part of a group's name (the Relay-era spelling)."""
    if isinstance(node, Call):
        return f"{node.op.name}_" if isinstance(node.op, Op) else "Call_"
    if isinstance(node, TupleGetItem):
        return f"TupleGetItem{node.index}_"
    labels = {Tuple: "Tuple_", Function: "Function", Let: "Let_", If: "If_", Match: "Match_"}
    return labels.get(type(node), "")


def _extract(root: RelayExpr, inputs: dict[int, Var]) -> tuple[RelayExpr, str, list[RelayExpr]]:
    """The region below ``root`` with its inputs replaced by variables: (body, name, the
    region's nodes)."""
    new: dict[int, RelayExpr] = {}
    name, region = [], []
    for node in post_order(root, skip=lambda e: id(e) in inputs, kids=walk_children):
        if id(node) in inputs:
            new[id(node)] = inputs[id(node)]
            continue
        kids = [new[id(c)] for c in walk_children(node)]
        new[id(node)] = rebuild(node, kids, keep_type=False) if kids else node
        name.append(_region_label(node))
        region.append(node)
    return new[id(root)], "".join(name), region


class _Grouper:
    """The non-overlapping matches of ``pattern`` in ``expr`` (see the module docstring)."""

    def __init__(self, pattern: P.DFPattern, expr: RelayExpr, mod: IRModule | None) -> None:
        self.pattern = pattern
        self.leaves = [p for p in P.post_order(pattern) if not P.inputs(p)]
        self.fuzzy_sources = [p for p in P.post_order(pattern)
                              if isinstance(p, (P.DominatorPattern, P.FunctionPattern))]
        self.matcher = Matcher(expr, mod)
        self.groups: list[_Group] = []
        self.group_of: dict[int, int] = {}  # id(node) -> index in groups
        self._numbers = itertools.count()
        skip: set[int] = set()
        for node in reversed(self.matcher.graph.order):  # users before what they use
            if id(node) in self.group_of:
                continue
            if isinstance(node, Function) and node.get_attr(PARTITIONED_FROM_PATTERN):
                skip.update(id(n) for n in post_order(node))
            if id(node) not in skip and self.matcher.match(pattern, node):
                self._make_group(node)

    def _fuzzy(self, memo: Mapping[P.DFPattern, list[RelayExpr]]) -> set[int]:
        """Nodes that never become inputs: what a dominator's parent and path matched, and
        the insides of matched functions."""
        out: set[int] = set()
        for p in self.fuzzy_sources:
            if isinstance(p, P.DominatorPattern):
                out.update(id(m) for q in (p.parent, p.path) for m in memo.get(q, ()))
            else:
                for func in memo.get(p, ()):
                    out.update(id(n) for n in post_order(func.body))  # type: ignore[attr-defined]
        return out

    def _embedded(self, expr: RelayExpr, pattern: P.DFPattern) -> bool:
        """A constant that ``pattern`` asked for as a constant stays inside the group."""
        if not isinstance(expr, Constant):
            return False
        if isinstance(pattern, P.ConstantPattern):
            return True
        return isinstance(pattern, P.ExprPattern) and isinstance(pattern.expr, Constant)

    def _make_group(self, root: RelayExpr) -> None:
        memo = {p: list(v) for p, v in self.matcher.memo.items()}
        fuzzy = self._fuzzy(memo)
        number = next(self._numbers)
        inputs: dict[int, Var] = {}
        group = _Group(root, memo)
        for leaf in self.leaves:
            for expr in memo.get(leaf, ()):
                if id(expr) in fuzzy or id(expr) in inputs or isinstance(expr, (Op, Function)) \
                        or self._embedded(expr, leaf):
                    continue
                inputs[id(expr)] = Var(f"FunctionVar_{number}_{len(group.args)}")
                group.args.append(expr)
        body, group.name, region = _extract(root, inputs)
        if not self._fits(root, region):
            return
        group.function = Function([inputs[id(a)] for a in group.args], body)
        self.groups.append(group)
        for node in region:
            self.group_of[id(node)] = len(self.groups) - 1

    def _fits(self, root: RelayExpr, region: list[RelayExpr]) -> bool:
        """The region overlaps no earlier group, and no value computed inside it is used
        outside it (other than through its root). Ops, constants and variables compute
        nothing: they may be shared."""
        graph, inside = self.matcher.graph, {id(n) for n in region}
        for node in region:
            if isinstance(node, _SHAREABLE):
                continue
            if id(node) in self.group_of and not isinstance(node, Function):
                return False
            if node is not root and any(id(u) not in inside and not graph.dominates(root, u)
                                        for u in graph.users(node)):
                return False
        return True


def _transform(expr: RelayExpr, grouper: _Grouper,
               at_root: Callable[[_Group, RelayExpr, dict[int, RelayExpr]], RelayExpr]
               ) -> RelayExpr:
    """``expr`` rebuilt bottom-up, each group root replaced by ``at_root(group, post, new)``
    (``new``: old node id -> its rebuilt form)."""
    new: dict[int, RelayExpr] = {}
    for node in post_order(expr, kids=walk_children):
        kids = [new[id(c)] for c in walk_children(node)]
        post = rebuild(node, kids, keep_type=False) if kids else node
        index = grouper.group_of.get(id(node))
        if index is not None and grouper.groups[index].root is node:
            post = at_root(grouper.groups[index], post, new)
        new[id(node)] = post
    return new[id(expr)]


def partition(pattern: P.DFPattern, expr: RelayExpr, attrs: Mapping[str, Any] | None = None,
              check: Callable[[RelayExpr], bool] | None = None) -> RelayExpr:
    """``expr`` with each match of ``pattern`` (whose root passes ``check``) lifted into a
    function called in its place (see the module docstring)."""
    _check_args("partition", pattern, expr)
    if attrs is not None and not isinstance(attrs, Mapping):
        raise TypeError(f"partition: attrs must be a dict, got {type(attrs).__name__}")
    if check is not None and not callable(check):
        raise TypeError(f"partition: check must be a callable, got {type(check).__name__}")
    if isinstance(pattern, P.FunctionPattern):
        return expr  # a function that is not called: nothing to lift (as in Relay)
    grouper = _Grouper(pattern, expr, None)

    def lift(group: _Group, post: RelayExpr, new: dict[int, RelayExpr]) -> RelayExpr:
        if check is not None and not check(group.root):
            return post
        func = group.function.with_attr(PARTITIONED_FROM_PATTERN, group.name)  # type: ignore
        for key, value in (attrs or {}).items():
            func = func.with_attr(key, value)
        return Call(func, [new[id(a)] for a in group.args])

    return _transform(expr, grouper, lift)


class DFPatternCallback:
    """A rewrite: set ``self.pattern`` and override ``callback(pre, post, node_map)``, which
    returns the replacement of a match. ``require_type``: type the program before matching
    (for ``has_type``...); ``rewrite_once``: one round instead of until nothing changes."""

    def __init__(self, require_type: bool = False, rewrite_once: bool = False) -> None:
        self.pattern: P.DFPattern | None = None
        self.require_type = require_type
        self.rewrite_once = rewrite_once

    def rewrite(self, expr: RelayExpr) -> RelayExpr:
        """``rewrite(self, expr)``."""
        return rewrite(self, expr)

    def callback(self, pre: RelayExpr, post: RelayExpr,
                 node_map: Mapping[P.DFPattern, list[RelayExpr]]) -> RelayExpr:
        """The replacement of the match rooted at ``pre`` (``post``: rebuilt on rewritten
        inputs; ``node_map[p]``: what sub-pattern ``p`` matched, rewritten)."""
        raise NotImplementedError(f"{type(self).__name__} must override callback(pre, post, "
                                  "node_map)")


def _callbacks(callbacks: Any) -> list[DFPatternCallback]:
    items = [callbacks] if isinstance(callbacks, DFPatternCallback) else callbacks
    if not isinstance(items, Sequence) or not items:
        raise TypeError(f"rewrite: expected a DFPatternCallback or a non-empty list of them, "
                        f"got {callbacks!r}")
    for i, cb in enumerate(items):
        if not isinstance(cb, DFPatternCallback):
            raise TypeError(f"rewrite: callbacks[{i}] is a {type(cb).__name__}, not a "
                            "DFPatternCallback")
        if not isinstance(cb.pattern, P.DFPattern):
            raise TypeError(f"rewrite: {type(cb).__name__}.pattern must be a dataflow pattern "
                            f"(set self.pattern in __init__), got {cb.pattern!r}")
    return list(items)


def _round(cb: DFPatternCallback, expr: RelayExpr, mod: IRModule | None) -> RelayExpr:
    if cb.require_type:
        from ..transform.type_infer import infer_type

        expr = infer_type(expr, mod)
    grouper = _Grouper(cb.pattern, expr, mod)  # type: ignore[arg-type]

    def call_back(group: _Group, post: RelayExpr, new: dict[int, RelayExpr]) -> RelayExpr:
        def rewritten(e: RelayExpr) -> RelayExpr:
            return post if e is group.root else new[id(e)]

        node_map = {p: [rewritten(e) for e in exprs] for p, exprs in group.matched.items()}
        out = cb.callback(group.root, post, node_map)
        if not isinstance(out, RelayExpr):
            raise TVMError(f"rewrite: {type(cb).__name__}.callback returned "
                           f"{type(out).__name__} {out!r}; it must return a relay expression "
                           "(post, to keep the match as it is)")
        return out

    return _transform(expr, grouper, call_back)


def rewrite(callbacks: DFPatternCallback | Sequence[DFPatternCallback], expr: RelayExpr,
            mod: IRModule | None = None) -> RelayExpr:
    """``expr`` with every match of each callback's pattern replaced by what its callback
    returns (see the module docstring); ``mod`` types global functions for ``require_type``."""
    items = _callbacks(callbacks)
    if not isinstance(expr, RelayExpr):
        raise TypeError(f"rewrite: expected a relay expression, got {type(expr).__name__}")
    post = expr
    for _ in range(MAX_ROUNDS):
        last = post
        for cb in items:
            post = _round(cb, post, mod)
        if items[-1].rewrite_once or structural_equal(last, post, map_free_vars=True):
            break
    return post


def _check_args(where: str, pattern: Any, expr: Any) -> None:
    if not isinstance(pattern, P.DFPattern):
        raise TypeError(f"{where}: expected a dataflow pattern, got {type(pattern).__name__}")
    if not isinstance(expr, RelayExpr):
        raise TypeError(f"{where}: expected a relay expression, got {type(expr).__name__}")

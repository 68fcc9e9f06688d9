"""What the passes share besides the traversal framework (``ember.ir.visitor``): the mutator
configuration they all use, typing a module, mapping over its functions, building op calls.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ...ir.base import Span, merge_spans
from ...ir.expr import Call, Constant, Function, RelayExpr, Var
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.types import Any as AnyDim
from ...ir.visitor import ExprMutator, children, is_primitive, post_order
from .type_infer import InferType


# How many nodes ``rewrite_span`` walks on either side of a rewrite before it gives up on
# finding what the rewrite consumed (the patterns passes rewrite are a dozen nodes at most).
SPAN_WALK_LIMIT = 64


class PassMutator(ExprMutator):
    """An ExprMutator as the passes use it: every node keeps its type (a replacement without
    one takes the type of the node it replaces), and fused functions are left alone.

    A new call that replaces a node, and has no span itself, takes the spans of the calls it
    replaces (``rewrite_span``), so a kernel still names the ONNX nodes it computes
    after a pass rewrote them (``x * sigmoid(x)`` into ``nn.silu``)."""

    keep_types = True

    def __init__(self) -> None:
        super().__init__()
        self._spanned: dict[int, tuple[Call, Call]] = {}  # id -> (new call, its spanned copy)

    def skip(self, expr: RelayExpr) -> bool:
        return is_primitive(expr)

    def _dispatch(self, node: Any) -> Any:
        return self.keep_span(node, super()._dispatch(node))

    def keep_span(self, orig: Any, out: Any) -> Any:
        """``out`` (what ``orig`` became) with the spans of what it replaces, if it is a new
        call without a span of its own (the same copy each time a pass gives the same call
        for several nodes, so sharing is kept). A subclass that keys state by the identity of
        its results calls this before recording them (``_dispatch`` then leaves them be)."""
        if not isinstance(out, Call) or out.span is not None or out in self.memo_map or \
                not isinstance(orig, RelayExpr):
            return out
        done = self._spanned.get(id(out))
        if done is not None:
            return done[1]
        span = rewrite_span(orig, out, self.memo_map)
        spanned = out if span is None else dataclasses.replace(out, span=span)
        self._spanned[id(out)] = (out, spanned)  # holds ``out``: its id stays its own
        return spanned


class _Reach:
    """Ids of the first ``limit`` nodes reachable from a root (breadth first), walked only as
    far as the questions asked need: ``id(node) in reach`` stops at the node when it is
    there, and walks the whole (bounded) set only to answer no."""

    def __init__(self, root: RelayExpr, limit: int) -> None:
        self.seen, self.queue, self.limit = {id(root)}, [root], limit
        self.next = 0  # queue[next:] are reached, their children not walked yet
        self.full = False

    def __contains__(self, key: int) -> bool:
        seen, queue = self.seen, self.queue
        while key not in seen and not self.full and self.next < len(queue):
            node = queue[self.next]
            self.next += 1
            for kid in children(node):
                if id(kid) not in seen:
                    if len(seen) >= self.limit:  # full: nothing more can be added
                        self.full = True
                        break
                    seen.add(id(kid))
                    queue.append(kid)
        return key in seen


def rewrite_span(old: RelayExpr, new: RelayExpr,
                 rebuilt: Mapping[RelayExpr, RelayExpr] | None = None) -> Span | None:
    """The span of ``new``, which replaces ``old``: the spans of ``old`` and of the calls
    under it that ``new`` no longer uses, walked down to the nodes ``new`` still reaches
    (``rebuilt`` maps an original node to what it became). Where that boundary is not found
    within ``SPAN_WALK_LIMIT`` nodes, ``old``'s own span."""
    reach = _Reach(new, SPAN_WALK_LIMIT)
    rebuilt = rebuilt or {}
    spans, seen, stack = [old.span], {id(old)}, list(children(old))
    while stack:
        node = stack.pop()
        if id(node) in seen or isinstance(node, (Var, Constant, Op)) or \
                id(rebuilt.get(node, node)) in reach:
            continue
        if len(seen) >= SPAN_WALK_LIMIT:
            return old.span
        seen.add(id(node))
        spans.append(node.span)
        stack.extend(children(node))
    return merge_spans(*spans)


def infer(mod: IRModule) -> IRModule:
    """Run InferType (passes start with it when they read types, and end with it)."""
    return InferType()(mod)


def map_functions(mod: IRModule, fn: Callable[[Function], Function],
                  skip_primitive: bool = True) -> IRModule:
    """A copy of ``mod`` with ``fn`` applied to each Relay function (fused ones left alone)."""
    out = mod.copy()
    for gv, func in mod.functions.items():
        if not isinstance(func, Function) or (skip_primitive and is_primitive(func)):
            continue
        if func.get_attr("Compiler"):
            continue
        new = fn(func)
        if new is not func:
            out.add(gv, new)
    return out


def rewrite_functions(mod: IRModule, rewrite: Callable[[Function], RelayExpr]) -> IRModule:
    """The body of most rewriting passes: type ``mod``, ``rewrite`` each Relay function
    (fused ones left alone, see ``map_functions``), and type the result."""
    return infer(map_functions(infer(mod), rewrite))  # type: ignore[arg-type]


def use_counts(expr: RelayExpr) -> dict[int, int]:
    """How many parents each node under ``expr`` has (by id): a rewrite may absorb a value
    into its consumer only when that consumer is its one user."""
    counts: dict[int, int] = {}
    for node in post_order(expr):
        for kid in children(node):
            counts[id(kid)] = counts.get(id(kid), 0) + 1
    return counts


def fusion_bounded(ctx: Any) -> bool:
    """Whether the user bounds fusion groups to one op (``relay.FuseOps.max_depth=1``): the
    passes that fold one op into another's kernel then keep them apart too."""
    return int(ctx.config.get("relay.FuseOps.max_depth", 256)) == 1


def op_name(e: Any) -> str | None:
    """The name of the op ``e`` calls, or None when ``e`` is not a call of a registered op."""
    return e.op.name if isinstance(e, Call) and isinstance(e.op, Op) else None


class UsesMutator(PassMutator):
    """A pass mutator that knows how many users each node of the function has (``use_counts``)."""

    def __init__(self, uses: dict[int, int]) -> None:
        super().__init__()
        self.uses = uses


def op_call(name: str, *args: RelayExpr, **attrs: Any) -> Call:
    """``name(*args, **attrs)`` as a Call of the registered op (attrs built by the op)."""
    op = Op.get(name)
    return Call(op, args, op.make_attrs(**attrs) if attrs else None)


def expand_to_axis(vec: RelayExpr, ndim: int, axis: int) -> RelayExpr:
    """A 1-D ``vec`` running along ``axis`` of an ``ndim``-D tensor, shaped to broadcast
    against it: (C,) -> (C, 1, 1) for axis 1 of 4-D (nothing to do for the last axis)."""
    trailing = ndim - 1 - axis
    return vec if trailing == 0 else op_call("expand_dims", vec, axis=1, num_newaxis=trailing)


def same_shape(a: Any, b: Any) -> bool:
    """Whether two tensor types have one shape as far as the types tell: equal static sizes,
    and where a size is symbolic, the same shape variable, or a ``?`` on either side (a
    ``?`` that a reshape made from the batch is the batch). A static 1 against a symbolic
    size is not the same (it broadcasts). A fused epilogue that reads an operand of the
    result's shape checks at run time that the symbolic sizes agree."""
    if a.ndim != b.ndim:
        return False
    return all(x == y if isinstance(x, int) or isinstance(y, int)
               else x is y or isinstance(x, AnyDim) or isinstance(y, AnyDim)
               for x, y in zip(a.shape, b.shape))

"""Dynamic twins of zoo models: the same network with ``?`` in some input dimensions.

    twin = dynamic_twin(base_mod, probe_mod, axes)     # IRModule, ``main``'s input ``?`` at axes
    fixed = with_input_shape(twin, (2, 3, 64, 96))     # the twin at one concrete shape

A zoo workload bakes its input shape into its reshapes (``(1, 16, 256)``) and a few attributes
(a slice's end). The twin is found by comparing two builds of the same workload, ``base_mod``
at its usual shape and ``probe_mod`` at another (batch 2, a larger image...): they have the
same calls in the same order, and every dimension that differs between them follows the
input. Each reshape is rewritten in Relay's special values so that those dimensions follow it
(0 copies, -1 infers, -3 merges two, -4 splits one), or, where it only adds or drops axes of
size 1, as ``squeeze`` / ``expand_dims``; a slice end on such a dimension becomes relative to
its end. Anything else that differs between the two builds (a weight's shape, a resize's
output size, a constant) cannot follow the input: ``dynamic_twin`` raises ValueError naming it.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ember.ir import post_order
from ember.ir.expr import Call, Constant, Function, Var
from ember.ir.module import IRModule
from ember.ir.types import Any as AnyDim
from ember.ir.types import TensorType
from ember.ir.visitor import ExprMutator
from ember.relay.op import indexing as _index
from ember.relay.op import transform as _transform
from ember.relay.op.attrs import ReshapeAttrs


def _dims(expr: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in expr.checked_type_.shape)


# -- reshapes -----------------------------------------------------------------------------------
def _groups(src: Sequence[int], dst: Sequence[int], src2: Sequence[int],
            dst2: Sequence[int]) -> list[tuple[range, range]] | None:
    """Runs of source and destination axes with equal element counts at both shapes (base
    and probe), left to right; None where the two shapes do not split alike."""
    out, i, j = [], 0, 0
    while i < len(src) and j < len(dst):
        si, dj = i + 1, j + 1
        ps, pd, qs, qd = src[i], dst[j], src2[i], dst2[j]
        while (ps, qs) != (pd, qd):
            grow_src = ps < pd or (ps == pd and qs < qd)
            if grow_src and si < len(src):
                ps, qs, si = ps * src[si], qs * src2[si], si + 1
            elif not grow_src and dj < len(dst):
                pd, qd, dj = pd * dst[dj], qd * dst2[dj], dj + 1
            else:
                return None
        out.append((range(i, si), range(j, dj)))
        i, j = si, dj
    rest_static = all(d == 1 for d in (*src[i:], *dst[j:])) and src[i:] == src2[i:] and \
        dst[j:] == dst2[j:]
    if not rest_static:
        return None
    if j < len(dst):  # trailing size-1 axes of the output: literals after every copy
        out.append((range(i, i), range(j, len(dst))))
    return out


def _group_values(s: range, d: range, dst: Sequence[int],
                  moving: Sequence[bool]) -> list[int] | None:
    """Special values for one run of ``_groups`` (None if it has none). A literal consumes
    one input axis, so fixed runs are written out only where they keep the axes in step."""
    fixed = not any(moving[j] for j in d)
    if fixed and (len(s) == len(d) or not s):
        return [dst[j] for j in d]
    if len(s) == 1 and len(d) == 1:
        return [0]
    if len(s) == 2 and len(d) == 1:
        return [-3]
    if len(s) == 1 and len(d) == 2 and sum(moving[j] for j in d) <= 1:
        return [-4, *(-1 if moving[j] else dst[j] for j in d)]
    return None


def reshape_values(src: Sequence[int], dst: Sequence[int], src2: Sequence[int],
                   dst2: Sequence[int]) -> list[int] | None:
    """A reshape's new shape in special values that turns ``src`` into ``dst`` and ``src2``
    into ``dst2`` (the same reshape at the base and the probe shape); None if there is none."""
    moving = [a != b for a, b in zip(dst, dst2)]
    if sum(moving) <= 1:  # every other output dimension is fixed: -1 finds the moving one
        return [-1 if m else d for d, m in zip(dst, moving)]
    groups = _groups(src, dst, src2, dst2)
    if groups is None:
        return None
    values: list[int] = []
    for s, d in groups:
        part = _group_values(s, d, dst, moving)
        if part is None:
            return None
        values += part
    return values


def _unit_axes(shape: Sequence[int], shape2: Sequence[int]) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(shape, shape2)) if a == b == 1]


def squeeze_expand(x: Any, src: Sequence[int], dst: Sequence[int], src2: Sequence[int],
                   dst2: Sequence[int]) -> Any | None:
    """``x`` reshaped by dropping and inserting fixed axes of size 1 (squeeze, expand_dims),
    if that is all the reshape does; else None."""
    drop, add = _unit_axes(src, src2), _unit_axes(dst, dst2)
    keep = [i for i in range(len(src)) if i not in drop]
    kept = [j for j in range(len(dst)) if j not in add]
    if [(src[i], src2[i]) for i in keep] != [(dst[j], dst2[j]) for j in kept]:
        return None
    out = _transform.squeeze(x, drop) if drop else x
    for j in add:
        out = _transform.expand_dims(out, j)
    return out


# -- the twin -----------------------------------------------------------------------------------
class _Swap(ExprMutator):
    """An expression over a new input variable."""

    def __init__(self, old: Var, new: Var) -> None:
        super().__init__()
        self.old, self.new = old, new

    def visit_var(self, e: Var) -> Any:
        return self.new if e is self.old else e


class _Twin(_Swap):
    """``main``'s body over a new input variable, with what follows the input rewritten."""

    def __init__(self, old: Var, new: Var, probe: dict[int, Any], order: list[Call]) -> None:
        super().__init__(old, new)
        self.probe, self.order = probe, order
        # (shape at the base, shape at the probe) -> a rewritten tensor of those shapes
        self.seen: dict[tuple[tuple[int, ...], tuple[int, ...]], Any] = {}

    def visit_call(self, call: Call) -> Any:
        out = super().visit_call(call)
        other = self.probe[id(call)]
        name = getattr(call.op, "name", None)
        if name == "reshape":
            return self._reshape(call, other, out)
        if name == "strided_slice" and call.attrs != other.attrs:
            out = Call(out.op, out.args, self._slice(call, other), span=out.span)
        elif name == "broadcast_to" and call.attrs != other.attrs:
            out = self._broadcast(call, other, out)
        elif call.attrs != other.attrs:
            raise ValueError(f"dynamic twin: {name}'s attributes depend on the input shape "
                             f"({call.attrs} at the base shape, {other.attrs} at the probe)")
        if isinstance(call.checked_type_, TensorType):
            self.seen.setdefault((_dims(call), _dims(other)), out)
        return out

    def _broadcast(self, call: Call, other: Call, out: Call) -> Any:
        """A broadcast to a shape that follows the input, as ``broadcast_to_like`` another
        tensor with the same moving dimensions (sliced to 1 on the fixed axes where the
        target is 1): one computed before it, else one that does not depend on it."""
        dst, dst2 = _dims(call), _dims(other)
        for ref, ref2, node in self._candidates():
            if len(ref) != len(dst) or any((a != b) != (c != d) or a != b and a != c
                                           for a, b, c, d in zip(ref, ref2, dst, dst2)):
                continue
            cut = [i for i, (r, d) in enumerate(zip(ref, dst)) if r != d]
            if any(dst[i] != 1 for i in cut) or node is not None and any(
                    n is call for n in post_order(node)):
                continue
            expr = self.visit(node) if node is not None else self.seen[(ref, ref2)]
            like = _index.strided_slice(expr, [0] * len(cut), [1] * len(cut), axes=cut) \
                if cut else expr
            return _transform.broadcast_to_like(out.args[0], like)
        raise ValueError(f"dynamic twin: broadcast_to {dst} ({dst2} at the probe shape): no "
                         "other tensor has the dimensions that follow the input")

    def _candidates(self) -> Any:
        """(base shape, probe shape, node or None if already rewritten) of the tensors a
        broadcast may follow: those rewritten, then every other call."""
        for ref, ref2 in list(self.seen):
            yield ref, ref2, None
        for node in self.order:
            other = self.probe[id(node)]
            if isinstance(node.checked_type_, TensorType):
                yield _dims(node), _dims(other), node

    def _reshape(self, call: Call, other: Call, out: Call) -> Any:
        src, dst = _dims(call.args[0]), _dims(call)
        src2, dst2 = _dims(other.args[0]), _dims(other)
        values = reshape_values(src, dst, src2, dst2)
        if values is not None:
            return Call(out.op, out.args, ReshapeAttrs(tuple(values)), span=out.span)
        unit = squeeze_expand(out.args[0], src, dst, src2, dst2)
        if unit is None:
            raise ValueError(f"dynamic twin: no symbolic form for reshape {src} -> {dst} "
                             f"({src2} -> {dst2} at the probe shape)")
        return unit

    def _slice(self, call: Call, other: Call) -> Any:
        """A slice whose end moves with its axis: the end counted from the axis' end."""
        attrs, attrs2 = call.attrs, other.attrs
        src, src2 = _dims(call.args[0]), _dims(other.args[0])
        axes = attrs.axes if attrs.axes is not None else tuple(range(len(attrs.end)))
        ends = []
        for k, (axis, end, end2) in enumerate(zip(axes, attrs.end, attrs2.end)):
            if end == end2:
                ends.append(end)
            elif end - src[axis] == end2 - src2[axis] and end < src[axis]:
                ends.append(end - src[axis])
            else:
                raise ValueError(f"dynamic twin: strided_slice end[{k}] = {end} on axis {axis} "
                                 f"({end2} at the probe shape) does not follow the input")
        if replace(attrs, end=attrs2.end) != attrs2:
            raise ValueError(f"dynamic twin: strided_slice {attrs} vs {attrs2}: more than its "
                             "end depends on the input shape")
        return replace(attrs, end=tuple(ends))


def _match(base: Function, probe: Function) -> dict[int, Any]:
    """id(call in base) -> the same call in probe; ValueError where the two differ in more
    than shapes."""
    nodes, nodes2 = list(post_order(base.body)), list(post_order(probe.body))
    if len(nodes) != len(nodes2):
        raise ValueError(f"dynamic twin: the workload has {len(nodes)} nodes at the base shape "
                         f"but {len(nodes2)} at the probe: its structure depends on the shape")
    out = {}
    for a, b in zip(nodes, nodes2):
        if type(a) is not type(b) or getattr(a, "op", None) is not getattr(b, "op", None):
            raise ValueError(f"dynamic twin: {a} and {b} differ between the base and the probe")
        if isinstance(a, Constant) and a.data.shape != b.data.shape:
            raise ValueError(f"dynamic twin: a constant of shape {a.data.shape} is "
                             f"{b.data.shape} at the probe shape")
        if isinstance(a, Var) and a.name_hint != base.params[0].name_hint and \
                _dims(a) != _dims(b):
            raise ValueError(f"dynamic twin: parameter {a.name_hint!r} has shape {_dims(a)} "
                             f"at the base shape but {_dims(b)} at the probe")
        if isinstance(a, Call):
            out[id(a)] = b
    return out


def dynamic_twin(base: IRModule, probe: IRModule, axes: Sequence[int]) -> IRModule:
    """``base`` with ``?`` at ``axes`` of its first input, its shape-following calls rewritten
    by comparison with ``probe`` (the same workload built at another shape)."""
    main, main2 = base["main"], probe["main"]
    old = main.params[0]
    shape, shape2 = _dims(old), _dims(main2.params[0])
    moved = [i for i, (a, b) in enumerate(zip(shape, shape2)) if a != b]
    if sorted(moved) != sorted(axes):
        raise ValueError(f"dynamic twin: the probe's input {shape2} differs from {shape} at "
                         f"axes {moved}, not at the symbolic axes {list(axes)}")
    dims = tuple(AnyDim() if i in axes else d for i, d in enumerate(shape))
    new = Var(old.name_hint, TensorType(dims, old.checked_type_.dtype))
    probe2 = _match(main, main2)
    order = [n for n in post_order(main.body) if isinstance(n, Call)]
    twin = _Twin(old, new, probe2, order)
    twin.seen[(shape, shape2)] = new
    body = twin.visit(main.body)
    return IRModule.from_expr(Function((new, *main.params[1:]), body))


def with_input_shape(mod: IRModule, shape: Sequence[Any]) -> IRModule:
    """``mod`` (a twin) with its first input of ``shape`` (ints, or None for ``?``)."""
    main = mod["main"]
    old = main.params[0]
    dims = tuple(AnyDim() if d is None else int(d) for d in shape)
    new = Var(old.name_hint, TensorType(dims, (old.type_annotation or old.checked_type_).dtype))
    body = _Swap(old, new).visit(main.body)
    return IRModule.from_expr(Function((new, *main.params[1:]), body))


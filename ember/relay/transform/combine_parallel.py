"""CombineParallelConv2D / Dense / BatchMatmul and BatchingOps: one big op for parallel ones.

Parallel branches are calls of one operator that share their first argument (the data), such
as the 1x1 convolutions of an Inception block. A *branch* is such a call followed by the chain
of elementwise or broadcast calls (pattern ELEMWISE/BROADCAST) that each consume the previous
node as its only user (``bias_add``, ``relu``, ...). Roots that can be combined form a group;
a group of at least ``min_num_branches`` becomes one call:

- ``nn.conv2d`` (groups=1, same strides/padding/dilation/layouts/out_dtype and kernel size):
  the weights are concatenated along the kernel's ``O`` axis, ``channels`` is their sum.
- ``nn.dense`` with ``to_batch=False``, and ``nn.batch_matmul``: the weights are concatenated
  along their output-units axis.
- ``nn.dense`` with ``to_batch=True`` (the default, weights of one shape): the data is stacked
  ``len(group)`` times and the weights are stacked, giving one ``nn.batch_matmul``.

The followers are combined too, level by level, while every branch has one there with the same
op, attrs and position of the chain, and its other arguments can be joined: concatenated along
the output-channel axis (each must be as long there as its branch's channels, and equal
elsewhere), or stacked for the batched form (equal shapes). Each branch's last combined node is
then replaced by its slice of the combined result (``strided_slice`` along the channel axis;
for the batch, a slice of axis 0 squeezed away). Shapes must be static.

``BatchingOps`` runs CombineParallelConv2D, CombineParallelDense and
CombineParallelBatchMatmul (each with 3 branches at least), as TVM's does.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ...ir.expr import Call, Function, RelayExpr, Tuple
from ...ir.module import IRModule
from ...ir.op import Op, OpPattern
from ...ir.structural import structural_equal
from ...ir.transform import FunctionPass, ModulePass, PassContext, register_pass
from ...ir.types import TensorType
from ...ir.visitor import post_order
from ._helpers import PassMutator, infer, map_functions, op_call, use_counts

__all__ = ["BatchingOps", "CombineParallelBatchMatmul", "CombineParallelConv2D",
           "CombineParallelDense"]

Branch = list[Call]


def _static(ty: Any) -> TensorType | None:
    ok = isinstance(ty, TensorType) and all(isinstance(d, int) for d in ty.shape)
    return ty if ok else None


def _shape(e: RelayExpr) -> tuple[int, ...]:
    return tuple(e.checked_type.shape)  # type: ignore[attr-defined]


def _concat(exprs: Sequence[RelayExpr], axis: int) -> Call:
    return op_call("concatenate", Tuple(tuple(exprs)), axis=axis)


class _Strategy:
    """How one kind of root is combined: which roots go together, how their arguments and
    their followers' arguments are joined, and how each branch's result is taken back."""

    op_name: ClassVar[str]

    def supported(self, call: Call) -> bool:
        return all(_static(a.checked_type_) for a in call.args) and bool(
            _static(call.checked_type_))

    def compatible(self, a: Call, b: Call) -> bool:
        raise NotImplementedError

    def combine_roots(self, roots: list[Call], args: list[list[RelayExpr]]) -> RelayExpr:
        raise NotImplementedError

    def arg_compatible(self, args: list[RelayExpr], branches: list[Branch], depth: int) -> bool:
        raise NotImplementedError

    def combine_arg(self, args: list[RelayExpr], orig: list[RelayExpr],
                    branches: list[Branch], depth: int) -> RelayExpr:
        raise NotImplementedError

    def outputs(self, combined: RelayExpr, branches: list[Branch]) -> list[RelayExpr]:
        raise NotImplementedError


class _ConcatStrategy(_Strategy):
    """Roots joined along their output-channel axis (the last axis unless a layout says)."""

    def channel_axis(self, root: Call) -> int:
        return len(_shape(root)) - 1

    def channels(self, root: Call) -> int:
        return _shape(root)[self.channel_axis(root)]

    def arg_compatible(self, args: list[RelayExpr], branches: list[Branch], depth: int) -> bool:
        axis, out_ndim = self.channel_axis(branches[0][0]), len(_shape(branches[0][depth]))
        ref = args[0].checked_type
        for arg, branch in zip(args, branches):
            ty = _static(arg.checked_type_)
            if ty is None or ty.dtype != ref.dtype or ty.ndim != ref.ndim:  # type: ignore
                return False
            pos = axis - out_ndim + ty.ndim
            if pos < 0 or ty.shape[pos] != self.channels(branch[0]):
                return False
            if any(d != r for i, (d, r) in enumerate(zip(ty.shape, ref.shape)) if i != pos):
                return False
        return True

    def combine_arg(self, args: list[RelayExpr], orig: list[RelayExpr],
                    branches: list[Branch], depth: int) -> RelayExpr:
        axis, out_ndim = self.channel_axis(branches[0][0]), len(_shape(branches[0][depth]))
        return _concat(args, axis - out_ndim + len(_shape(orig[0])))

    def outputs(self, combined: RelayExpr, branches: list[Branch]) -> list[RelayExpr]:
        axis, start, outs = self.channel_axis(branches[0][0]), 0, []
        for branch in branches:
            size = self.channels(branch[0])
            outs.append(op_call("strided_slice", combined, begin=(start,), end=(start + size,),
                                axes=(axis,)))
            start += size
        return outs

    def join_weights(self, roots: list[Call], args: list[list[RelayExpr]], axis: int,
                     **changes: Any) -> Call:
        attrs = dataclasses.replace(roots[0].attrs, **changes)  # type: ignore[type-var]
        weight = _concat([a[1] for a in args], axis)
        return Call(roots[0].op, (args[0][0], weight), attrs)


class _Conv2D(_ConcatStrategy):
    op_name = "nn.conv2d"
    _SAME = ("strides", "padding", "dilation", "groups", "data_layout", "kernel_layout",
             "out_dtype", "out_layout")

    def supported(self, call: Call) -> bool:
        return super().supported(call) and call.attrs.groups == 1  # type: ignore[union-attr]

    def _hw(self, call: Call) -> tuple[int, int]:
        layout, shape = call.attrs.kernel_layout, _shape(call.args[1])  # type: ignore
        return shape[layout.index("H")], shape[layout.index("W")]

    def compatible(self, a: Call, b: Call) -> bool:
        return (all(getattr(a.attrs, k) == getattr(b.attrs, k) for k in self._SAME)
                and self._hw(a) == self._hw(b))

    def channel_axis(self, root: Call) -> int:
        attrs = root.attrs
        return (attrs.out_layout or attrs.data_layout).index("C")  # type: ignore[union-attr]

    def combine_roots(self, roots: list[Call], args: list[list[RelayExpr]]) -> RelayExpr:
        total = sum(self.channels(r) for r in roots)
        axis = roots[0].attrs.kernel_layout.index("O")  # type: ignore[union-attr]
        return self.join_weights(roots, args, axis, channels=total)


class _DenseConcat(_ConcatStrategy):
    op_name = "nn.dense"

    def compatible(self, a: Call, b: Call) -> bool:
        return (a.attrs.out_dtype == b.attrs.out_dtype  # type: ignore[union-attr]
                and _shape(a.args[1])[1:] == _shape(b.args[1])[1:])

    def combine_roots(self, roots: list[Call], args: list[list[RelayExpr]]) -> RelayExpr:
        total = sum(self.channels(r) for r in roots)
        return self.join_weights(roots, args, 0, units=total)


class _BatchMatmul(_ConcatStrategy):
    op_name = "nn.batch_matmul"

    def _units_axis(self, call: Call) -> int:
        return 1 if call.attrs.transpose_b else 2  # type: ignore[union-attr]

    def compatible(self, a: Call, b: Call) -> bool:
        if a.attrs != b.attrs:
            return False
        wa, wb, axis = _shape(a.args[1]), _shape(b.args[1]), self._units_axis(a)
        return all(x == y for i, (x, y) in enumerate(zip(wa, wb)) if i != axis)

    def combine_roots(self, roots: list[Call], args: list[list[RelayExpr]]) -> RelayExpr:
        return self.join_weights(roots, args, self._units_axis(roots[0]))


class _DenseBatch(_Strategy):
    """Parallel dense ops of one weight shape as one batch_matmul over a stacked batch."""

    op_name = "nn.dense"

    def supported(self, call: Call) -> bool:
        return super().supported(call) and len(_shape(call.args[0])) == 2

    def compatible(self, a: Call, b: Call) -> bool:
        return (a.attrs.out_dtype == b.attrs.out_dtype  # type: ignore[union-attr]
                and _shape(a.args[1]) == _shape(b.args[1]))

    def combine_roots(self, roots: list[Call], args: list[list[RelayExpr]]) -> RelayExpr:
        data = op_call("stack", Tuple(tuple(a[0] for a in args)), axis=0)
        weight = op_call("stack", Tuple(tuple(a[1] for a in args)), axis=0)
        return op_call("nn.batch_matmul", data, weight,
                       out_dtype=roots[0].attrs.out_dtype)  # type: ignore[union-attr]

    def arg_compatible(self, args: list[RelayExpr], branches: list[Branch], depth: int) -> bool:
        tys = [_static(a.checked_type_) for a in args]
        out_ndim = len(_shape(branches[0][depth]))
        return all(t is not None and t.ndim <= out_ndim and (t.shape, t.dtype) == (
            tys[0].shape, tys[0].dtype) for t in tys)  # type: ignore[union-attr]

    def combine_arg(self, args: list[RelayExpr], orig: list[RelayExpr],
                    branches: list[Branch], depth: int) -> RelayExpr:
        missing = len(_shape(branches[0][depth])) - len(_shape(orig[0]))
        if missing:  # (N,) against (M, N): make it (1, N) so that it broadcasts in the batch
            args = [op_call("expand_dims", a, axis=0, num_newaxis=missing) for a in args]
        return op_call("stack", Tuple(tuple(args)), axis=0)

    def outputs(self, combined: RelayExpr, branches: list[Branch]) -> list[RelayExpr]:
        return [op_call("squeeze", op_call("strided_slice", combined, begin=(i,), end=(i + 1,),
                                           axes=(0,)), axis=(0,))
                for i in range(len(branches))]


# -- finding the groups -------------------------------------------------------------------------
def _is_follower(e: RelayExpr, parent: RelayExpr) -> bool:
    return (isinstance(e, Call) and isinstance(e.op, Op)
            and e.op.op_def.pattern <= OpPattern.BROADCAST
            and sum(a is parent for a in e.args) == 1 and _static(e.checked_type_) is not None
            and _shape(e) == _shape(parent))


def _branches(func: Function, strategy: _Strategy) -> list[list[Branch]]:
    """The groups of combinable branches of ``func``, each with its full follower chain."""
    users: dict[int, list[RelayExpr]] = {}
    roots_by_data: dict[int, list[Call]] = {}
    counts = use_counts(func)
    for node in post_order(func):
        for kid in ((node.op, *node.args) if isinstance(node, Call) else ()):
            users.setdefault(id(kid), []).append(node)
        if (isinstance(node, Call) and isinstance(node.op, Op)
                and node.op.name == strategy.op_name and strategy.supported(node)):
            roots_by_data.setdefault(id(node.args[0]), []).append(node)
    groups: list[list[Branch]] = []
    for roots in roots_by_data.values():
        parts: list[list[Call]] = []
        for root in roots:
            home = next((p for p in parts if strategy.compatible(p[0], root)), None)
            if home is None:
                parts.append([root])
            else:
                home.append(root)
        for part in parts:
            groups.append([_chain(root, users, counts) for root in part])
    return groups


def _chain(root: Call, users: dict[int, list[RelayExpr]], counts: dict[int, int]) -> Branch:
    chain = [root]
    while counts.get(id(chain[-1])) == 1:
        (user,) = users.get(id(chain[-1]), [None])
        if user is None or not _is_follower(user, chain[-1]):
            break
        chain.append(user)  # type: ignore[arg-type]
    return chain


def _depth(group: list[Branch], strategy: _Strategy) -> int:
    """How many levels of followers all branches can combine."""
    depth = 0
    while all(len(b) > depth + 1 for b in group):
        level = [b[depth + 1] for b in group]
        first = level[0]
        parent_at = [next(i for i, a in enumerate(c.args) if a is b[depth])
                     for c, b in zip(level, group)]
        if any(c.op is not first.op or not structural_equal(c.attrs, first.attrs)
               for c in level) or len(set(parent_at)) != 1:
            break
        others = [i for i in range(len(first.args)) if i != parent_at[0]]
        if not all(strategy.arg_compatible([c.args[i] for c in level], group, depth + 1)
                   for i in others):
            break
        depth += 1
    return depth


def _independent(group: list[Branch], depth: int) -> bool:
    """No branch's other arguments depend on a node of the group (joining them would loop)."""
    inside = {id(c) for b in group for c in b[:depth + 1]}
    checked: set[int] = set()  # nodes known to be outside the group's reach
    for b in group:
        for level, call in enumerate(b[:depth + 1]):
            for arg in call.args[1:] if level == 0 else call.args:
                if level > 0 and arg is b[level - 1]:
                    continue  # the chain's own parent
                for node in post_order(arg, done=checked):
                    if id(node) in inside:
                        return False
                    checked.add(id(node))
    return True


class _Rewriter(PassMutator):
    """Replace each branch's last combined node by its slice of the group's combined call."""

    def __init__(self, strategy: _Strategy, groups: list[tuple[list[Branch], int]]) -> None:
        super().__init__()
        self.strategy = strategy
        self.ends: dict[int, tuple[int, int]] = {}
        self.groups = groups
        self.built: dict[int, list[RelayExpr]] = {}
        for g, (group, depth) in enumerate(groups):
            for i, branch in enumerate(group):
                self.ends[id(branch[depth])] = (g, i)

    def visit_call(self, call: Call) -> RelayExpr:
        where = self.ends.get(id(call))
        if where is None:
            return super().visit_call(call)
        g, i = where
        if g not in self.built:
            self.built[g] = self._build(*self.groups[g])
        return self.built[g][i]

    def _build(self, group: list[Branch], depth: int) -> list[RelayExpr]:
        st = self.strategy
        combined = st.combine_roots([b[0] for b in group],
                                    [[self.visit(a) for a in b[0].args] for b in group])
        for level in range(1, depth + 1):
            first = group[0][level]
            args: list[RelayExpr] = []
            for i, arg in enumerate(first.args):
                if arg is group[0][level - 1]:
                    args.append(combined)
                    continue
                orig = [b[level].args[i] for b in group]
                args.append(st.combine_arg([self.visit(a) for a in orig], orig, group, level))
            combined = Call(first.op, tuple(args), first.attrs)
        return st.outputs(combined, group)


def _combine(func: Function, strategy: _Strategy, min_num_branches: int) -> Function:
    plans = []
    for group in _branches(func, strategy):
        if len(group) < min_num_branches:
            continue
        depth = _depth(group, strategy)
        if _independent(group, depth):
            plans.append((group, depth))
    if not plans:
        return func
    return _Rewriter(strategy, plans).visit(func)  # type: ignore[no-any-return]


def _check_min(pass_name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{pass_name}: min_num_branches must be an integer >= 1, got "
                         f"{value!r}")


class _CombinePass(FunctionPass):
    opt_level: ClassVar[int] = 4
    min_num_branches: int

    def __post_init__(self) -> None:
        _check_min(self.name, self.min_num_branches)

    def strategy(self) -> _Strategy:
        raise NotImplementedError

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        strategy = self.strategy()
        out = map_functions(infer(mod), lambda f: _combine(f, strategy, self.min_num_branches))
        return infer(out)


@dataclass(frozen=True)
class CombineParallelConv2D(_CombinePass):
    """Combine parallel ``nn.conv2d`` calls on one input into one (see the module docstring)."""

    name: ClassVar[str] = "CombineParallelConv2D"
    min_num_branches: int = 3

    def strategy(self) -> _Strategy:
        return _Conv2D()


@dataclass(frozen=True)
class CombineParallelDense(_CombinePass):
    """Combine parallel ``nn.dense`` calls on one input: into one ``nn.batch_matmul``
    (``to_batch=True``, weights of one shape) or one wider ``nn.dense``."""

    name: ClassVar[str] = "CombineParallelDense"
    min_num_branches: int = 3
    to_batch: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.to_batch, bool):
            raise TypeError(f"CombineParallelDense: to_batch must be a bool, got "
                            f"{self.to_batch!r}")

    def strategy(self) -> _Strategy:
        return _DenseBatch() if self.to_batch else _DenseConcat()


@dataclass(frozen=True)
class CombineParallelBatchMatmul(_CombinePass):
    """Combine parallel ``nn.batch_matmul`` calls on one input along the output units."""

    name: ClassVar[str] = "CombineParallelBatchMatmul"
    min_num_branches: int = 3

    def strategy(self) -> _Strategy:
        return _BatchMatmul()


@dataclass(frozen=True)
class BatchingOps(ModulePass):
    """CombineParallelConv2D, CombineParallelDense, CombineParallelBatchMatmul in turn."""

    name: ClassVar[str] = "BatchingOps"
    opt_level: ClassVar[int] = 4

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for p in (CombineParallelConv2D(), CombineParallelDense(), CombineParallelBatchMatmul()):
            mod = p(mod)
        return mod


for _cls in (CombineParallelConv2D, CombineParallelDense, CombineParallelBatchMatmul,
             BatchingOps):
    register_pass(_cls.name, _cls)

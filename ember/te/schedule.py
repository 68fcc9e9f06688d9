"""Schedules: per stage, how its loop nest is split, fused, ordered, annotated and placed.

``s = te.create_schedule(out.op)`` makes one Stage per operation reachable from the outputs.
Each Stage keeps its leaf iteration variables in loop order plus the Split/Fuse relations that
derive them from the root axes; :mod:`ember.te.lower` turns that into loops. ``cache_read`` and
``cache_write`` add stages and rewrite the dataflow (:mod:`ember.te.schedule_cache`).

ember compiles for the host CPU only: GPU-only primitives (``bind`` to a thread axis, shared or
warp memory scopes) raise an OpError that names the CPU alternative.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..runtime.errors import OpError
from ..tir.expr import Var
from ..tir.stmt import ForKind
from . import unsupported
from .unsupported import refuse
from .tensor import ComputeOp, IterVar, Operation, Range, Tensor


@dataclass(eq=False)
class Split:
    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: Any
    nparts: Any


def split_extents(rel: Split, parent_extent: Any) -> tuple[Any, Any]:
    """(outer, inner) loop extents of a split of a loop of ``parent_extent``."""
    from ..tir import op as _op
    from ..tir.simplify import simplify

    if rel.factor is not None:
        f = _op.convert(rel.factor)
        return simplify((parent_extent + f - 1) // f), f
    n = _op.convert(rel.nparts)
    return n, simplify((parent_extent + n - 1) // n)


@dataclass(eq=False)
class Fuse:
    outer: IterVar
    inner: IterVar
    fused: IterVar


class Stage:
    """How one operation is computed: loop structure, annotations and where it is placed."""

    def __init__(self, op: Operation) -> None:
        self.op = op
        axis = list(getattr(op, "axis", [])) + list(getattr(op, "reduce_axis", []))
        self.all_iter_vars: list[IterVar] = list(axis)
        self.leaf_iter_vars: list[IterVar] = list(axis)
        self.relations: list[Split | Fuse] = []
        self.iter_var_attrs: dict[IterVar, ForKind] = {}
        self.attach_type = "root"  # root | inline | scope
        self.scope = "global"
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        # leaf -> [(key, value)] from pragma(); dim index -> (factor, offset) from storage_align()
        self.pragmas: dict[IterVar, list[tuple[str, Any]]] = {}
        self.storage_aligns: dict[int, tuple[int, int]] = {}

    def __repr__(self) -> str:
        return f"stage({self.op.name})"

    def __getattr__(self, name: str) -> Any:
        op = self.__dict__.get("op")  # absent while copy/pickle probe a bare instance
        err = refuse(unsupported.STAGE, f"s[{getattr(op, 'name', '?')}]", name)
        if err is not None:
            raise err
        raise AttributeError(f"'Stage' object has no attribute {name!r}")

    def _leaf_index(self, iv: IterVar) -> int:
        for i, leaf in enumerate(self.leaf_iter_vars):
            if leaf is iv:
                return i
        raise OpError(f"schedule of {self.op.name}: {iv.var.name} is not a leaf loop of this "
                      f"stage (leaves: {[x.var.name for x in self.leaf_iter_vars]})")

    def split(self, parent: IterVar, factor: Any = None, nparts: Any = None
              ) -> tuple[IterVar, IterVar]:
        """Split ``parent`` into (outer, inner) with inner extent ``factor`` (or ``nparts``)."""
        if (factor is None) == (nparts is None):
            raise OpError(f"schedule of {self.op.name}: split needs exactly one of factor, nparts")
        i = self._leaf_index(parent)
        outer = IterVar(None, Var(f"{parent.var.name}_outer"), parent.iter_type)
        inner = IterVar(None, Var(f"{parent.var.name}_inner"), parent.iter_type)
        self.relations.append(Split(parent, outer, inner, factor, nparts))
        self.leaf_iter_vars[i:i + 1] = [outer, inner]
        self.all_iter_vars += [outer, inner]
        return outer, inner

    def fuse(self, *ivs: IterVar) -> IterVar:
        """Fuse adjacent leaf loops (outermost first) into one."""
        if len(ivs) == 1 and isinstance(ivs[0], (list, tuple)):
            ivs = tuple(ivs[0])
        out = ivs[0]
        for inner in ivs[1:]:
            i, j = self._leaf_index(out), self._leaf_index(inner)
            if j != i + 1:
                raise OpError(f"schedule of {self.op.name}: can only fuse adjacent loops, "
                              f"{out.var.name} and {inner.var.name} are not")
            if out.iter_type != inner.iter_type:
                raise OpError(f"schedule of {self.op.name}: cannot fuse a reduction loop with "
                              "a data-parallel loop")
            fused = IterVar(None, Var(f"{out.var.name}_{inner.var.name}_fused"), out.iter_type)
            self.relations.append(Fuse(out, inner, fused))
            self.leaf_iter_vars[i:i + 2] = [fused]
            self.all_iter_vars.append(fused)
            out = fused
        return out

    def tile(self, x_parent: IterVar, y_parent: IterVar, x_factor: Any, y_factor: Any
             ) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split two loops and order them (x_outer, y_outer, x_inner, y_inner), as TVM's tile."""
        xo, xi = self.split(x_parent, x_factor)
        yo, yi = self.split(y_parent, y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def reorder(self, *ivs: IterVar) -> None:
        """Put the given leaf loops in this order (others keep their places)."""
        if len(ivs) == 1 and isinstance(ivs[0], (list, tuple)):
            ivs = tuple(ivs[0])
        pos = sorted(self._leaf_index(iv) for iv in ivs)
        for p, iv in zip(pos, ivs):
            self.leaf_iter_vars[p] = iv

    def _annotate(self, iv: IterVar, kind: ForKind) -> None:
        self._leaf_index(iv)
        self.iter_var_attrs[iv] = kind

    def vectorize(self, iv: IterVar) -> None:
        """Mark a loop for SIMD (``#pragma omp simd`` where OpenMP is on: ``EMBER_SIMD``)."""
        self._annotate(iv, ForKind.VECTORIZED)

    def parallel(self, iv: IterVar) -> None:
        """Run a loop's iterations on threads: hosted builds outline it into a task function
        for ``TVMBackendParallelLaunch`` (ember's thread pool) when it has enough work."""
        self._annotate(iv, ForKind.PARALLEL)

    def unroll(self, iv: IterVar) -> None:
        """Unroll a loop (``#pragma GCC unroll`` where GCC >= 8 or clang: ``EMBER_UNROLL``)."""
        self._annotate(iv, ForKind.UNROLLED)

    def pragma(self, iv: IterVar, pragma_type: str, pragma_value: Any = None) -> None:
        """Annotate loop ``iv`` with ``pragma_<type>`` (shown in the lowered IR).

        "unroll" and "vectorize" change how the loop is emitted; "auto_unroll_max_step" unrolls
        the loops inside ``iv`` whose total step count is at most the value (as TVM's
        UnrollLoop); other keys ("parallel_launch_point"...) are recorded only.
        """
        if not isinstance(pragma_type, str) or not pragma_type:
            raise OpError(f"schedule of {self.op.name}: pragma type must be a non-empty string, "
                          f"got {pragma_type!r}")
        if pragma_type == "auto_unroll_max_step" and not (
                isinstance(pragma_value, int) and pragma_value >= 0):
            raise OpError(f"schedule of {self.op.name}: pragma auto_unroll_max_step needs a "
                          f"non-negative int value, got {pragma_value!r}")
        self._leaf_index(iv)
        kind = {"unroll": ForKind.UNROLLED, "vectorize": ForKind.VECTORIZED}.get(pragma_type)
        if kind is not None:
            self.iter_var_attrs[iv] = kind
        self.pragmas.setdefault(iv, []).append((pragma_type, pragma_value))

    def storage_align(self, axis: IterVar, factor: int, offset: int) -> None:
        """Pad the buffer of this stage so that the stride of dimension ``axis`` is
        ``k * factor + offset`` (TVM's storage_align: avoids cache-set conflicts)."""
        dims = [i for i, a in enumerate(getattr(self.op, "axis", [])) if a is axis]
        if not dims:
            raise OpError(f"schedule of {self.op.name}: storage_align needs one of the stage's "
                          f"own axes (op.axis), got {getattr(axis, 'var', axis)}")
        if not (isinstance(factor, int) and factor > 0 and isinstance(offset, int)
                and 0 <= offset < factor):
            raise OpError(f"schedule of {self.op.name}: storage_align needs factor > 0 and "
                          f"0 <= offset < factor, got factor={factor!r}, offset={offset!r}")
        self.storage_aligns[dims[0]] = (factor, offset)

    def bind(self, iv: IterVar, thread_ivar: Any) -> None:
        """Refused: binding a loop to GPU threads needs a GPU target, and ember has none."""
        tag = getattr(thread_ivar, "thread_tag", "") or getattr(thread_ivar, "var", thread_ivar)
        raise OpError(f"schedule of {self.op.name}: bind({getattr(iv, 'var', iv)}, {tag}) binds a "
                      "loop to GPU threads, but ember compiles for the host CPU only (targets "
                      "'c', 'llvm'); use s[...].parallel(outer_loop) for CPU threads and "
                      "s[...].vectorize(inner_loop) for SIMD instead")

    def set_scope(self, scope: str) -> None:
        """The memory scope of the stage's buffer: "global" or "local" (GPU scopes are
        refused). On the host CPU both are ordinary memory; the scope shows in the lowered IR."""
        from .schedule_cache import check_scope

        self.scope = check_scope(scope, f"set_scope of {self.op.name}")

    def compute_inline(self) -> None:
        """Substitute this stage's expression into its consumers (no buffer, no loops)."""
        if not isinstance(self.op, ComputeOp) or self.op.reduce_axis:
            raise OpError(f"schedule of {self.op.name}: only a compute stage without "
                          "reduction can be inlined")
        self.attach_type = "inline"

    def compute_at(self, parent: Stage, ivar: IterVar) -> None:
        """Compute this stage inside ``parent``'s loop ``ivar``, for the region it needs there."""
        parent._leaf_index(ivar)
        self.attach_type, self.attach_stage, self.attach_ivar = "scope", parent, ivar

    def compute_root(self) -> None:
        self.attach_type, self.attach_stage, self.attach_ivar = "root", None, None


class Schedule:
    """Stages of every operation reachable from ``outputs``, producers first."""

    def __init__(self, outputs: Sequence[Operation]) -> None:
        self.outputs = list(outputs)
        self.stages: list[Stage] = []
        self.stage_map: dict[int, Stage] = {}
        for op in _topo_order(self.outputs):
            st = Stage(op)
            self.stages.append(st)
            self.stage_map[id(op)] = st

    def __getattr__(self, name: str) -> Any:
        err = refuse(unsupported.SCHEDULE, "schedule", name)
        if err is not None:
            raise err
        raise AttributeError(f"'Schedule' object has no attribute {name!r}")

    def cache_read(self, tensor: Tensor, scope: str, readers: Any) -> Tensor:
        """A stage copying ``tensor`` into ``scope``; ``readers`` now read the copy."""
        from .schedule_cache import cache_read

        return cache_read(self, tensor, scope, readers)

    def cache_write(self, tensor: Any, scope: str) -> Any:
        """Compute ``tensor`` into a ``scope`` stage; ``tensor``'s stage then copies it out."""
        from .schedule_cache import cache_write

        return cache_write(self, tensor, scope)

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
        """Factor ``tensor``'s reduction over its reduce loop ``axis`` into a new stage of
        partial results (``<name>.rf``); ``tensor`` then reduces those."""
        from .schedule_rfactor import rfactor

        return rfactor(self, tensor, axis, factor_axis)

    def normalize(self) -> Schedule:
        """Rebase every loop to start at 0: ember's lowering always emits loops from 0 (a
        reduce axis over [m, n) runs its loop over [0, n - m) and adds m in the index), so
        there is nothing left to change; returns the schedule, as TVM's does."""
        return self

    def current(self, t: Tensor) -> Tensor:
        """The tensor that ``t`` stands for now (cache_read/write replace a stage's op)."""
        st = self.stage_map.get(id(t.op))
        return t if st is None else st.op.output(t.value_index)

    def __getitem__(self, key: Tensor | Operation) -> Stage:
        op = key.op if isinstance(key, Tensor) else key
        st = self.stage_map.get(id(op))
        if st is None:
            raise OpError(f"schedule: {op.name} is not part of this schedule")
        return st


def _topo_order(outputs: Sequence[Operation]) -> list[Operation]:
    order: list[Operation] = []
    seen: set[int] = set()
    stack: list[tuple[Operation, bool]] = [(op, False) for op in reversed(list(outputs))]
    while stack:
        op, done = stack.pop()
        if done:
            order.append(op)
            continue
        if id(op) in seen:
            continue
        seen.add(id(op))
        stack.append((op, True))
        for t in reversed(op.input_tensors):
            if id(t.op) not in seen:
                stack.append((t.op, False))
    return order


def thread_axis(dom: Any = None, tag: str = "", name: str = "") -> IterVar:
    """A GPU thread axis (``te.thread_axis("threadIdx.x")``); only ``bind`` takes one, and
    ember refuses it (no GPU target)."""
    if isinstance(dom, str):
        dom, tag = None, dom
    if not tag:
        raise OpError("thread_axis: needs a thread tag such as 'threadIdx.x'")
    rng = None
    if dom is not None:
        lo, hi = dom
        rng = Range.from_min_extent(lo, hi - lo)
    return IterVar(rng, Var(name or tag), IterVar.ThreadIndex, tag)


def create_schedule(ops: Any) -> Schedule:
    """A default schedule (every stage at root, loops in axis order) for ``ops``."""
    if not isinstance(ops, (list, tuple)):
        ops = [ops]
    return Schedule([o.op if isinstance(o, Tensor) else o for o in ops])

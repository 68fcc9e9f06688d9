"""Lowering ``te.scan`` (see :mod:`ember.te.scan`) inside :class:`ember.te.lower.Lowerer`.

A scan's ``init`` and ``update`` stages write straight into the scan's output buffer, and its
state placeholders are that buffer too. ``init`` is computed first, over its own steps; then
one serial loop runs over the update steps, with every ``update`` computed inside it for that
one step (its time axis has a region of extent 1 at the step, as a ``compute_at`` stage
would). Stages between a state and an update (a multi-stage scan body) are inlined into the
update, so each step reads exactly the steps written before it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..runtime.errors import OpError
from ..tir import op as _op
from ..tir.expr import Var
from ..tir.simplify import bound, simplify
from ..tir.stmt import For, ForKind, Stmt, seq
from .scan import ScanOp
from .tensor import ComputeOp, Tensor

if TYPE_CHECKING:
    from .lower import Lowerer
    from .schedule import Schedule


class ScanPlan:
    """The scans of a schedule: which tensors alias a scan's output, and which stages the
    scan lowers itself (``parts``) or inlines (``body``)."""

    def __init__(self, sch: Schedule) -> None:
        self.scans: list[ScanOp] = [st.op for st in sch.stages if isinstance(st.op, ScanOp)]
        self.output_of: dict[int, Tensor] = {}  # id of a state/init/update tensor -> output
        self.parts: set[int] = set()  # ids of init and update ops
        self.states: set[int] = set()  # ids of state placeholder ops
        for op in self.scans:
            for i, out in enumerate(op._outputs):
                for t in (op.state_placeholder[i], op.init[i], op.update[i]):
                    self.output_of[id(t)] = out
            self.parts |= {id(t.op) for t in (*op.init, *op.update)}
            self.states |= {id(t.op) for t in op.state_placeholder}
        self.body = self._body_stages(sch) if self.scans else set()

    def _body_stages(self, sch: Schedule) -> set[int]:
        # Stages (producers first) that read a state, directly or through another such stage.
        reads_state: set[int] = set(self.states)
        body: set[int] = set()
        for st in sch.stages:
            op = st.op
            if isinstance(op, ScanOp) or not any(id(t.op) in reads_state
                                                 for t in op.input_tensors):
                continue
            reads_state.add(id(op))
            if id(op) in self.parts:
                continue
            if not isinstance(op, ComputeOp) or op.reduce_axis:
                raise OpError(f"te.scan: stage {op.name} reads a scan state but is not an "
                              "elementwise te.compute; ember inlines the stages of a scan body "
                              "into its update, so write it without a reduction or extern")
            body.add(id(op))
        return body


def lower_scan(lw: Lowerer, op: ScanOp) -> Stmt:
    """``init`` stages, then the serial loop over the update steps (see the module doc)."""
    parts = []
    for t in op.init:
        lw.region[id(t.op)] = [(_op.const(0), s) for s in t.shape]
        parts.append(lw.stage_stmt(lw.sch[t.op]))
    step = Var(op.scan_axis.var.name, "int32")
    lo, extent = op.scan_axis.dom.min, op.scan_axis.dom.extent
    _, hi = bound(extent, lw.ranges)
    lw.ranges[step] = (0, hi - 1 if hi is not None else None)
    updates = []
    for t in op.update:
        _check_time_axis(lw, op, t)
        lw.region[id(t.op)] = [(simplify(lo + step, lw.ranges), _op.const(1))] + [
            (_op.const(0), s) for s in t.shape[1:]]
        lw.absolute_store.add(id(t.op))
        updates.append(lw.stage_stmt(lw.sch[t.op]))
    return seq(*parts, For(step, _op.const(0), extent, ForKind.SERIAL, seq(*updates)))


def _check_time_axis(lw: Lowerer, op: ScanOp, t: Tensor) -> None:
    st = lw.sch[t.op]
    time = t.op.axis[0]
    leaves: list[Any] = st.leaf_iter_vars
    if not leaves or leaves[0] is not time or any(
            getattr(rel, "parent", None) is time or getattr(rel, "outer", None) is time
            for rel in st.relations):
        raise OpError(f"te.scan {op.name}: the time axis {time.var.name} of update "
                      f"{t.op.name} must stay its outermost loop, unsplit (schedule its other "
                      "axes instead)")
    if st.iter_var_attrs.get(time, ForKind.SERIAL) != ForKind.SERIAL:
        raise OpError(f"te.scan {op.name}: the time axis {time.var.name} of update "
                      f"{t.op.name} carries the recurrence and must stay serial")

"""``te.scan``: a recurrence over the first axis of a state, as TVM's ScanOp.

    s_state = te.placeholder((m, n))                                  the state, read back
    s_init = te.compute((1, n), lambda _, i: X[0, i])                 steps [0, 1)
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    s_scan = te.scan(s_init, s_update, s_state, inputs=[X])          cumulative sum over axis 0

The result has the state's shape. Its first ``init.shape[0]`` steps are ``init``; every later
step ``t`` is ``update`` at ``t``, which may read the steps before ``t`` through the state
placeholder. Lowering (``ember.te.lower_scan``) computes ``init`` into the result's buffer,
then runs one serial loop over the remaining steps with each ``update`` computed inside it
for its step, so a state read is a load of the result's buffer. Several states (lists of the
same length) advance in the same loop, so each update may read any state.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..runtime.errors import OpError
from ..tir import op as _op
from ..tir.expr import Var
from ..tir.simplify import simplify
from .tensor import ComputeOp, IterVar, Operation, PlaceholderOp, Range, Tensor


class ScanOp(Operation):
    """The scan stage: outputs of the states' shapes; ``scan_axis`` runs over the update steps.

    It has no loops of its own to schedule: schedule ``init`` and ``update`` (split,
    vectorize, parallel their inner axes); the time axis of an update stays its outer loop.
    """

    def __init__(self, name: str, tag: str, attrs: dict, scan_axis: IterVar, init: list[Tensor],
                 update: list[Tensor], state_placeholder: list[Tensor],
                 inputs: list[Tensor]) -> None:
        self.name, self.tag, self.attrs = name, tag, dict(attrs or {})
        self.scan_axis, self.init, self.update = scan_axis, init, update
        self.state_placeholder, self.inputs = state_placeholder, inputs
        self.axis: list[IterVar] = []
        self.reduce_axis: list[IterVar] = []
        self._outputs = [Tensor(self, i, s.shape, s.dtype) for i, s in enumerate(state_placeholder)]

    @property
    def input_tensors(self) -> list[Tensor]:
        return [*self.init, *self.update]


def _as_list(x: Any, what: str) -> list[Tensor]:
    items = list(x) if isinstance(x, (list, tuple)) else [x]
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise OpError(f"te.scan: {what}[{i}] must be a te tensor, got {type(t).__name__}")
    return items


def _same(a: Any, b: Any) -> bool:
    return str(simplify(_op.convert(a) - _op.convert(b))) == "0"


def _typed(t: Tensor) -> str:
    return f"{t.dtype}[{', '.join(map(str, t.shape))}]"


def _check_state(k: int, init: Tensor, update: Tensor, state: Tensor) -> None:
    where = f"te.scan: state {k} ({state.name})"
    if not isinstance(state.op, PlaceholderOp):
        raise OpError(f"{where} must be a te.placeholder, got the output of {state.op.name}")
    if state.ndim < 1:
        raise OpError(f"{where} needs at least one axis (the time axis), got a scalar")
    for what, t in (("init", init), ("update", update)):
        if not isinstance(t.op, ComputeOp) or t.op.reduce_axis:
            raise OpError(f"{where}: {what} {t.name} must be a te.compute without a reduction")
        if t.ndim != state.ndim or t.dtype != state.dtype:
            raise OpError(f"{where}: {what} {t.name} is {_typed(t)} but the state is "
                          f"{_typed(state)}; they must agree in rank, dtype and every axis but "
                          "the first")
        for d in range(1, state.ndim):
            if not _same(t.shape[d], state.shape[d]):
                raise OpError(f"{where}: {what} {t.name} has {t.shape[d]} at axis {d}, the "
                              f"state has {state.shape[d]}")
    if not _same(update.shape[0], state.shape[0]):
        raise OpError(f"{where}: update {update.name} has {update.shape[0]} steps, the state "
                      f"has {state.shape[0]}; they must be equal")


def scan(init: Any, update: Any, state_placeholder: Any, inputs: Sequence[Tensor] | None = None,
         name: str = "scan", tag: str = "", attrs: dict | None = None) -> Any:
    """The recurrence ``out[:len(init)] = init; out[t] = update[t]`` (reading earlier steps
    through ``state_placeholder``). Tensors or lists of them (one per state); returns one
    tensor or a list. Raises OpError when the three disagree in count, rank, dtype or shape.
    """
    inits, updates = _as_list(init, "init"), _as_list(update, "update")
    states = _as_list(state_placeholder, "state_placeholder")
    if not (len(inits) == len(updates) == len(states)) or not states:
        raise OpError(f"te.scan: init, update and state_placeholder must be lists of the same, "
                      f"non-zero length, got {len(inits)}, {len(updates)} and {len(states)}")
    for k, (i, u, s) in enumerate(zip(inits, updates, states)):
        _check_state(k, i, u, s)
    for k in range(1, len(inits)):
        if not _same(inits[k].shape[0], inits[0].shape[0]):
            raise OpError(f"te.scan: every init must have the same number of steps; init 0 has "
                          f"{inits[0].shape[0]}, init {k} has {inits[k].shape[0]}")
    lo, hi = inits[0].shape[0], updates[0].shape[0]
    axis = IterVar(Range(lo, simplify(hi - lo)), Var(f"{name}.idx", "int32"), IterVar.Ordered)
    op = ScanOp(name, tag, attrs or {}, axis, inits, updates, states,
                _as_list(inputs or [], "inputs"))
    return op._outputs if isinstance(state_placeholder, (list, tuple)) else op.output(0)

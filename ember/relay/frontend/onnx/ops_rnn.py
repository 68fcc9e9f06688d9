"""Converters of the recurrent operators LSTM, GRU and RNN (one layer each).

A float32 node whose activations the recurrent kernel has (Sigmoid, Tanh, Relu, LeakyRelu,
HardSigmoid) becomes one ``nn.lstm``/``nn.gru``/``nn.rnn`` call (``_kernel_layer``): one C
kernel for the whole sequence, any length, static or symbolic, on every executor. The rest
(other activations or dtypes, or the PassContext config ``relay.frontend.rnn_kernel`` False)
runs step by step, as follows.

Per direction and gate, the input projection of every time step is one matrix product,
``X (seq, batch, input) x W^T + bias`` (``nn.dense``: FuseGemmEpilogue runs it on the
packed-weight GEMM kernel with the bias in its epilogue). Each step then computes one product
of the hidden state with ``R^T`` (a GEMM too, ``R`` packed once) and the gate math, which
reads the step's slice of each gate's projection and which FuseOps fuses into one or two
elementwise kernels after the GEMM. A plain RNN's one gate goes entirely into the GEMM's
epilogue (the step's input as its residual, then the activation). The steps run through
``_recurrence.recur``: unrolled for a known sequence length, a loop on the VM for a symbolic
(or longer) one.

ONNX semantics (https://onnx.ai/onnx/operators/onnx__LSTM.html and GRU, RNN):

- gate order iofc (LSTM), zrh (GRU); ``B`` is ``[Wb, Rb]``; all biases but GRU's ``Rbh``
  under ``linear_before_reset=1`` are folded into the input projection;
- ``direction`` forward, reverse or bidirectional (both run in the same steps);
- ``sequence_lens``: a sequence's outputs past its length are 0 and ``Y_h``/``Y_c`` hold its
  state at its last valid step (0 for an empty sequence, as in onnxruntime); the reverse
  direction starts at each sequence's own last step (the inputs are permuted per sequence,
  and the outputs back);
- ``activations`` (case-insensitive) with ``activation_alpha``/``activation_beta`` consumed
  in order by the activations that take them, defaults those of the ONNX operators of the
  same names; ``clip`` bounds the input of every activation; ``layout`` 1 puts the batch
  first; LSTM's ``input_forget`` (f = 1 - i) and peepholes ``P`` (order iof).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....ir.expr import RelayExpr, const
from ....ir.types import TensorType
from ....topi.nn import rnn_kernel
from ... import op as _op
from ._node import Node
from ._recurrence import Dim, Step, arange, recur, use_kernel, zeros
from ._util import scalar
from .ops_math import softplus_expr

Act = Callable[[RelayExpr], RelayExpr]


# ---------------------------------------------------------------- activations
@dataclass(frozen=True)
class ActivationDef:
    """One activation the RNN operators name: how many of alpha/beta it reads, their
    defaults (None: required) and the Relay expression."""

    params: int
    defaults: tuple[float | None, float | None]
    build: Callable[[RelayExpr, float, float, str], RelayExpr]


def _affine(x: RelayExpr, a: float, b: float, dt: str) -> RelayExpr:
    return _op.add(_op.multiply(x, scalar(a, dt)), scalar(b, dt))


ACTIVATIONS: dict[str, ActivationDef] = {
    "relu": ActivationDef(0, (None, None), lambda x, a, b, dt: _op.nn.relu(x)),
    "tanh": ActivationDef(0, (None, None), lambda x, a, b, dt: _op.tanh(x)),
    "sigmoid": ActivationDef(0, (None, None), lambda x, a, b, dt: _op.sigmoid(x)),
    "affine": ActivationDef(2, (1.0, 0.0), _affine),
    "leakyrelu": ActivationDef(1, (0.01, None), lambda x, a, b, dt: _op.nn.leaky_relu(x, a)),
    "thresholdedrelu": ActivationDef(1, (1.0, None), lambda x, a, b, dt: _op.where(
        _op.greater(x, scalar(a, dt)), x, scalar(0, dt))),
    "scaledtanh": ActivationDef(2, (None, None), lambda x, a, b, dt: _op.multiply(
        scalar(a, dt), _op.tanh(_op.multiply(x, scalar(b, dt))))),
    "hardsigmoid": ActivationDef(2, (0.2, 0.5), lambda x, a, b, dt: _op.clip(
        _affine(x, a, b, dt), 0.0, 1.0)),
    "elu": ActivationDef(1, (1.0, None), lambda x, a, b, dt: _op.where(
        _op.greater_equal(x, scalar(0, dt)), x,
        _op.multiply(scalar(a, dt), _op.subtract(_op.exp(x), scalar(1, dt))))),
    "softsign": ActivationDef(0, (None, None), lambda x, a, b, dt: _op.divide(
        x, _op.add(scalar(1, dt), _op.abs(x)))),
    "softplus": ActivationDef(0, (None, None), lambda x, a, b, dt: softplus_expr(x, dt)),
}
_NAMES = "Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, " \
    "Elu, Softsign, Softplus"


def _activation_specs(node: Node, defaults: Sequence[str], directions: int
                      ) -> list[tuple[str, float, float]]:
    """(name in lower case, alpha, beta) of each activation of ``activations`` (or the
    defaults), per direction in turn, alpha/beta taken in order from
    ``activation_alpha``/``activation_beta``."""
    n = len(defaults)
    names = list(node.attr("activations", [])) or list(defaults) * directions
    if len(names) == n and directions == 2:  # onnxruntime accepts one list for both
        names = names * 2
    if len(names) != n * directions:
        raise node.invalid_attr("activations", names, f"{n * directions} names ({n} per "
                                "direction)")
    alphas = [float(a) for a in node.attr("activation_alpha", [])]
    betas = [float(b) for b in node.attr("activation_beta", [])]
    out = []
    for k, name in enumerate(names):
        spec = ACTIVATIONS.get(str(name).lower())
        if spec is None:
            raise node.unsupported(f"activations[{k}] is {name!r}, not one of {_NAMES}")
        a = alphas.pop(0) if spec.params >= 1 and alphas else spec.defaults[0]
        b = betas.pop(0) if spec.params >= 2 and betas else spec.defaults[1]
        if spec.params and (a is None or (spec.params == 2 and b is None)):
            raise node.unsupported(f"activations[{k}] {name!r} needs its alpha and beta in "
                                   "activation_alpha/activation_beta (ONNX gives no default)")
        out.append((str(name).lower(), a or 0.0, b or 0.0))
    return out


def _activations(node: Node, defaults: Sequence[str], directions: int, dtype: str
                 ) -> list[list[Act]]:
    """Per direction, the activation functions of :func:`_activation_specs`."""
    n = len(defaults)
    acts = [_bound(ACTIVATIONS[name], a, b, dtype)
            for name, a, b in _activation_specs(node, defaults, directions)]
    return [acts[d * n:(d + 1) * n] for d in range(directions)]


def _bound(spec: ActivationDef, a: float, b: float, dtype: str) -> Act:
    return lambda x: spec.build(x, a, b, dtype)


# ---------------------------------------------------------------- the operator's inputs
@dataclass(frozen=True)
class Rnn:
    """What a converter reads of an LSTM/GRU/RNN node, in layout 0 (time first)."""

    node: Node
    batch_first: bool  # layout 1: inputs and outputs are transposed at the edges
    gates: int
    hidden: int
    reverse: list[bool]  # per direction
    acts: list[list[Act]]
    clip: float | None
    x: RelayExpr  # (seq, batch, input)
    seq: Dim
    batch: Dim
    dtype: str
    lens: RelayExpr | None  # (batch,) int64

    def cut(self, v: RelayExpr, d: int) -> RelayExpr:
        """Direction ``d`` of a per-direction input (its first axis removed)."""
        return _op.take(v, const(np.array(d, "int64")), axis=0)

    def cut_state(self, v: RelayExpr, d: int) -> RelayExpr:
        """Direction ``d`` of a (dirs, batch, hidden) state: (1, batch, hidden)."""
        return _op.strided_slice(v, [d], [d + 1], axes=[0])

    def gate(self, v: RelayExpr, k: int) -> RelayExpr:
        """Gate ``k`` (``hidden`` wide) along the last axis of ``v``."""
        ndim = self.node.type_of(v).ndim
        return _op.strided_slice(v, [k * self.hidden], [(k + 1) * self.hidden], axes=[ndim - 1])

    def clipped(self, v: RelayExpr) -> RelayExpr:
        return v if self.clip is None else _op.clip(v, -self.clip, self.clip)

    def zero(self) -> RelayExpr:
        return scalar(0, self.dtype)

    def one(self) -> RelayExpr:
        return scalar(1, self.dtype)


def _fits(ty: TensorType, shape: Sequence[Any]) -> bool:
    """Whether ``ty`` has the rank of ``shape`` and its sizes where both are known."""
    return ty.ndim == len(shape) and all(
        not (isinstance(a, int) and isinstance(b, int)) or a == b for a, b in zip(ty.shape, shape))


def _read(node: Node, gates: int, defaults: Sequence[str]) -> Rnn:
    x, xt = node.input(0, "X"), node.type(0)
    if xt.ndim != 3 or not xt.dtype.startswith("float"):
        raise node.fail(f"X must be a float tensor of rank 3, got {xt}")
    layout = node.attr("layout", 0) if node.version >= 14 else 0
    if layout not in (0, 1):
        raise node.invalid_attr("layout", layout, "0 or 1")
    if layout == 1:
        x = _op.transpose(x, (1, 0, 2))
    # sizes computed by the ops before (a pooled width) get names whose source is x
    seq, batch, inputs = node.scope.importer.sizes.elems_of(x, node.type_of(x))
    direction = node.attr("direction", "forward")
    reverse = {"forward": [False], "foward": [False], "reverse": [True],
               "bidirectional": [False, True]}.get(direction)
    if reverse is None:
        raise node.invalid_attr("direction", direction, "forward, reverse or bidirectional")
    hidden = _hidden_size(node, gates, len(reverse), inputs)
    clip = node.attr("clip", None)
    if clip is not None and not float(clip) > 0:
        raise node.invalid_attr("clip", clip, "a positive threshold")
    acts = _activations(node, defaults, len(reverse), xt.dtype)
    lens = None
    if node.has_input(4):
        if not node.dtype(4).startswith("int") or node.ndim(4) != 1:
            raise node.fail(f"sequence_lens must be an integer vector, got {node.type(4)}")
        lens = _op.cast(node.input(4), "int64")
    return Rnn(node, layout == 1, gates, hidden, reverse, acts,
               None if clip is None else float(clip), x, seq, batch, xt.dtype, lens)


def _hidden_size(node: Node, gates: int, dirs: int, inputs: Any) -> int:
    """hidden_size, checked against the shapes of W, R and B."""
    w, r = node.type(1), node.type(2)
    if w.ndim != 3 or r.ndim != 3 or not isinstance(r.shape[2], int):
        raise node.fail(f"W and R must have rank 3 with a known hidden size, got W {w.shape} "
                        f"and R {r.shape}")
    hidden = int(node.attr("hidden_size", r.shape[2]))
    want = {"W": (w, (dirs, gates * hidden, inputs)), "R": (r, (dirs, gates * hidden, hidden))}
    if node.has_input(3):
        want["B"] = (node.type(3), (dirs, 2 * gates * hidden))
    for name, (ty, shape) in want.items():
        if not _fits(ty, shape):
            raise node.fail(f"{name} has shape {tuple(ty.shape)}, expected {shape} "
                            f"({dirs} direction(s), {gates} gate(s), hidden_size {hidden})")
    return hidden


def _state(rnn: Rnn, i: int, what: str) -> list[RelayExpr]:
    """Per direction, the initial state input ``i`` ((dirs, batch, hidden); batch first in
    layout 1) as (1, batch, hidden), zeros when absent. (States keep a unit time axis, as a
    step's slice of the input projection does: no reshape between steps.)"""
    node = rnn.node
    dirs = len(rnn.reverse)
    if not node.has_input(i):
        return [zeros(node, (1, rnn.batch, rnn.hidden), rnn.dtype)] * dirs
    v = node.input(i, what)
    if rnn.batch_first:
        v = _op.transpose(v, (1, 0, 2))
    want = (dirs, rnn.batch, rnn.hidden)
    if not _fits(node.type_of(v), want):
        raise node.fail(f"{what} has shape {tuple(node.type(i).shape)}, expected "
                        f"(num_directions, batch, hidden) = {want} in layout 0")
    return [rnn.cut_state(v, d) for d in range(dirs)]


# ---------------------------------------------------------------- time permutation
def _reverse_within_lengths(rnn: Rnn, lens: RelayExpr) -> Callable[[RelayExpr], RelayExpr]:
    """A function permuting a (seq, batch, n) tensor so that each sequence's valid steps run
    backwards (``out[t, b] = v[lens[b] - 1 - t, b]`` for t < lens[b], else ``v[t, b]``): the
    reverse direction of a batch of sequences of different lengths."""
    t = _op.expand_dims(arange(rnn.node, rnn.seq), 1)  # (seq, 1)
    back = _op.subtract(_op.subtract(lens, _long(1)), t)
    idx = _op.expand_dims(_op.where(_op.less(t, lens), back, t), 2)  # (seq, batch, 1)

    def permute(v: RelayExpr) -> RelayExpr:
        return _op.gather(v, 0, _op.broadcast_to_like(idx, v))

    return permute


# ---------------------------------------------------------------- the common driver
@dataclass(frozen=True)
class CellKind:
    """One recurrent operator: gates, states, default activations and its step."""

    gates: int
    states: int  # 2 for LSTM (h, c), else 1
    activations: tuple[str, ...]
    # (rnn, direction) -> (bias added to the input projection, extra cell inputs)
    prepare: Callable[[Rnn, int], tuple[RelayExpr | None, Any]]
    cell: Callable[[Rnn, Any, list[RelayExpr], list[RelayExpr]], list[RelayExpr]]


def _bias_halves(rnn: Rnn, d: int) -> tuple[RelayExpr, RelayExpr] | None:
    """(Wb, Rb) of direction ``d``, or None without B."""
    if not rnn.node.has_input(3):
        return None
    b = rnn.cut(rnn.node.input(3, "B"), d)
    n = rnn.gates * rnn.hidden
    return (_op.strided_slice(b, [0], [n], axes=[0]),
            _op.strided_slice(b, [n], [2 * n], axes=[0]))


def _project(rnn: Rnn, x: RelayExpr, w: RelayExpr, bias: RelayExpr | None) -> list[RelayExpr]:
    """Per gate, ``x W^T + bias`` for every time step at once: (seq, batch, hidden). One
    product per gate, so that a step reads each gate's input where its gate math runs (a
    step's slice of one (seq, batch, gates * hidden) product would be a copy of its own)."""
    out = []
    for k in range(rnn.gates):
        rows = _op.strided_slice(w, [k * rnn.hidden], [(k + 1) * rnn.hidden], axes=[0])
        xp = _op.nn.dense(x, rows)
        out.append(xp if bias is None else _op.add(xp, rnn.gate(bias, k)))
    return out


def convert(node: Node, kind: CellKind) -> list[RelayExpr | None]:
    rnn = _read(node, kind.gates, kind.activations)
    layer = _kernel_layer(rnn, kind)
    if layer is not None:
        return layer
    dirs = len(rnn.reverse)
    w = node.input(1, "W")
    permute = None
    if rnn.lens is not None and any(rnn.reverse):
        permute = _reverse_within_lengths(rnn, rnn.lens)
    projected, extras = [], []
    for d in range(dirs):
        bias, extra = kind.prepare(rnn, d)
        x = permute(rnn.x) if permute is not None and rnn.reverse[d] else rnn.x
        projected.append(_project(rnn, x, rnn.cut(w, d), bias))
        extras.append(extra)
    inits = [_state(rnn, 5, "initial_h")]
    if kind.states == 2:
        inits.append(_state(rnn, 6, "initial_c"))
    states = [inits[s][d] for d in range(dirs) for s in range(kind.states)]
    want_y = node.wants_output(0)
    walk_back = [rev and rnn.lens is None for rev in rnn.reverse]

    def step(t: Step, flat: list[RelayExpr]) -> tuple[list[RelayExpr], list[RelayExpr]]:
        new, outs = [], []
        mask = None
        if rnn.lens is not None:
            mask = _per_sequence(_op.less(t.index("int64"), rnn.lens))
        for d in range(dirs):
            old = flat[d * kind.states:(d + 1) * kind.states]
            x_t = [t.read(xp, 0, walk_back[d], keep=True) for xp in projected[d]]
            cand = kind.cell(rnn, (d, extras[d]), x_t, old)
            if mask is not None:
                outs.append(_op.where(mask, cand[0], rnn.zero()))
                cand = [_op.where(mask, c, o) for c, o in zip(cand, old)]
            else:
                outs.append(cand[0])
            new.extend(cand)
        return new, outs if want_y else []

    finals, ys = recur(node, rnn.x, 0, states, step, walk_back)
    if rnn.lens is not None:  # an empty sequence's final states are 0, as in onnxruntime
        nonempty = _per_sequence(_op.greater(rnn.lens, _long(0)))
        finals = [_op.where(nonempty, f, rnn.zero()) for f in finals]
    return _outputs(rnn, kind, finals, ys, permute)


# ---------------------------------------------------------------- the one-kernel form
_CELLS = {4: "lstm", 3: "gru", 1: "rnn"}  # by gate count


def _kernel_layer(rnn: Rnn, kind: CellKind) -> list[RelayExpr | None] | None:
    """The layer as one ``nn.lstm``/``nn.gru``/``nn.rnn`` call (one C kernel for the whole
    sequence, any length, static or symbolic), or None where that op does not cover the node:
    a dtype other than float32, an activation the kernel lacks (Affine, ThresholdedRelu,
    ScaledTanh, Elu, Softsign, Softplus), or the PassContext config
    ``relay.frontend.rnn_kernel`` set to False."""
    node, dirs = rnn.node, len(rnn.reverse)
    if rnn.dtype != "float32" or not use_kernel():
        return None
    specs = _activation_specs(node, kind.activations, dirs)
    if any(name not in rnn_kernel.ACTIVATIONS for name, _, _ in specs):
        return None
    cell = _CELLS[kind.gates]
    kind.prepare(rnn, 0)  # the cell's own attribute and input checks
    lbr = cell == "gru" and bool(node.attr("linear_before_reset", 0) if node.version >= 3
                                 else 0)
    bias, extra = _kernel_biases(rnn, cell, lbr)
    if cell == "lstm" and node.has_input(7):
        extra = node.input(7, "P")
    h0 = _kernel_state(rnn, 5, "initial_h")
    c0 = _kernel_state(rnn, 6, "initial_c") if cell == "lstm" else None
    direction = "bidirectional" if dirs == 2 else ("reverse" if rnn.reverse[0] else "forward")
    out = _op.nn.recurrent_layer(
        cell, rnn.x, node.input(1, "W"), node.input(2, "R"), bias, extra, h0, c0, rnn.lens,
        hidden_size=rnn.hidden,
        direction=direction, activations=tuple(n for n, _, _ in specs),
        activation_alpha=tuple(a for _, a, _ in specs),
        activation_beta=tuple(b for _, _, b in specs), clip=rnn.clip or 0.0,
        **({"linear_before_reset": lbr} if cell == "gru" else {}),
        **({"input_forget": bool(node.attr("input_forget", 0))} if cell == "lstm" else {}))
    y = out[0]
    if rnn.batch_first:
        y = _op.transpose(y, (2, 0, 1, 3))
    states = [out[1 + s] for s in range(kind.states)]
    if rnn.batch_first:
        states = [_op.transpose(v, (1, 0, 2)) for v in states]
    return [y if node.wants_output(0) else None, *states]


def _kernel_biases(rnn: Rnn, cell: str, lbr: bool) -> tuple[RelayExpr, RelayExpr | None]:
    """The bias of the input projection (dirs, G * H) and GRU's Rbh (dirs, H) under
    linear_before_reset (else None)."""
    node, dirs, size = rnn.node, len(rnn.reverse), rnn.hidden
    n = rnn.gates * size
    if not node.has_input(3):
        return const(np.zeros((dirs, n), rnn.dtype)), None
    b = node.input(3, "B")
    wb = _op.strided_slice(b, [0], [n], axes=[1])
    rb = _op.strided_slice(b, [n], [2 * n], axes=[1])
    if not lbr:
        return _op.add(wb, rb), None
    rb_zr = _op.strided_slice(rb, [0], [2 * size], axes=[1])
    moved = _op.concatenate([rb_zr, const(np.zeros((dirs, size), rnn.dtype))], 1)
    return _op.add(wb, moved), _op.strided_slice(rb, [2 * size], [3 * size], axes=[1])


def _kernel_state(rnn: Rnn, i: int, what: str) -> RelayExpr | None:
    """Initial state input ``i`` as (dirs, batch, hidden) (time-first layout), or None."""
    node = rnn.node
    if not node.has_input(i):
        return None
    v = node.input(i, what)
    if rnn.batch_first:
        v = _op.transpose(v, (1, 0, 2))
    want = (len(rnn.reverse), rnn.batch, rnn.hidden)
    if not _fits(node.type_of(v), want):
        raise node.fail(f"{what} has shape {tuple(node.type(i).shape)}, expected "
                        f"(num_directions, batch, hidden) = {want} in layout 0")
    return v


def _long(value: int) -> RelayExpr:
    return const(np.array(value, "int64"))


def _per_sequence(flags: RelayExpr) -> RelayExpr:
    """A (batch,) mask shaped (1, batch, 1), to select between (1, batch, hidden) states."""
    return _op.expand_dims(_op.expand_dims(flags, 1), 0)


def _outputs(rnn: Rnn, kind: CellKind, finals: list[RelayExpr], ys: list[RelayExpr],
             permute: Callable[[RelayExpr], RelayExpr] | None) -> list[RelayExpr | None]:
    """Y (seq, dirs, batch, hidden), Y_h and Y_c (dirs, batch, hidden), batch first in
    layout 1."""
    dirs = len(rnn.reverse)
    y = None
    if ys:  # each (seq, 1, batch, hidden)
        if permute is not None:
            ys = [_op.expand_dims(permute(_op.squeeze(v, [1])), 1) if rnn.reverse[d]
                  else v for d, v in enumerate(ys)]
        y = ys[0] if dirs == 1 else _op.concatenate(ys, 1)
        if rnn.batch_first:
            y = _op.transpose(y, (2, 0, 1, 3))
    outs: list[RelayExpr | None] = [y]
    for s in range(kind.states):  # each (1, batch, hidden)
        parts = [finals[d * kind.states + s] for d in range(dirs)]
        last = parts[0] if dirs == 1 else _op.concatenate(parts, 0)
        outs.append(_op.transpose(last, (1, 0, 2)) if rnn.batch_first else last)
    return outs


# ---------------------------------------------------------------- the cells
def _gate_inputs(rnn: Rnn, h: RelayExpr, r: RelayExpr, x_t: list[RelayExpr]
                 ) -> list[RelayExpr]:
    """Per gate, ``x_t + h R^T``: one GEMM for every gate, then each gate's slice of it plus
    the step's input of that gate, in the elementwise kernels of the gate math (which read
    the step's inputs where they are)."""
    rec = _op.nn.dense(h, r)
    return [_op.add(rnn.gate(rec, k), x) for k, x in enumerate(x_t)]


def _lstm_prepare(rnn: Rnn, d: int) -> tuple[RelayExpr | None, Any]:
    node = rnn.node
    halves = _bias_halves(rnn, d)
    bias = None if halves is None else _op.add(*halves)
    peep = None
    if node.has_input(7):
        p = node.input(7, "P")
        if not _fits(node.type(7), (len(rnn.reverse), 3 * rnn.hidden)):
            raise node.fail(f"P has shape {tuple(node.type(7).shape)}, expected "
                            f"{(len(rnn.reverse), 3 * rnn.hidden)}")
        pd = rnn.cut(p, d)
        size = rnn.hidden
        peep = [_op.strided_slice(pd, [k * size], [(k + 1) * size], axes=[0]) for k in range(3)]
    if node.attr("input_forget", 0) not in (0, 1):
        raise node.invalid_attr("input_forget", node.attr("input_forget"), "0 or 1")
    return bias, (rnn.cut(node.input(2, "R"), d), peep)


def _lstm_cell(rnn: Rnn, where: Any, x_t: list[RelayExpr],
               old: list[RelayExpr]) -> list[RelayExpr]:
    d, (r, peep) = where
    h, c = old
    f_act, g_act, h_act = rnn.acts[d]
    i, o, f, cand = _gate_inputs(rnn, h, r, x_t)

    def peeped(v: RelayExpr, k: int, state: RelayExpr) -> RelayExpr:
        return v if peep is None else _op.add(v, _op.multiply(peep[k], state))

    i = f_act(rnn.clipped(peeped(i, 0, c)))
    if rnn.node.attr("input_forget", 0):
        f = _op.subtract(rnn.one(), i)
    else:
        f = f_act(rnn.clipped(peeped(f, 2, c)))
    c_new = _op.add(_op.multiply(f, c), _op.multiply(i, g_act(rnn.clipped(cand))))
    o = f_act(rnn.clipped(peeped(o, 1, c_new)))
    return [_op.multiply(o, h_act(c_new)), c_new]


def _gru_prepare(rnn: Rnn, d: int) -> tuple[RelayExpr | None, Any]:
    """Input bias: Wb + Rb, but for Rbh under linear_before_reset (it is multiplied by r,
    so it goes to the recurrent product)."""
    node = rnn.node
    lbr = node.attr("linear_before_reset", 0) if node.version >= 3 else 0
    if lbr not in (0, 1):
        raise node.invalid_attr("linear_before_reset", lbr, "0 or 1")
    r = rnn.cut(node.input(2, "R"), d)
    halves = _bias_halves(rnn, d)
    rec_bias = None
    bias = None
    if halves is not None:
        wb, rb = halves
        if lbr:  # Rbh stays in the recurrent product (a bias of its GEMM), the rest moves
            zeros = _op.zeros((2 * rnn.hidden,), rnn.dtype)
            rb_zr = _op.strided_slice(rb, [0], [2 * rnn.hidden], axes=[0])
            rb_h = _op.strided_slice(rb, [2 * rnn.hidden], [3 * rnn.hidden], axes=[0])
            bias = _op.add(wb, _op.concatenate([rb_zr, _op.zeros((rnn.hidden,), rnn.dtype)], 0))
            rec_bias = _op.concatenate([zeros, rb_h], 0)
        else:
            bias = _op.add(wb, rb)
    return bias, (bool(lbr), r, rec_bias)


def _gru_cell(rnn: Rnn, where: Any, x_t: list[RelayExpr],
               old: list[RelayExpr]) -> list[RelayExpr]:
    d, (lbr, r, rec_bias) = where
    (h,) = old
    f_act, g_act = rnn.acts[d]
    size = rnn.hidden
    if lbr:
        rec = _op.nn.dense(h, r)
        if rec_bias is not None:
            rec = _op.add(rec, rec_bias)
        z = f_act(rnn.clipped(_op.add(x_t[0], rnn.gate(rec, 0))))
        reset = f_act(rnn.clipped(_op.add(x_t[1], rnn.gate(rec, 1))))
        pre = _op.add(x_t[2], _op.multiply(reset, rnn.gate(rec, 2)))
    else:
        r_zr = _op.strided_slice(r, [0], [2 * size], axes=[0])
        r_h = _op.strided_slice(r, [2 * size], [3 * size], axes=[0])
        z, reset = (f_act(rnn.clipped(v)) for v in _gate_inputs(rnn, h, r_zr, x_t[:2]))
        pre = _op.add(_op.nn.dense(_op.multiply(reset, h), r_h), x_t[2])
    hh = g_act(rnn.clipped(pre))
    return [_op.add(_op.multiply(_op.subtract(rnn.one(), z), hh), _op.multiply(z, h))]


def _rnn_prepare(rnn: Rnn, d: int) -> tuple[RelayExpr | None, Any]:
    halves = _bias_halves(rnn, d)
    return (None if halves is None else _op.add(*halves)), rnn.cut(rnn.node.input(2, "R"), d)


def _rnn_cell(rnn: Rnn, where: Any, x_t: list[RelayExpr],
               old: list[RelayExpr]) -> list[RelayExpr]:
    d, r = where
    (h,) = old
    # x_t + h R^T in one GEMM, the step's input its residual and the activation its epilogue
    return [rnn.acts[d][0](rnn.clipped(_op.add(_op.nn.dense(h, r), x_t[0])))]


LSTM = CellKind(4, 2, ("Sigmoid", "Tanh", "Tanh"), _lstm_prepare, _lstm_cell)
GRU = CellKind(3, 1, ("Sigmoid", "Tanh"), _gru_prepare, _gru_cell)
RNN = CellKind(1, 1, ("Tanh",), _rnn_prepare, _rnn_cell)


def lstm(node: Node) -> list[RelayExpr | None]:
    return convert(node, LSTM)


def gru(node: Node) -> list[RelayExpr | None]:
    return convert(node, GRU)


def rnn(node: Node) -> list[RelayExpr | None]:
    return convert(node, RNN)

"""Recurrent layers as single operators: ``nn.lstm``, ``nn.gru`` and ``nn.rnn`` (one layer,
ONNX semantics, time first), each lowered to one C kernel for the whole sequence
(``topi.nn.rnn_kernel``: the input projection of every step as one GEMM, then every step's
recurrent product and gate math in ``ember_rnn``).

    nn.lstm(data, weight, recurrence, bias, extra, init_h, init_c, seq_lens) -> (Y, Y_h, Y_c)
    nn.gru(...)  -> (Y, Y_h)          nn.rnn(...) -> (Y, Y_h)

- data (seq, batch, input); Y (seq, dirs, batch, hidden); Y_h, Y_c (dirs, batch, hidden);
- weight (dirs, G * hidden, input) and recurrence (dirs, G * hidden, hidden) in ONNX's gate
  order (LSTM iofc, GRU zrh), or packed for the GEMM kernel when ``w_nr`` / ``r_nr`` > 0
  (:func:`pack_constant_weights` does that at build time for constant weights);
- bias (dirs, G * hidden): added to the input projection (Wb + Rb, except GRU's Rbh under
  ``linear_before_reset``, which is ``extra`` (dirs, hidden)); LSTM's ``extra`` is its
  peepholes (dirs, 3 * hidden, order iof);
- init_h / init_c (dirs, batch, hidden), seq_lens (batch,) int64; each optional argument is
  read only when its ``has_*`` flag is set (pass a scalar 0 otherwise);
- ``activations``: per direction, as many as the cell takes (LSTM f, g, h; GRU f, g; RNN f),
  names in ``rnn_kernel.ACTIVATIONS`` with their alpha/beta.
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from ....ir.expr import Call, Constant, const
from ....ir.types import TensorType, TupleType, Type
from ....te import tensor as te
from ....topi.nn import rnn_kernel as rk
from .._attrs_base import OpAttrs, attrs_class
from .._reg import OPAQUE, call, defop
from .._shape import fail, fmt_shape, may_equal, tensor_of
from .._tuple import TupleWrapper
from .epilogue_activation import activation_ref

__all__ = ["gru", "lstm", "recurrent_layer", "rnn"]

OPS = {"lstm": "nn.lstm", "gru": "nn.gru", "rnn": "nn.rnn"}
ARGS = ("data", "weight", "recurrence", "bias", "extra", "init_h", "init_c", "seq_lens")
_PER_DIRECTION = {"lstm": 3, "gru": 2, "rnn": 1}  # activations per direction
DEFAULT_ACTIVATIONS = {"lstm": ("sigmoid", "tanh", "tanh"), "gru": ("sigmoid", "tanh"),
                       "rnn": ("tanh",)}


@attrs_class("RnnAttrs")
class RnnAttrs(OpAttrs):
    """nn.lstm / nn.gru / nn.rnn: see the module docstring."""

    hidden_size: int = 1
    direction: str = "forward"
    activations: tuple[str, ...] = ()
    activation_alpha: tuple[float, ...] = ()
    activation_beta: tuple[float, ...] = ()
    clip: float = 0.0
    linear_before_reset: bool = False
    input_forget: bool = False
    has_extra: bool = False
    has_init_h: bool = False
    has_init_c: bool = False
    has_seq_lens: bool = False
    w_nr: int = 0
    r_nr: int = 0
    _op: ClassVar[str] = "nn.lstm"

    def __post_init__(self) -> None:
        self._int("hidden_size")
        self._positive("hidden_size")
        self._choice("direction", tuple(rk.DIRECTIONS))
        names = tuple(str(a).lower() for a in self.activations)
        if any(a not in rk.ACTIVATIONS for a in names):
            raise self._invalid("activations", "names among " + ", ".join(rk.ACTIVATIONS))
        self._set("activations", names)
        for name in ("activation_alpha", "activation_beta"):
            value = tuple(float(v) for v in getattr(self, name))
            if len(value) != len(names):
                raise self._invalid(name, f"one float per activation ({len(names)})")
            self._set(name, value)
        self._set("clip", float(self.clip))
        if self.clip < 0:
            raise self._invalid("clip", "0 (none) or a positive threshold")
        self._bool("linear_before_reset", "input_forget", "has_extra", "has_init_h",
                   "has_init_c", "has_seq_lens")
        self._int("w_nr")
        self._int("r_nr")
        self._positive("w_nr", allow_zero=True)
        self._positive("r_nr", allow_zero=True)

    @property
    def dirs(self) -> int:
        return 2 if self.direction == "bidirectional" else 1


def _cell(op: str) -> str:
    return op.split(".")[1]


def _spec(op: str, attrs: RnnAttrs) -> rk.RnnSpec:
    acts = tuple(zip(attrs.activations, attrs.activation_alpha, attrs.activation_beta))
    return rk.RnnSpec(_cell(op), attrs.hidden_size, attrs.direction, acts, attrs.clip,
                      attrs.linear_before_reset, attrs.input_forget)


def _want(op: str, what: str, ty: TensorType, shape: tuple[Any, ...]) -> None:
    if ty.ndim != len(shape) or not all(may_equal(a, b) for a, b in zip(ty.shape, shape)):
        raise fail(op, f"{what} must have shape {fmt_shape(shape)}, got {fmt_shape(ty.shape)}")


def _rel(op: str) -> Any:
    cell = _cell(op)

    def rel(args: list[TensorType], attrs: RnnAttrs) -> Type:
        data, w, r, bias, extra, h0, c0, lens = args
        spec = _spec(op, attrs)
        if data.ndim != 3 or data.dtype != "float32":
            raise fail(op, f"data must be float32 (seq, batch, input), got {data.dtype}"
                           f"{fmt_shape(data.shape)}")
        if len(attrs.activations) != _PER_DIRECTION[cell] * attrs.dirs:
            raise fail(op, f"needs {_PER_DIRECTION[cell]} activation(s) per direction, got "
                           f"{len(attrs.activations)} for {attrs.direction}")
        seq, batch, inputs = data.shape
        dirs, hid, gh = attrs.dirs, attrs.hidden_size, spec.gates * attrs.hidden_size
        if attrs.w_nr:
            _want(op, "a packed weight", w, (dirs, -(-gh // attrs.w_nr), inputs, attrs.w_nr))
        else:
            _want(op, "weight", w, (dirs, gh, inputs))
        if attrs.r_nr:
            _want(op, "a packed recurrence", r,
                  (dirs, spec.gates, -(-hid // attrs.r_nr), hid, attrs.r_nr))
        else:
            _want(op, "recurrence", r, (dirs, gh, hid))
        _want(op, "bias", bias, (dirs, gh))
        if attrs.has_extra:
            if cell == "rnn" or (cell == "gru" and not attrs.linear_before_reset):
                raise fail(op, "extra is LSTM's peepholes or GRU's Rbh under "
                               "linear_before_reset; this call has neither")
            _want(op, "peepholes" if cell == "lstm" else "Rbh", extra,
                  (dirs, (3 if cell == "lstm" else 1) * hid))
        for flag, ty, what in ((attrs.has_init_h, h0, "init_h"),
                               (attrs.has_init_c, c0, "init_c")):
            if flag:
                _want(op, what, ty, (dirs, batch, hid))
        if attrs.has_init_c and cell != "lstm":
            raise fail(op, "only an LSTM has a cell state (init_c)")
        if attrs.has_seq_lens and (lens.dtype != "int64" or lens.ndim != 1 or
                                   not may_equal(lens.shape[0], batch)):
            raise fail(op, f"seq_lens must be int64 of shape ({batch},), got {lens.dtype}"
                           f"{fmt_shape(lens.shape)}")
        for ty, what in ((w, "weight"), (r, "recurrence"), (bias, "bias")):
            if ty.dtype != "float32":
                raise fail(op, f"{what} must be float32, got {ty.dtype}")
        state = tensor_of((dirs, batch, hid), "float32")
        outs = [tensor_of((seq, dirs, batch, hid), "float32"), state]
        return TupleType(tuple(outs + ([state] if cell == "lstm" else [])))

    return rel


# ---------------------------------------------------------------- numpy reference
def _unpacked(w: np.ndarray, r: np.ndarray, attrs: RnnAttrs, gates: int,
              inputs: int) -> tuple[np.ndarray, np.ndarray]:
    """W (dirs, G H, I) and R (dirs, G H, H) from their packed forms (or as given)."""
    h = attrs.hidden_size
    if attrs.w_nr:
        w = w.transpose(0, 2, 1, 3).reshape(w.shape[0], inputs, -1)[:, :, :gates * h]
        w = w.transpose(0, 2, 1)
    if attrs.r_nr:
        r = r.transpose(0, 1, 3, 2, 4).reshape(*r.shape[:2], h, -1)[..., :h]  # (d, G, K, N)
        r = r.transpose(0, 1, 3, 2).reshape(r.shape[0], gates * h, h)
    return w, r


def _ref(op: str) -> Any:
    cell = _cell(op)

    def ref(x, w, r, bias, extra, h0, c0, lens, attrs: RnnAttrs) -> tuple[np.ndarray, ...]:
        spec = _spec(op, attrs)
        seq, batch, inputs = x.shape
        hid, dirs = attrs.hidden_size, attrs.dirs
        w, r = _unpacked(w, r, attrs, spec.gates, inputs)
        per = _PER_DIRECTION[cell]
        y = np.zeros((seq, dirs, batch, hid))
        finals = []
        for d in range(dirs):
            acts = [_act(attrs, d * per + k) for k in range(per)]
            out = _direction(cell, x, w[d], r[d], bias[d], extra[d] if attrs.has_extra else None,
                             h0[d] if attrs.has_init_h else None,
                             c0[d] if attrs.has_init_c else None,
                             lens if attrs.has_seq_lens else None, attrs, acts,
                             reverse=attrs.direction == "reverse" or d == 1)
            y[:, d] = out[0]
            finals.append(out[1:])
        states = [np.stack([f[k] for f in finals]) for k in range(len(finals[0]))]
        return tuple(v.astype(np.float32) for v in (y, *states))

    return ref


def _clip(v: np.ndarray, clip: float) -> np.ndarray:
    return np.clip(v, -clip, clip) if clip > 0 else v


def _act(attrs: RnnAttrs, k: int) -> tuple[str, float, float]:
    return (rk.ACTIVATIONS[attrs.activations[k]], attrs.activation_alpha[k],
            attrs.activation_beta[k])


def _direction(cell: str, x, w, r, bias, extra, h0, c0, lens, attrs: RnnAttrs, acts,
               reverse: bool) -> list[np.ndarray]:
    """One direction in float64: [Y (seq, batch, H), h, (c)]; ``acts`` (name, alpha, beta)
    each, applied to clipped inputs (but LSTM's h activation, whose input is the cell)."""
    seq, batch, _ = x.shape
    hid = attrs.hidden_size
    h = np.zeros((batch, hid)) if h0 is None else h0.astype(np.float64)
    c = np.zeros((batch, hid)) if c0 is None else c0.astype(np.float64)
    lengths = np.full(batch, seq) if lens is None else lens
    y = np.zeros((seq, batch, hid))
    proj = x.astype(np.float64) @ w.T.astype(np.float64) + bias  # (seq, batch, G H)
    g = [slice(k * hid, (k + 1) * hid) for k in range(4)]

    def f(k: int, v: np.ndarray) -> np.ndarray:
        return activation_ref(_clip(v, attrs.clip), *acts[k])

    for s in range(seq):
        active = s < lengths
        t = (lengths - 1 - s if reverse else np.full(batch, s)).clip(0, seq - 1)
        xt = proj[t, np.arange(batch)]
        if cell == "lstm":
            pre = xt + h @ r.T
            p = extra if extra is not None else np.zeros(3 * hid)
            i = f(0, pre[:, g[0]] + p[g[0]] * c)
            fg = 1 - i if attrs.input_forget else f(0, pre[:, g[2]] + p[g[2]] * c)
            cn = fg * c + i * f(1, pre[:, g[3]])
            o = f(0, pre[:, g[1]] + p[g[1]] * cn)
            hn = o * activation_ref(cn, *acts[2])
            c = np.where(active[:, None], cn, c)
        elif cell == "gru":
            z = f(0, xt[:, g[0]] + h @ r[g[0]].T)
            rr = f(0, xt[:, g[1]] + h @ r[g[1]].T)
            if attrs.linear_before_reset:
                rbh = extra if extra is not None else 0.0
                pre = xt[:, g[2]] + rr * (h @ r[g[2]].T + rbh)
            else:
                pre = xt[:, g[2]] + (rr * h) @ r[g[2]].T
            hn = (1 - z) * f(1, pre) + z * h
        else:
            hn = f(0, xt + h @ r.T)
        h = np.where(active[:, None], hn, h)
        y[t[active], np.arange(batch)[active]] = h[active]
    empty = lengths == 0
    h[empty], c[empty] = 0, 0
    return [y, h, c] if cell == "lstm" else [y, h]


# ---------------------------------------------------------------- lowering
def _compute(op: str) -> Any:
    def compute(attrs: RnnAttrs, inputs: list[te.Tensor], out_type: Type) -> list[te.Tensor]:
        x, w, r, bias, extra, h0, c0, lens = inputs
        return rk.rnn_layer(x, w, r, bias, extra if attrs.has_extra else None,
                            h0 if attrs.has_init_h else None, c0 if attrs.has_init_c else None,
                            lens if attrs.has_seq_lens else None, _spec(op, attrs),
                            attrs.w_nr, attrs.r_nr, name=op)

    return compute


for _name, _op in OPS.items():
    defop(_op, _rel(_op), _ref(_op), OPAQUE, args=ARGS, attrs=RnnAttrs,
          doc=f"One {_name.upper()} layer over a whole sequence, as one kernel.",
          compute=_compute(_op))


def pack_constant_weights(expr: Call, nr: int) -> Call | None:
    """``expr`` (an nn.lstm/gru/rnn call) with its constant weight and recurrence packed into
    the GEMM kernel's panels of ``nr`` columns (None when they are not both constants, or
    already packed)."""
    w, r = expr.args[1], expr.args[2]
    attrs: RnnAttrs = expr.attrs
    if attrs.w_nr or attrs.r_nr or not (isinstance(w, Constant) and isinstance(r, Constant)):
        return None
    wv, rv = w.data.numpy(), r.data.numpy()
    if wv.dtype != np.float32 or rv.dtype != np.float32:
        return None
    gates = rk.CELLS[_cell(expr.op.name)][1]
    args = list(expr.args)
    args[1] = const(rk.pack_input_np(wv, nr))
    args[2] = const(rk.pack_recurrent_np(rv, gates, nr))
    return Call(expr.op, tuple(args), dataclasses.replace(attrs, w_nr=nr, r_nr=nr))


# ---------------------------------------------------------------- Python API
def recurrent_layer(cell: str, data: Any, weight: Any, recurrence: Any, bias: Any,
                    extra: Any = None, init_h: Any = None, init_c: Any = None,
                    seq_lens: Any = None, **attrs: Any) -> TupleWrapper:
    """A call of ``nn.<cell>`` (cell lstm, gru or rnn); None for an absent optional input,
    default activations (sigmoid, tanh, tanh; tanh for rnn) when none are given."""
    zero = const(np.float32(0))
    args = [data, weight, recurrence, bias] + [zero if a is None else a
                                               for a in (extra, init_h, init_c, seq_lens)]
    flags = {"has_extra": extra is not None, "has_init_h": init_h is not None,
             "has_init_c": init_c is not None, "has_seq_lens": seq_lens is not None}
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    attrs.setdefault("activations", DEFAULT_ACTIVATIONS[cell] * dirs)
    attrs.setdefault("activation_alpha", (0.0,) * len(attrs["activations"]))
    attrs.setdefault("activation_beta", (0.0,) * len(attrs["activations"]))
    expr = call(OPS[cell], *args, attrs=RnnAttrs(**flags, **attrs))
    return TupleWrapper(expr, 3 if cell == "lstm" else 2)


def lstm(data: Any, weight: Any, recurrence: Any, bias: Any, peephole: Any = None,
         init_h: Any = None, init_c: Any = None, seq_lens: Any = None,
         **attrs: Any) -> TupleWrapper:
    """One LSTM layer (ONNX semantics, time first): (Y, Y_h, Y_c). See the module docstring."""
    return recurrent_layer("lstm", data, weight, recurrence, bias, peephole, init_h, init_c, seq_lens,
                  **attrs)


def gru(data: Any, weight: Any, recurrence: Any, bias: Any, reset_bias: Any = None,
        init_h: Any = None, seq_lens: Any = None, **attrs: Any) -> TupleWrapper:
    """One GRU layer (ONNX semantics, time first): (Y, Y_h). ``reset_bias`` is Rbh under
    linear_before_reset."""
    return recurrent_layer("gru", data, weight, recurrence, bias, reset_bias, init_h, None, seq_lens,
                  **attrs)


def rnn(data: Any, weight: Any, recurrence: Any, bias: Any, init_h: Any = None,
        seq_lens: Any = None, **attrs: Any) -> TupleWrapper:
    """One plain RNN layer (ONNX semantics, time first): (Y, Y_h)."""
    return recurrent_layer("rnn", data, weight, recurrence, bias, None, init_h, None, seq_lens, **attrs)

"""A whole LSTM / GRU / RNN layer as two C calls: the input projection of every step as one
``ember_sgemm`` (``gemm_kernel.sgemm``, a batch of one product per direction), then
``ember_rnn`` (``ember/include/ember/kernels/rnn.h``), which runs every step of both
directions: the recurrent product through the GEMM micro-kernel, the gate math on the step's
rows while they are in L1.

The weights come packed (``w_nr``/``r_nr`` > 0: :func:`pack_input_np`, :func:`pack_recurrent_np`,
done at build time for constant weights) or as the operator has them ((dirs, G * H, I) and
(dirs, G * H, H); the kernels then read them strided, copying a panel at a time). The sequence
length and the batch may be run-time sizes: they are arguments of both calls, and the GEMM's
blocking is computed from them at each call (``gemm_kernel.tile_exprs``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...runtime.errors import OpError
from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import EQ, StringImm
from ...tir.stmt import AssertStmt, Evaluate
from . import gemm_kernel as gk
from .sizes import checked, dims, must_equal

HEADER = "ember/kernels/rnn.h"
CELLS = {"lstm": (0, 4), "gru": (1, 3), "rnn": (2, 1)}  # cell code of rnn.h, gates
DIRECTIONS = {"forward": 0, "reverse": 1, "bidirectional": 2}
# Activations the kernel applies (codes of gemm_epilogue.h); ONNX names, lower case.
ACTIVATIONS = {"sigmoid": "sigmoid", "tanh": "tanh", "relu": "relu", "leakyrelu": "leaky_relu",
               "hardsigmoid": "hardsigmoid"}
# Two directions run on two threads from this many multiply-adds per call on.
PARALLEL_MACS = 1 << 18


@dataclass(frozen=True)
class RnnSpec:
    """What the kernel computes, besides its operands: the cell, the direction, per direction
    its activations ((name, alpha, beta) each, names of ACTIVATIONS), clip (0: none) and
    GRU's linear_before_reset / LSTM's input_forget."""

    cell: str
    hidden: int
    direction: str
    activations: tuple[tuple[str, float, float], ...]
    clip: float = 0.0
    linear_before_reset: bool = False
    input_forget: bool = False

    @property
    def gates(self) -> int:
        return CELLS[self.cell][1]

    @property
    def dirs(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    def act_codes(self) -> int:
        """3 activation codes per direction, 4 bits each, direction d from bit 12 d."""
        per = len(self.activations) // self.dirs
        code = 0
        for d in range(self.dirs):
            for k in range(per):
                name = self.activations[d * per + k][0]
                code |= gk.ACTIVATIONS[ACTIVATIONS[name]] << (12 * d + 4 * k)
        return code

    def act_params(self) -> list[float]:
        """(alpha, beta) of each of 3 activations per direction (0 for an absent one)."""
        per = len(self.activations) // self.dirs
        out = []
        for d in range(self.dirs):
            for k in range(3):
                _, a, b = self.activations[d * per + k] if k < per else ("", 0.0, 0.0)
                out += [float(a), float(b)]
        return out


# ----------------------------------------------------------------------- weight packing
def pack_input_np(w: np.ndarray, nr: int) -> np.ndarray:
    """numpy: W (dirs, G * H, I) -> (dirs, ceil(G * H / nr), I, nr), each direction as
    ``gemm_kernel.pack_weight_np`` packs a dense weight."""
    return np.stack([gk.pack_weight_np(wd, nr) for wd in w])


def pack_recurrent_np(r: np.ndarray, gates: int, nr: int) -> np.ndarray:
    """numpy: R (dirs, G * H, H) -> (dirs, G, ceil(H / nr), H, nr): each gate's (H, H) block
    packed on its own, so that a gate's product starts on a panel."""
    dirs, gh, hidden = r.shape
    blocks = r.reshape(dirs, gates, gh // gates, hidden)
    return np.stack([np.stack([gk.pack_weight_np(blk, nr) for blk in rd]) for rd in blocks])


# ----------------------------------------------------------------------- the stages
def _constants(values: list[float], name: str) -> te.Tensor:
    """A small float32 table as a stage (the kernel reads it through a pointer)."""
    def at(i):
        out = tir.const(0.0, "float32")
        for k, v in enumerate(values):
            out = tir.Select_(i == k, tir.const(float(v), "float32"), out)
        return out

    return te.compute((len(values),), at, name=name, tag="injective")


def _projection(x: te.Tensor, w: te.Tensor, spec: RnnSpec, w_nr: int, name: str) -> te.Tensor:
    """(dirs, seq * batch, G * H): x (seq, batch, I) times each direction's W^T."""
    seq, batch, inputs = dims(x.shape)
    n = spec.gates * spec.hidden
    rows = seq * batch if isinstance(seq, int) and isinstance(batch, int) else tir.mul(seq, batch)
    k2 = dims(w.shape)[-2 if w_nr else -1]
    require = tuple(must_equal(inputs, k2, f"{name}: the input size differs from W's",
                               f"{name}: the input has {inputs} features but W expects {k2}"))
    if w_nr:
        _, panels, _, nr = dims(w.shape)
        ops = gk.GemmOperands(spec.dirs, rows, n, k2, 0, k2, panels * k2 * nr, nr, 1, nr,
                              require=require)
    else:
        ops = gk.GemmOperands(spec.dirs, rows, n, k2, 0, k2, n * k2, 1, k2, require=require)
    return gk.sgemm(x, w, ops, (spec.dirs, rows, n), name=f"{name}_projection")


def rnn_layer(x: te.Tensor, w: te.Tensor, r: te.Tensor, bias: te.Tensor,
              extra: te.Tensor | None, h0: te.Tensor | None, c0: te.Tensor | None,
              lens: te.Tensor | None, spec: RnnSpec, w_nr: int = 0, r_nr: int = 0,
              name: str = "nn.lstm") -> list[te.Tensor]:
    """[Y (seq, dirs, batch, H), Y_h (dirs, batch, H)] and for an LSTM Y_c: one layer over
    x (seq, batch, I) (time first). ``bias`` (dirs, G * H) is added to the input projection;
    ``extra`` is LSTM's peepholes (dirs, 3 H) or GRU's Rbh (dirs, H) under
    linear_before_reset; h0/c0 (dirs, batch, H); lens (batch,) int64."""
    for t, what in ((x, "X"), (w, "W"), (r, "R"), (bias, "bias"), (extra, "extra"),
                    (h0, "initial_h"), (c0, "initial_c")):
        if t is not None and t.dtype != "float32":
            raise OpError(f"{name}: the C kernel is float32 only, {what} is {t.dtype}")
    if lens is not None and lens.dtype != "int64":
        raise OpError(f"{name}: sequence_lens must be int64 here, got {lens.dtype}")
    seq, batch, _ = dims(x.shape)
    H, dirs, G = spec.hidden, spec.dirs, spec.gates
    checks = []
    for t, what in ((h0, "initial_h"), (c0, "initial_c"), (lens, "sequence_lens")):
        if t is not None:
            got = dims(t.shape)[1 if t.ndim == 3 else 0]
            checks += must_equal(got, batch, f"{name}: {what} has another batch size than X",
                                 f"{name}: {what} has batch {got}, X has {batch}")
    proj = _projection(x, w, spec, w_nr, name)
    params = _constants(spec.act_params(), "T_rnn_act_params")
    scratch = te.compute((dirs, batch, (G + 1) * H), lambda *i: tir.const(0.0, "float32"),
                         name="T_rnn_scratch", tag="injective")
    # without sequence_lens the kernel still takes an int64 pointer (C checks the type)
    no_lens = lens is None
    lens_in = te.compute((1,), lambda i: tir.const(0, "int64"), name="T_rnn_no_lens",
                         tag="injective") if no_lens else lens
    inputs = [proj, r, bias, params, scratch, lens_in] + [t for t in (extra, h0, c0)
                                                          if t is not None]
    macs = (seq * batch * G * H * H) if isinstance(seq, int) and isinstance(batch, int) else 0
    parallel = int(dirs == 2 and (macs >= PARALLEL_MACS or not macs))
    flags = int(spec.linear_before_reset) | 2 * int(spec.input_forget)
    shapes = [(seq, dirs, batch, H), (dirs, batch, H)] + ([(dirs, batch, H)]
                                                          if spec.cell == "lstm" else [])

    def body(ins, outs):
        opt = {}
        k = 6
        for key, t in (("extra", extra), ("h0", h0), ("c0", c0)):
            opt[key] = ins[k].data if t is not None else ins[0].data
            k += t is not None
        y_c = outs[2].data if spec.cell == "lstm" else outs[1].data
        call = tir.call_extern(
            "int32", "ember_rnn", CELLS[spec.cell][0], seq, batch, H,
            DIRECTIONS[spec.direction], ins[0].data, ins[1].data, r_nr, ins[2].data,
            int(extra is not None), opt["extra"], int(h0 is not None), opt["h0"],
            int(c0 is not None), opt["c0"], int(not no_lens), ins[5].data,
            spec.act_codes(), ins[3].data, tir.const(float(spec.clip), "float32"), flags,
            ins[4].data, outs[0].data, outs[1].data, y_c, parallel, header=HEADER)
        fail = AssertStmt(EQ(call, tir.const(0)), StringImm(
            f"{name}: ember_rnn failed: a sequence_lens value is outside [0, seq_length], or "
            "a parallel launch or a buffer failed"), Evaluate(tir.const(0)))
        return checked(fail, checks)

    return te.extern(shapes, inputs, body, name="T_rnn", dtype="float32", tag="rnn_kernel")

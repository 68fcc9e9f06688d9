"""softmax / log_softmax, layer_norm and rms_norm through the C kernels of
``ember/include/ember/kernels/softmax.h`` and ``norm.h``.

Each is a ``te.extern`` stage whose body is one ``tir.call_extern``: the kernel reads the input
in place as (outer, n, inner), n the normalised axis (row-major data is contiguous, so any axis
works without a copy; the last axis is the fast path). The statistics of a row stay in
registers; the input is read from memory once. :func:`norm_parallel` is the cost model that
decides whether a kernel launches threads. Sizes may be run-time ones (``?`` dimensions, e.g.
the batch and sequence of a transformer): the kernel takes (outer, n, inner) as arguments and
decides about threads from them at each call, as a static build of that shape does.

:func:`layer_norm` with a :class:`NormEpilogue` calls ``ember_layer_norm_act``: a per-row
scale/shift and an activation on each normalised row while it is in L1
(``nn.contrib_layer_norm_act``, which FuseNormEpilogue makes).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...runtime.errors import OpError
from ...te import tensor as te
from ...tir import op as tir
from .gemm_kernel import ACTIVATIONS
from .sizes import Dim, checked, dims, i64, must_equal, prod, static_or_expr, succeeds

SOFTMAX_HEADER = "ember/kernels/softmax.h"
NORM_HEADER = "ember/kernels/norm.h"
# Below this many elements a parallel launch (a few microseconds) costs more than it saves:
# softmax spends ~1 ns per element on one core (an exp), layer_norm ~0.5 ns.
PARALLEL_ELEMENTS = {"softmax": 1 << 15, "layer_norm": 1 << 16}


@dataclass(frozen=True)
class NormEpilogue:
    """What ``ember_layer_norm_act`` applies to each normalised value of row r (r numbers the
    (outer, inner) positions): ``act(y * row_scale[i] + row_shift[i])``, i = (r / row_div) %
    row_count (each vector None: not applied); ``activation`` one of
    ``gemm_kernel.ACTIVATIONS`` with its parameters p0, p1 (gemm_epilogue.h)."""

    row_scale: te.Tensor | None = None
    row_shift: te.Tensor | None = None
    row_count: int = 1
    row_div: int = 1
    activation: str = "none"
    p0: float = 0.0
    p1: float = 0.0


def eligible(*tensors: te.Tensor | None) -> bool:
    """True when the C kernels can compute with these operands: float32 (static or run-time
    sizes)."""
    return all(t is None or t.dtype == "float32" for t in tensors)


def split_at_axis(x: te.Tensor, axis: int) -> tuple[Dim, Dim, Dim]:
    """(outer, n, inner) of ``x`` around ``axis`` (already normalised to [0, ndim)); ints
    where the sizes are static, else expressions of the run-time sizes."""
    sizes = dims(x.shape)
    return prod(sizes[:axis]), sizes[axis], prod(sizes[axis + 1:])


def norm_parallel(kind: str, elements: Dim) -> Dim:
    """Whether (1) or not (0) a softmax/layer_norm kernel of ``elements`` elements launches
    threads; an expression when the count is known only at run time."""
    if isinstance(elements, int):
        return int(elements >= PARALLEL_ELEMENTS[kind])
    return static_or_expr(tir.cast(i64(elements) >= tir.const(PARALLEL_ELEMENTS[kind], "int64"),
                                   "int32"))



def softmax(x: te.Tensor, axis: int = -1, log: bool = False) -> te.Tensor:
    """softmax (or log_softmax with ``log``) of float32 ``x`` along ``axis``."""
    name = "nn.log_softmax" if log else "nn.softmax"
    if not eligible(x):
        raise OpError(f"{name}: the C kernel needs float32, got {x.dtype}")
    if not -x.ndim <= axis < x.ndim:
        raise OpError(f"{name}: axis {axis} is out of range for rank {x.ndim}")
    outer, n, inner = split_at_axis(x, axis % x.ndim)
    parallel = norm_parallel("softmax", prod([outer, n, inner]))

    def body(ins, outs):
        call = tir.call_extern("int32", "ember_softmax", ins[0].data, outs[0].data, outer, n,
                               inner, int(log), parallel, header=SOFTMAX_HEADER)
        return succeeds(call, f"{name}: ember_softmax failed (parallel launch)")

    return te.extern(x.shape, [x], body, name="T_log_softmax" if log else "T_softmax",
                     dtype="float32", tag="norm_kernel")


def layer_norm(data: te.Tensor, gamma: te.Tensor | None, beta: te.Tensor | None,
               axis: int = -1, epsilon: float = 1e-5, epilogue: NormEpilogue | None = None,
               rms: bool = False) -> te.Tensor:
    """(x - mean) / sqrt(var + eps) [* gamma] [+ beta] over one ``axis`` of float32 ``data``;
    gamma/beta (None: not applied) have the axis' length. With ``epilogue``, its row affine
    and activation follow (``ember_layer_norm_act``). With ``rms``, x / sqrt(mean(x^2) + eps)
    [* gamma] (``ember_rms_norm``; no beta or epilogue)."""
    where = "nn.rms_norm" if rms else "nn.layer_norm"
    if rms and (beta is not None or epilogue is not None):
        raise OpError(f"{where}: has no beta or epilogue")
    if not eligible(data, gamma, beta):
        raise OpError(f"{where}: the C kernel needs float32")
    if not -data.ndim <= axis < data.ndim:
        raise OpError(f"{where}: axis {axis} is out of range for rank {data.ndim}")
    epi = epilogue or NormEpilogue()
    if not eligible(epi.row_scale, epi.row_shift):
        raise OpError(f"{where}: the row scale and shift must be float32")
    outer, n, inner = split_at_axis(data, axis % data.ndim)
    checks = []
    for t, what in ((gamma, "gamma"), (beta, "beta")):
        if t is not None:
            checks += must_equal(
                prod(dims(t.shape)), n, f"{where}: {what} must have as many values as the "
                "axis' length", f"{where}: {what} must have {n} values (the axis' length), got "
                f"shape {tuple(dims(t.shape))}")
    optional = (gamma, beta, epi.row_scale, epi.row_shift)
    inputs = [data] + [t for t in optional if t is not None]
    parallel = norm_parallel("layer_norm", prod([outer, n, inner]))
    eps = tir.const(float(epsilon), "float32")

    def body(ins, outs):
        pos = iter(range(1, len(ins)))
        ptrs = [ins[next(pos)].data if t is not None else ins[0].data for t in optional]
        g, b, rs, rt = ptrs
        common = (ins[0].data, outs[0].data, outer, n, inner, int(gamma is not None), g,
                  int(beta is not None), b, eps)
        if rms:
            call = tir.call_extern("int32", "ember_rms_norm", *common[:7], eps, parallel,
                                   header=NORM_HEADER)
            what = "ember_rms_norm"
        elif epilogue is None:
            call = tir.call_extern("int32", "ember_layer_norm", *common, parallel,
                                   header=NORM_HEADER)
            what = "ember_layer_norm"
        else:
            f32 = lambda v: tir.const(float(v), "float32")  # noqa: E731
            call = tir.call_extern(
                "int32", "ember_layer_norm_act", *common, int(epi.row_scale is not None), rs,
                int(epi.row_shift is not None), rt, tir.const(epi.row_count, "int64"),
                tir.const(epi.row_div, "int64"), ACTIVATIONS[epi.activation], f32(epi.p0),
                f32(epi.p1), parallel, header=NORM_HEADER)
            what = "ember_layer_norm_act"
        return checked(succeeds(call, f"{where}: {what} failed (parallel launch)"), checks)

    return te.extern(data.shape, inputs, body, name="T_rms_norm" if rms else "T_layer_norm",
                     dtype="float32", tag="norm_kernel")

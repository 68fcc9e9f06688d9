"""Injective data-movement operators: reshape, transpose, slicing, joining, gathering, layouts."""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from ..runtime.errors import OpError
from ..te import tensor as te
from ..te.piecewise import piecewise_compute
from ..tir import op as tir
from ..tir.expr import EQ, IntImm, PrimExpr
from .broadcast import INJECTIVE
from .layout_nchwc import layout_nchwc, reshaped_copy


def _const_shape(name: str, x: te.Tensor) -> list[int]:
    if not all(isinstance(d, IntImm) for d in x.shape):
        raise OpError(f"{name}: needs a static input shape, got {[str(d) for d in x.shape]}")
    return [d.value for d in x.shape]


def _axis(name: str, axis: int, ndim: int) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise OpError(f"{name}: axis {axis} is out of range for rank {ndim}")
    return axis % max(ndim, 1)


def _prod(dims: Sequence[PrimExpr]) -> PrimExpr:
    out: PrimExpr = tir.const(1)
    for d in dims:
        out = out * d
    return out


def reshape(x: te.Tensor, newshape: Sequence[Any]) -> te.Tensor:
    """Same elements, new shape (one ``-1`` is inferred).

    With static shapes the axes pair up in groups of equal size (``(1, 256, 64) -> (1, 256,
    8, 8)``: ``[1] [256] [64 -> 8, 8]``) and the index arithmetic stays inside each group
    (``x[n, c, h * 8 + w]``), so a reader that gathers (resize, take) along one group needs
    no division by the others' sizes, which the simplifier cannot drop for an index it
    cannot bound. A ``?`` batch leading both shapes (the rest static) is a group of its own."""
    newshape = list(newshape)
    if any(isinstance(d, int) and d == -1 for d in newshape):
        known = _prod([tir.convert(d) for d in newshape if not (isinstance(d, int) and d == -1)])
        total = _prod(x.shape)
        newshape = [tir.floordiv(total, known) if isinstance(d, int) and d == -1 else d
                    for d in newshape]
    shape = tuple(tir.convert(d) for d in newshape)
    copy = reshaped_copy(x, shape)
    if copy is not None:  # a blocked copy takes the new shape itself (no second pass)
        return copy
    groups = _reshape_groups(list(x.shape), list(shape))

    def f(*idx: PrimExpr) -> PrimExpr:
        src: list[PrimExpr] = []
        for (s0, s1), (d0, d1) in groups:
            src += _regroup(idx[d0:d1], shape[d0:d1], x.shape[s0:s1])
        return x(*src)

    return te.compute(shape, f, name="T_reshape", tag=INJECTIVE)


Groups = list[tuple[tuple[int, int], tuple[int, int]]]


def _reshape_groups(src: list[PrimExpr], dst: list[PrimExpr]) -> Groups:
    # ((src start, end), (dst start, end)) per group of axes with equal products. With a
    # symbolic size, the axes that lead or trail both shapes unchanged (the same size: a
    # run-time one by identity) are groups of their own: (b * h, s, s) -> (b, h, s, s)
    # keeps x[i0 * h + i1, i2, i3], with no division by s per element.
    if all(isinstance(d, IntImm) for d in (*src, *dst)):
        return _size_groups(src, dst)
    lead = 0
    while lead < min(len(src), len(dst)) and _same_size(src[lead], dst[lead]):
        lead += 1
    trail = 0
    while trail < min(len(src), len(dst)) - lead and _same_size(src[-1 - trail],
                                                                 dst[-1 - trail]):
        trail += 1
    if lead == trail == 0:
        return _size_groups(src, dst)
    mid_s, mid_d = len(src) - trail, len(dst) - trail
    groups: Groups = [((i, i + 1), (i, i + 1)) for i in range(lead)]
    if lead < mid_s or lead < mid_d:
        groups += [((a + lead, b + lead), (c + lead, d + lead)) for (a, b), (c, d) in
                   _size_groups(src[lead:mid_s], dst[lead:mid_d])]
    return groups + [((mid_s + k, mid_s + k + 1), (mid_d + k, mid_d + k + 1))
                     for k in range(trail)]


def _same_size(a: PrimExpr, b: PrimExpr) -> bool:
    return a is b or isinstance(a, IntImm) and isinstance(b, IntImm) and a.value == b.value


def _size_groups(src: list[PrimExpr], dst: list[PrimExpr]) -> Groups:
    # One group of all axes unless every size is static and none is 0. Unit axes join the
    # group before them (the first group when they lead).
    sizes = [d.value if isinstance(d, IntImm) else None for d in (*src, *dst)]
    s_sizes, d_sizes = sizes[:len(src)], sizes[len(src):]
    if len(src) > 1 and len(dst) > 1 and s_sizes[0] is None and d_sizes[0] is None and \
            None not in s_sizes[1:] + d_sizes[1:] and 0 not in sizes and \
            math.prod(s_sizes[1:]) == math.prod(d_sizes[1:]):
        # a ? batch leading both (the rest static, of equal products): the same batch, its
        # own group, the rest grouped as for static shapes
        rest = _size_groups(src[1:], dst[1:])
        return [((0, 1), (0, 1))] + [((a + 1, b + 1), (c + 1, d + 1))
                                     for (a, b), (c, d) in rest]
    if not src or not dst or None in sizes or 0 in sizes or \
            math.prod(s_sizes) != math.prod(d_sizes):
        return [((0, len(src)), (0, len(dst)))]
    groups, i, j = [], 0, 0
    while i < len(src) and j < len(dst):
        i0, j0, ps, pd = i, j, s_sizes[i], d_sizes[j]
        i, j = i + 1, j + 1
        while ps != pd:
            if ps < pd:
                ps, i = ps * s_sizes[i], i + 1
            else:
                pd, j = pd * d_sizes[j], j + 1
        groups.append(((i0, i), (j0, j)))
    (s0, _), (d0, _) = groups[-1]  # trailing unit axes (the sizes match, so only 1s remain)
    groups[-1] = ((s0, len(src)), (d0, len(dst)))
    return groups


def _regroup(idx: Sequence[PrimExpr], dst: Sequence[PrimExpr], src: Sequence[PrimExpr]
             ) -> list[PrimExpr]:
    # One group: the destination indices flattened, then split over the source sizes.
    flat: PrimExpr = tir.const(0)
    for i, d in zip(idx, dst):
        flat = flat * d + i
    out = []
    for d in reversed(src[1:]):
        out.append(tir.floormod(flat, d))
        flat = tir.floordiv(flat, d)
    # What is left is below the first extent (the sizes match): no modulo, which the
    # simplifier drops for a static extent but must keep for one known at run time.
    if src:
        out.append(flat)
    return out[::-1]


def transpose(x: te.Tensor, axes: Sequence[int] | None = None) -> te.Tensor:
    """Permute the axes (reverse them when ``axes`` is None)."""
    n = x.ndim
    axes = list(range(n))[::-1] if axes is None else [_axis("transpose", a, n) for a in axes]
    if sorted(axes) != list(range(n)):
        raise OpError(f"transpose: axes {axes} are not a permutation of 0..{n - 1}")
    shape = tuple(x.shape[a] for a in axes)

    def f(*idx: PrimExpr) -> PrimExpr:
        src = [None] * n
        for o, a in enumerate(axes):
            src[a] = idx[o]
        return x(*src)

    return te.compute(shape, f, name="T_transpose", tag=INJECTIVE)


def squeeze(x: te.Tensor, axis: Sequence[int] | int | None = None) -> te.Tensor:
    """Drop size-1 axes (all of them, or those in ``axis``)."""
    n = x.ndim
    if axis is None:
        drop = {i for i, d in enumerate(x.shape) if isinstance(d, IntImm) and d.value == 1}
    else:
        drop = {_axis("squeeze", a, n) for a in ([axis] if isinstance(axis, int) else axis)}
    keep = [i for i in range(n) if i not in drop]

    def f(*idx: PrimExpr) -> PrimExpr:
        it = iter(idx)
        return x(*[tir.const(0) if i in drop else next(it) for i in range(n)])

    return te.compute(tuple(x.shape[i] for i in keep), f, name="T_squeeze", tag=INJECTIVE)


def expand_dims(x: te.Tensor, axis: int, num_newaxis: int = 1) -> te.Tensor:
    """Insert ``num_newaxis`` size-1 axes at ``axis``."""
    n = x.ndim
    axis = axis + n + 1 if axis < 0 else axis
    shape = tuple(x.shape[:axis]) + (tir.const(1),) * num_newaxis + tuple(x.shape[axis:])
    return te.compute(shape, lambda *i: x(*(i[:axis] + i[axis + num_newaxis:])),
                      name="T_expand_dims", tag=INJECTIVE)


def concatenate(tensors: Sequence[te.Tensor], axis: int = 0) -> te.Tensor:
    """Join tensors along ``axis``: a piecewise compute (``te/piecewise.py``), lowered as one
    contiguous copy loop per input rather than a per-element choice of input."""
    axis = _axis("concatenate", axis, tensors[0].ndim)
    total: PrimExpr = tir.const(0)
    for t in tensors:
        total = total + t.shape[axis]
    shape = tuple(total if i == axis else d for i, d in enumerate(tensors[0].shape))
    return piecewise_compute(shape, axis, [t.shape[axis] for t in tensors],
                             lambda k, *idx: tensors[k](*idx), "T_concat", INJECTIVE)


def stack(tensors: Sequence[te.Tensor], axis: int = 0) -> te.Tensor:
    """Join same-shaped tensors along a new axis."""
    axis = axis + tensors[0].ndim + 1 if axis < 0 else axis
    shape = tuple(tensors[0].shape[:axis]) + (tir.const(len(tensors)),) + tuple(
        tensors[0].shape[axis:])

    def f(*idx: PrimExpr) -> PrimExpr:
        rest = idx[:axis] + idx[axis + 1:]
        out = tensors[-1](*rest)
        for k in range(len(tensors) - 2, -1, -1):
            out = tir.if_then_else(idx[axis] == k, tensors[k](*rest), out)
        return out

    return te.compute(shape, f, name="T_stack", tag=INJECTIVE)


def strided_slice(x: te.Tensor, begin: Sequence[int], end: Sequence[int],
                  strides: Sequence[int] | None = None, axes: Sequence[int] | None = None
                  ) -> te.Tensor:
    """numpy-style ``x[b0:e0:s0, ...]`` (negative indices count from the end; clamped)."""
    dims = _const_shape("strided_slice", x)
    axes = list(range(len(begin))) if axes is None else [_axis("strided_slice", a, x.ndim)
                                                          for a in axes]
    strides = list(strides) if strides else [1] * len(axes)
    starts, steps, shape = [0] * x.ndim, [1] * x.ndim, list(dims)
    for k, a in enumerate(axes):
        s = strides[k] if k < len(strides) else 1
        if s == 0:
            raise OpError("strided_slice: a stride cannot be 0")
        e = end[k] if k < len(end) and end[k] is not None else (dims[a] if s > 0 else -dims[a] - 1)
        b, e2, s2 = slice(begin[k], e, s).indices(dims[a])
        starts[a], steps[a], shape[a] = b, s2, len(range(b, e2, s2))
    return te.compute(tuple(shape), lambda *i: x(*[st + j * sp for st, j, sp in zip(
        starts, i, steps)]), name="T_strided_slice", tag=INJECTIVE)


def split(x: te.Tensor, indices_or_sections: Any, axis: int = 0) -> list[te.Tensor]:
    """Split along ``axis`` into equal sections or at the given indices."""
    dims = _const_shape("split", x)
    axis = _axis("split", axis, x.ndim)
    n = dims[axis]
    if isinstance(indices_or_sections, int):
        if n % indices_or_sections:
            raise OpError(f"split: axis {axis} of size {n} does not divide into "
                          f"{indices_or_sections} sections")
        step = n // indices_or_sections
        points = [step * k for k in range(1, indices_or_sections)]
    else:
        points = list(indices_or_sections)
    bounds = [0] + points + [n]
    outs = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        b = [0] * x.ndim
        e = list(dims)
        b[axis], e[axis] = lo, hi
        outs.append(strided_slice(x, b, e))
    return outs


def take(a: te.Tensor, indices: te.Tensor, axis: int | None = None, mode: str = "clip"
         ) -> te.Tensor:
    """Gather ``a`` along ``axis`` (flattened when None) at ``indices`` (clip or wrap)."""
    if axis is None:
        a = reshape(a, [_prod(a.shape)])
        axis = 0
    axis = _axis("take", axis, a.ndim)
    n = a.shape[axis]
    shape = tuple(a.shape[:axis]) + tuple(indices.shape) + tuple(a.shape[axis + 1:])
    k = indices.ndim

    def f(*idx: PrimExpr) -> PrimExpr:
        j = tir.cast(indices(*idx[axis:axis + k]), "int32")
        if mode == "wrap":
            j = tir.floormod(j, n)
        elif mode == "clip":
            j = tir.min(tir.max(j, 0), n - 1)
        return a(*(idx[:axis] + (j,) + idx[axis + k:]))

    return te.compute(shape, f, name="T_take", tag=INJECTIVE)


def tile(x: te.Tensor, reps: Sequence[int]) -> te.Tensor:
    """Repeat the whole tensor ``reps[i]`` times along each axis (numpy.tile)."""
    n = max(x.ndim, len(reps))
    reps = [1] * (n - len(reps)) + list(reps)
    xs = [tir.const(1)] * (n - x.ndim) + list(x.shape)
    shape = tuple(d * r for d, r in zip(xs, reps))
    return te.compute(shape, lambda *i: x(*[tir.floormod(j, d) for j, d in zip(
        i[n - x.ndim:], xs[n - x.ndim:])]), name="T_tile", tag=INJECTIVE)


def repeat(x: te.Tensor, repeats: int, axis: int) -> te.Tensor:
    """Repeat each element ``repeats`` times along ``axis`` (numpy.repeat)."""
    axis = _axis("repeat", axis, x.ndim)
    shape = tuple(d * repeats if i == axis else d for i, d in enumerate(x.shape))
    return te.compute(shape, lambda *i: x(*(i[:axis] + (tir.floordiv(i[axis], repeats),) +
                                            i[axis + 1:])), name="T_repeat", tag=INJECTIVE)


def reverse(x: te.Tensor, axis: int) -> te.Tensor:
    """Reverse the order of elements along ``axis`` (numpy.flip)."""
    axis = _axis("reverse", axis, x.ndim)
    return te.compute(x.shape, lambda *i: x(*(i[:axis] + (x.shape[axis] - 1 - i[axis],) +
                                              i[axis + 1:])), name="T_reverse", tag=INJECTIVE)


flip = reverse


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: str = "float32") -> te.Tensor:
    """``numpy.arange(start, stop, step)`` for Python-number arguments."""
    if stop is None:
        start, stop = 0, start

    n = max(0, int(math.ceil((float(stop) - float(start)) / float(step))))
    return te.compute((n,), lambda i: tir.cast(tir.const(start, dtype) + tir.cast(
        i, dtype) * tir.const(step, dtype), dtype), name="T_arange", tag=INJECTIVE)


def one_hot(indices: te.Tensor, on_value: Any, off_value: Any, depth: int, axis: int = -1,
            dtype: str = "float32") -> te.Tensor:
    """``on_value`` where the new axis equals the index, ``off_value`` elsewhere."""
    axis = indices.ndim if axis == -1 else axis
    shape = tuple(indices.shape[:axis]) + (tir.const(depth),) + tuple(indices.shape[axis:])
    on, off = tir.const(on_value, dtype), tir.const(off_value, dtype)
    return te.compute(shape, lambda *i: tir.Select_(tir.binary(
        EQ, tir.cast(indices(*(i[:axis] + i[axis + 1:])), "int32"), i[axis]), on, off),
        name="T_one_hot", tag=INJECTIVE)


_LAYOUT = re.compile(r"(\d*)([A-Za-z])")


def _parse_layout(layout: str) -> list[tuple[str, int]]:
    return [(c, int(f) if f else 0) for f, c in _LAYOUT.findall(layout)]


def layout_transform(x: te.Tensor, src_layout: str, dst_layout: str) -> te.Tensor:
    """Reorder (and split/merge) axes between layouts such as NCHW, NHWC and NCHW16c.

    Positions that fall beyond the source (padding of a split axis) read 0.
    """
    src, dst = _parse_layout(src_layout), _parse_layout(dst_layout)
    if len(src) != x.ndim:
        raise OpError(f"layout_transform: layout {src_layout} has {len(src)} axes, the tensor "
                      f"has {x.ndim}")
    sub = {c.upper(): f for c, f in src if c.islower()}
    full = {c: x.shape[i] * (sub[c] if c in sub else 1) for i, (c, _) in enumerate(src)
            if c.isupper()}
    dsub = {c.upper(): f for c, f in dst if c.islower()}
    shape = tuple(tir.const(f) if c.islower() else (
        (full[c] + dsub[c] - 1) // dsub[c] if c in dsub else full[c]) for c, f in dst)
    blocked = layout_nchwc(x, src_layout, dst_layout, shape)
    if blocked is not None:  # NCHW <-> NCHW[L]c: the blocked-copy kernel
        return blocked

    def f(*idx: PrimExpr) -> PrimExpr:
        val = {c: idx[i] for i, (c, _) in enumerate(dst) if c.isupper()}
        for i, (c, fac) in enumerate(dst):
            if c.islower():
                val[c.upper()] = val[c.upper()] * fac + idx[i]
        src_idx = [tir.floormod(val[c.upper()], sub[c.upper()]) if c.islower() else (
            tir.floordiv(val[c], sub[c]) if c in sub else val[c]) for c, _ in src]
        inside = tir.all(*[val[c] < full[c] for c in dsub])
        return tir.if_then_else(inside, x(*src_idx), tir.const(0, x.dtype))

    return te.compute(shape, f, name="T_layout_trans", tag=INJECTIVE,
                      attrs={"src_layout": src_layout, "dst_layout": dst_layout})


__all__ = [n for n, v in list(globals().items()) if callable(v) and not n.startswith("_")
           and getattr(v, "__module__", None) == __name__ and not isinstance(v, type)]

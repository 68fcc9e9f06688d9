"""Einsum as transposes, reshapes, sums and one ``nn.batch_matmul`` per pair of operands.

For two operands every letter is one of: batch (in both and kept), contracted (in both, not
kept), left (only the first, kept), right (only the second, kept), or summed out beforehand
(only one operand, not kept). The first operand is transposed to (batch, left, contracted)
and the second to (batch, contracted, right); each group is merged into one axis (Relay's
-3), multiplied with ``batch_matmul``, split back (-4) and transposed to the output order.
Merging and splitting keep dynamic sizes as long as each split group has at most one
unknown size. More than two operands contract left to right. A letter repeated within one
operand (a diagonal, ``ii->i``) is taken first: its two axes merged into one and every
(n + 1)-th element of that axis kept (``take``), as long as the size is static.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.expr import RelayExpr, const
from ....ir.types import TensorType
from ... import op as _op
from ._node import Node
from ._util import product, static

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def parse(node: Node, equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """Operand subscripts and output subscript with '...' replaced by letters."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise node.fail(f"equation {equation!r} has {len(terms)} operand(s), the node has "
                        f"{len(ranks)} input(s)")
    used = set(eq) - set(".,->")
    spare = [c for c in _LETTERS if c not in used]
    n_ell = max((r - (len(t) - 3) for t, r in zip(terms, ranks) if "..." in t), default=0)
    ell = "".join(spare[:n_ell])
    subs = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            k = r - (len(t) - 3)
            t = t.replace("...", ell[n_ell - k:] if k else "")
        if len(t) != r or not all(c in _LETTERS for c in t):
            raise node.fail(f"operand subscripts {t!r} do not match an input of rank {r}")
        subs.append(t)
    if arrow:
        out = out.replace("...", ell)
    else:
        counts = "".join(subs)
        out = ell + "".join(sorted(c for c in set(counts) if counts.count(c) == 1 and c not in ell))
    return subs, out


def einsum(node: Node) -> RelayExpr:
    xs = node.inputs()
    types = [node.type_of(x) for x in xs]
    subs, out = parse(node, node.attr("equation"), [t.ndim for t in types])
    for k, (x, sub) in enumerate(zip(xs, subs)):
        xs[k], subs[k] = _diagonals(node, x, sub)
    acc, acc_sub = xs[0], subs[0]
    if len(xs) == 1:
        acc, acc_sub = _sum_out(acc, acc_sub, set(out))
    for k in range(1, len(xs)):
        keep = set(out).union(*subs[k + 1:])
        acc, acc_sub = _contract(node, acc, acc_sub, xs[k], subs[k], keep)
    if set(acc_sub) != set(out):
        raise node.fail(f"output subscripts {out!r} name letters no operand has")
    if acc_sub != out:
        acc = _op.transpose(acc, [acc_sub.index(c) for c in out])
    return acc


def _diagonals(node: Node, x: RelayExpr, sub: str) -> tuple[RelayExpr, str]:
    """``x`` with the diagonal taken for each letter repeated in ``sub``; the letter then
    names one (last) axis."""
    while (rep := next((c for c in sub if sub.count(c) > 1), None)) is not None:
        i, j = sub.index(rep), sub.index(rep, sub.index(rep) + 1)
        shape = node.type_of(x).shape
        n = shape[i]
        if not isinstance(n, int) or n != shape[j]:
            raise node.unsupported(f"the diagonal of subscript {rep!r} over axes of sizes "
                                   f"{shape[i]} and {shape[j]} (static equal sizes only)")
        rest = [k for k in range(len(sub)) if k not in (i, j)]
        x = _op.reshape(_op.transpose(x, [*rest, i, j]), [0] * len(rest) + [-3])
        x = _op.take(x, const(np.arange(n, dtype="int64") * (n + 1)), axis=len(rest))
        sub = "".join(sub[k] for k in rest) + rep
    return x, sub


def _sum_out(x: RelayExpr, sub: str, keep: set[str]) -> tuple[RelayExpr, str]:
    drop = [i for i, c in enumerate(sub) if c not in keep]
    if not drop:
        return x, sub
    return _op.sum(x, drop), "".join(c for c in sub if c in keep)


def _contract(node: Node, a: RelayExpr, sa: str, b: RelayExpr, sb: str,
              keep: set[str]) -> tuple[RelayExpr, str]:
    a, sa = _sum_out(a, sa, keep | set(sb))
    b, sb = _sum_out(b, sb, keep | set(sa))
    batch = [c for c in sa if c in sb and c in keep]
    contracted = [c for c in sa if c in sb and c not in keep]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    at, bt = node.type_of(a), node.type_of(b)
    dims = _letter_dims(node, (sa, at), (sb, bt))
    a3 = _group(node, a, sa, [batch, left, contracted])
    b3 = _group(node, b, sb, [batch, contracted, right])
    out = _op.nn.batch_matmul(a3, b3, transpose_b=False)
    out = _ungroup(node, out, [[dims[c] for c in g] for g in (batch, left, right)])
    return out, "".join(batch + left + right)


def _letter_dims(node: Node, *operands: tuple[str, TensorType]) -> dict[str, Any]:
    dims: dict[str, Any] = {}
    for sub, ty in operands:
        for c, d in zip(sub, ty.shape):
            old = dims.get(c)
            if old is not None and isinstance(old, int) and isinstance(d, int) and old != d:
                if 1 in (old, d):
                    raise node.unsupported(f"broadcasting subscript {c!r} ({old} vs {d})")
                raise node.fail(f"subscript {c!r} has size {old} in one operand and {d} in "
                                "another")
            dims[c] = d if old is None or not isinstance(old, int) else old
    return dims


def _group(node: Node, x: RelayExpr, sub: str, groups: list[list[str]]) -> RelayExpr:
    """``x`` transposed to the groups' order and reshaped to one axis per group."""
    order = [c for g in groups for c in g]
    if order != list(sub):
        x = _op.transpose(x, [sub.index(c) for c in order])
    for pos, g in enumerate(groups):
        if not g:
            x = _op.expand_dims(x, pos)
        for _ in range(len(g) - 1):  # merge axes pos and pos+1
            x = _op.reshape(x, [0] * pos + [-3, -2])
    return x


def _ungroup(node: Node, x: RelayExpr, groups: list[list[Any]]) -> RelayExpr:
    """Split each axis of ``x`` back into its group's sizes (dropping empty groups)."""
    pos = 0
    for dims in groups:
        if not dims:
            x = _op.squeeze(x, [pos])
            continue
        for k in range(len(dims) - 1):
            first, rest = dims[k], dims[k + 1:]
            if isinstance(first, int):
                split = [first, -1]
            elif static(rest):
                split = [-1, product(rest)]
            else:
                raise node.unsupported("splitting a merged axis with two dynamic sizes")
            x = _op.reshape(x, [0] * pos + [-4, *split, -2])
            pos += 1
        pos += 1
    return x

"""TfIdfVectorizer: counts of the n-grams of an integer pool in each row of the input,
weighted (TF, IDF, TFIDF), decomposed into slices, comparisons and sums.

For each n-gram length n in [min_gram_length, max_gram_length] and each skip in
[0, max_skip_count] (unigrams once), the pool's n-grams of that length are compared, as one
constant (P, n) table, with every window ``x[s], x[s + d], ..., x[s + (n-1) d]`` (d = skip
+ 1); the matches summed over s give the counts, which a constant 0/1 matrix moves to their
``ngram_indexes`` in the output. Everything is static: the pool and the input's length are
known at import. String pools are not supported.
"""
from __future__ import annotations

import numpy as np

from ....ir.expr import RelayExpr, const
from ... import op as _op
from ._node import Node
from ._util import check_constant_size, scalar

MODES = ("TF", "IDF", "TFIDF")
F32 = "float32"


def _pools(node: Node) -> dict[int, np.ndarray]:
    """n -> the (P, n) table of the pool's n-grams of length n, in pool order."""
    if node.has_attr("pool_strings"):
        raise node.unsupported("a pool of strings (pool_strings); ember counts integer n-grams")
    pool = np.asarray(node.attr("pool_int64s"), "int64")
    starts = [int(v) for v in node.attr("ngram_counts")] + [len(pool)]
    out = {}
    for n, (lo, hi) in enumerate(zip(starts, starts[1:]), 1):
        if hi < lo or (hi - lo) % n:
            raise node.invalid_attr("ngram_counts", starts[:-1], f"start offsets of whole "
                                    f"{n}-grams in a pool of {len(pool)}")
        out[n] = pool[lo:hi].reshape(-1, n)
    return out


def _counts(node: Node, x: RelayExpr, length: int, grams: np.ndarray,
            max_skip: int) -> RelayExpr | None:
    """(rows, P) counts of the n-grams ``grams`` (P, n) over every skip; None: none fit."""
    n = grams.shape[1]
    total = None
    for d in range(1, (max_skip + 1 if n > 1 else 1) + 1):
        width = length - d * (n - 1)
        if width <= 0:
            break
        match = None
        for k in range(n):
            part = _op.strided_slice(x, [k * d], [k * d + width], axes=[1])
            hit = _op.equal(_op.expand_dims(part, 2), const(grams[:, k].astype(node.dtype(0))))
            match = hit if match is None else _op.logical_and(match, hit)
        count = _op.sum(_op.cast(match, F32), axis=[1])
        total = count if total is None else _op.add(total, count)
    return total


def tfidf_vectorizer(node: Node) -> RelayExpr:
    x, shape = node.input(0, "X"), node.static_shape(0, "X")
    if len(shape) not in (1, 2) or not node.dtype(0).startswith("int"):
        raise node.fail(f"X must be an integer tensor of shape [C] or [N, C], got "
                        f"{node.dtype(0)}{list(shape)}")
    mode = node.choice("mode", "TF", MODES)
    lo, hi = node.attr("min_gram_length"), node.attr("max_gram_length")
    max_skip = node.attr("max_skip_count")
    indexes = np.asarray(node.attr("ngram_indexes"), "int64")
    if indexes.ndim != 1 or not len(indexes) or indexes.min() < 0:
        raise node.invalid_attr("ngram_indexes", indexes.tolist(), "non-negative output "
                                "positions, one per n-gram of the pool")
    size = int(indexes.max()) + 1
    check_constant_size(node, (size, len(indexes)), "ngram_indexes")
    rows = x if len(shape) == 2 else _op.expand_dims(x, 0)
    parts, slots, first = [], [], 0
    for n, grams in _pools(node).items():
        if lo <= n <= hi and len(grams):
            counts = _counts(node, rows, shape[-1], grams, max_skip)
            if counts is not None:
                parts.append(counts)
                slots.extend(indexes[first:first + len(grams)])
        first += len(grams)
    if len(indexes) != first:
        raise node.invalid_attr("ngram_indexes", list(indexes), f"one index per n-gram of the "
                                f"pool ({first})")
    if parts:
        place = np.zeros((size, len(slots)), F32)  # dense's weight: (out, in)
        place[slots, np.arange(len(slots))] = 1.0
        counts = parts[0] if len(parts) == 1 else _op.concatenate(parts, 1)
        out = _op.nn.dense(counts, const(place))
    else:
        out = _op.zeros((shape[0] if len(shape) == 2 else 1, size), F32)
    weights = node.attr("weights", None)
    w = const(np.asarray(weights, F32)) if weights is not None else None
    if mode == "IDF":
        hit = _op.greater(out, scalar(0.0, F32))
        out = _op.where(hit, w if w is not None else scalar(1.0, F32), scalar(0.0, F32))
    elif mode == "TFIDF" and w is not None:
        out = _op.multiply(out, w)
    return out if len(shape) == 2 else _op.squeeze(out, [0])

"""Float sums along contiguous rows, as the C compiler's vectorizer needs them.

A lowered reduction keeps its accumulator in memory (``T_sum[i] = T_sum[i] + x[i * 512 +
k]``), and a C compiler will not reorder float additions on its own, so the sum runs one
addition at a time, each waiting on the last (an RMS norm's mean square over 512 columns ran
7x slower than onnxruntime's). ``row_sum`` recognises such a loop: serial, its body that one
store, every load it makes contiguous in the loop variable (stride 1) or independent of it.
The C emitter then sums into a local under ``#pragma omp simd reduction(+:...)``: partial sums
per vector lane, added at the end, as onnxruntime and numpy's pairwise sums also reorder.
Strided reads (a sum over a non-innermost axis) are left alone: a gather per element would
cost more than the serial chain.

``row_extreme`` recognises the float max/min reductions alike (``B[i] = max(B[i], e)``),
which ran one compare-and-branch per element (a max over 200k floats: 6.4x onnxruntime's
time). The C emitter keeps ``EXTREME_LANES`` running maxima, each updated by the NaN-keeping
bitwise helper in a vector loop, and folds them at the end: max and min are associative, so
the result is the serial one (but for which of -0.0 and +0.0 a tie keeps).
"""
from __future__ import annotations

from collections.abc import Callable

from .expr import Add, BufferLoad, Call, Cast, FloatImm, IntImm, Max, Min, Mul, PrimExpr, Sub, Var
from .functor import post_order
from .stmt import BufferStore, For, ForKind

MIN_ROW = 8  # a shorter row gains nothing from vector partial sums
EXTREME_LANES = 32  # running maxima of a max/min row: 4 AVX2 or 2 AVX-512 registers
_FLOATS = ("float32", "float64")


def row_stride(e: PrimExpr, var: Var) -> int | None:
    """The constant d with ``e(var + 1) - e(var) == d`` when ``e`` is affine in ``var`` with
    a constant coefficient; None otherwise (e.g. ``var // 8`` or ``var * n``)."""
    if e is var:
        return 1
    if isinstance(e, (IntImm, FloatImm, Var)):
        return 0
    if isinstance(e, Cast):
        return row_stride(e.value, var)
    if isinstance(e, (Add, Sub)):
        a, b = row_stride(e.a, var), row_stride(e.b, var)
        if a is None or b is None:
            return None
        return a + b if isinstance(e, Add) else a - b
    if isinstance(e, Mul):
        a, b = row_stride(e.a, var), row_stride(e.b, var)
        if a == 0 and b == 0:
            return 0
        if a is not None and b == 0 and isinstance(e.b, IntImm):
            return a * e.b.value
        if b is not None and a == 0 and isinstance(e.a, IntImm):
            return b * e.a.value
        return None
    return 0 if all(n is not var for n in post_order(e)) else None


def row_sum(loop: For, flat_index: Callable[[object, tuple], PrimExpr]
            ) -> tuple[BufferStore, PrimExpr] | None:
    """(the store, the summand) when ``loop`` is ``for k: B[i] = B[i] + e`` over a float
    buffer with ``i`` free of ``k``, ``e`` not reading ``B``, every load of ``e`` at stride 0
    or 1 in ``k`` (``flat_index(buffer, indices)`` gives a load's flat index) and at least
    ``MIN_ROW`` iterations when the extent is static; else None."""
    store = loop.body
    if loop.kind != ForKind.SERIAL or not isinstance(store, BufferStore) or \
            store.buffer.dtype not in _FLOATS:
        return None
    if isinstance(loop.extent, IntImm) and loop.extent.value < MIN_ROW:
        return None
    value = store.value
    if not isinstance(value, Add) or value.dtype != store.buffer.dtype:
        return None
    return _accumulation(loop, store, flat_index)


def row_extreme(loop: For, flat_index: Callable[[object, tuple], PrimExpr]
                ) -> tuple[BufferStore, PrimExpr, str] | None:
    """(the store, the operand, "max" or "min") when ``loop`` is ``for k: B[i] = max(B[i],
    e)`` (or min) under the conditions of ``row_sum``; else None."""
    store = loop.body
    if loop.kind != ForKind.SERIAL or not isinstance(store, BufferStore) or \
            store.buffer.dtype not in _FLOATS:
        return None
    if isinstance(loop.extent, IntImm) and loop.extent.value < EXTREME_LANES:
        return None  # not one whole vector step
    value = store.value
    if not isinstance(value, (Max, Min)) or value.dtype != store.buffer.dtype:
        return None
    found = _accumulation(loop, store, flat_index)
    return None if found is None else (*found, "max" if isinstance(value, Max) else "min")


def _accumulation(loop: For, store: BufferStore, flat_index: Callable[[object, tuple], PrimExpr]
                  ) -> tuple[BufferStore, PrimExpr] | None:
    # (store, the other operand) when the store's value combines ``B[i]`` (its own target)
    # with an operand free of ``B`` whose loads are contiguous or invariant in the loop
    acc, summand = store.value.a, store.value.b
    if not (isinstance(acc, BufferLoad) and acc.buffer is store.buffer):
        acc, summand = summand, acc
    if not (isinstance(acc, BufferLoad) and acc.buffer is store.buffer and
            len(acc.indices) == len(store.indices) and
            all(a is b or str(a) == str(b) for a, b in zip(acc.indices, store.indices))):
        return None
    var = loop.loop_var
    if any(row_stride(i, var) != 0 for i in store.indices):
        return None
    for node in post_order(summand):
        if isinstance(node, BufferLoad):
            if node.buffer is store.buffer or \
                    row_stride(flat_index(node.buffer, node.indices), var) not in (0, 1):
                return None
        elif isinstance(node, Call) and node.op in ("tir.call_extern", "tir.call_packed"):
            return None  # a call with effects of its own
    return store, summand

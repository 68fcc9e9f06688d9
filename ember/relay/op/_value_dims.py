"""Output sizes fixed by tensor *values*: the dims of the ``dyn.*`` ops and arange's length.

Most ops size their output from their inputs' shapes, and the VM derives their shape
functions from the compute rules (``backend/vm/shape_func.py``). A few take the size as a
value: ``dyn.reshape(x, newshape)``, ``dyn.full(v, shape)``, ``arange(start, stop, step)``.
Their compute rules call ``value_dim(name, formula)`` for each such dimension:

- in the kernel, the dimension is a fresh size variable read from the output argument's
  shape (the VM allocated the output after running the shape function), so the kernel
  never reads the value to size anything;
- in the shape function, ``collect_value_dims`` gathers the formulas (tir expressions that
  read the inputs' values, ``read(t, k)``, and their sizes) and the shape function
  computes each dimension from them; it takes those inputs' values as arguments (the op
  names them with ``defop(shape_data=...)``).

``check_value(cond, message)`` states what a value must satisfy (a size is not negative, a
reshape keeps the element count). The shape function checks it before anything is
allocated and fails with the message, which should name the op and, where the caller gave
one, the node it came from (the ``where`` attribute of the ``dyn.*`` ops).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from ...te import tensor as te
from ...tir import op as tir
from ...tir.expr import PrimExpr, Var

INT64 = "int64"
# Sizes a kernel can index with its int32 loop variables.
MAX_DIM = 2**31 - 1


@dataclass
class ValueDims:
    """What compute rules declared while lowering: formula of each value-sized variable
    (by identity), and the checks on the values."""

    formulas: dict[Var, PrimExpr] = field(default_factory=dict)
    checks: list[tuple[PrimExpr, str]] = field(default_factory=list)


_SINK: ContextVar[ValueDims | None] = ContextVar("ember_value_dims", default=None)


@contextmanager
def collect_value_dims() -> Iterator[ValueDims]:
    """The formulas and checks that compute rules declare inside the block."""
    sink = ValueDims()
    token = _SINK.set(sink)
    try:
        yield sink
    finally:
        _SINK.reset(token)


def value_dim(name: str, formula: PrimExpr, what: str) -> Var:
    """A dimension of size ``formula`` (int64, computed from values): a fresh size variable.
    ``what`` names the op (and node) for the check that the size is in range."""
    formula = tir.cast(formula, INT64)
    var = te.size_var(name)
    check_value(tir.all(formula >= 0, formula <= MAX_DIM),
                f"{what}: a computed output size is negative or larger than {MAX_DIM}")
    sink = _SINK.get()
    if sink is not None:
        sink.formulas[var] = formula
    return var


def check_value(cond: PrimExpr, message: str) -> None:
    """A condition on input values that the shape function checks (see the module doc)."""
    sink = _SINK.get()
    if sink is not None:
        sink.checks.append((cond, message))


def read(t: te.Tensor, *index: int | PrimExpr) -> PrimExpr:
    """Element ``index`` of ``t`` as int64 (a scalar tensor: no index)."""
    idx = tuple(tir.const(i) if isinstance(i, int) else i for i in index)
    return tir.cast(t(*idx), INT64)


def dim64(d: PrimExpr | int) -> PrimExpr:
    """A te dimension as int64."""
    return tir.cast(tir.const(d) if isinstance(d, int) else d, INT64)


def product(dims: list[PrimExpr]) -> PrimExpr:
    out: PrimExpr = tir.const(1, INT64)
    for d in dims:
        out = out * d
    return out

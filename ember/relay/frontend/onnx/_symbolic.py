"""Symbolic sizes: following ``Shape`` values through an import when axes are dynamic.

A model input with a symbolic axis (``dim_param`` "seq", or no size at all) is ``?`` in the IR.
While importing, the typer sees it as a ``ShapeVar`` (one per dim_param name, so two inputs
that share "seq" have the same size), which the op type relations carry through: the output
of ``MatMul(x[batch, seq, 64], W)`` is ``[batch, seq, 64]``.

Exported models compute shapes at run time (``Shape -> Gather -> Unsqueeze -> Concat ->
Reshape``). When a shape holds symbolic sizes its value is not a constant, so the importer
also records it as a ``SymShape``: a tuple of ints and ShapeVars. ``Reshape`` can then turn
``[batch, seq, 12, 64]`` into ``reshape(x, (0, 0, 12, 64))`` when ``x`` has those sizes in
those places, and ``Expand``/``ConstantOfShape``/``Range`` build tensors of a symbolic size
from a "template" cut out of a tensor that has it (``Sizes.template``), so such models build
for the VM with shapes computed from the inputs' shapes alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ....ir.expr import RelayExpr
from ....ir.types import Any, ShapeVar, TensorType
from ... import op as _op
from ._typer import Typer

Elem = int | ShapeVar


@dataclass(frozen=True)
class SymShape:
    """A small integer tensor (rank 0 or 1) whose elements are ints or symbolic sizes."""

    elems: tuple[Elem, ...]
    scalar: bool = False
    # The tensor whose whole shape this is (``Shape(t)``), so that ``Expand(x, Shape(t))``
    # can read the shape off ``t`` instead of building a template of it.
    of: RelayExpr | None = field(default=None, compare=False)

    @property
    def is_static(self) -> bool:
        return all(isinstance(e, int) for e in self.elems)


class Sizes:
    """The ShapeVars of one import and, for each, a tensor (and axis) that has that size."""

    def __init__(self, typer: Typer) -> None:
        self.typer = typer
        self._by_name: dict[str, ShapeVar] = {}
        self.source: dict[ShapeVar, tuple[RelayExpr, int]] = {}
        self._count = 0

    def named(self, name: str | None) -> ShapeVar:
        """The ShapeVar of ``dim_param`` ``name`` (a fresh one for an unnamed axis)."""
        if name is None:
            self._count += 1
            return ShapeVar(f"?{self._count}")
        if name not in self._by_name:
            self._by_name[name] = ShapeVar(name)
        return self._by_name[name]

    def note_source(self, expr: RelayExpr, ty: TensorType) -> None:
        """Remember that ``expr`` carries each ShapeVar of ``ty`` (the first one seen wins)."""
        for axis, d in enumerate(ty.shape):
            if isinstance(d, ShapeVar) and d not in self.source:
                self.source[d] = (expr, axis)

    def elems_of(self, expr: RelayExpr, ty: TensorType) -> tuple[Elem, ...]:
        """The shape of ``expr`` as SymShape elements (``?`` axes get fresh ShapeVars)."""
        out: list[Elem] = []
        for axis, d in enumerate(ty.shape):
            if isinstance(d, Any):
                self._count += 1
                d = ShapeVar(f"?{self._count}")
                self.source[d] = (expr, axis)
            elif isinstance(d, ShapeVar) and d not in self.source:
                self.source[d] = (expr, axis)
            out.append(d)  # type: ignore[arg-type]
        return tuple(out)

    def template(self, elems: tuple[Elem, ...]) -> RelayExpr:
        """A bool tensor of shape ``elems`` (all False), built from tensors that have the
        symbolic sizes, so that its shape is computed from input shapes at run time."""
        rank = len(elems)
        static = tuple(e if isinstance(e, int) else 1 for e in elems)
        out: RelayExpr = _op.zeros(static, "bool")
        for pos, e in enumerate(elems):
            if not isinstance(e, int):
                out = _op.logical_or(out, self._axis_line(e, pos, rank))
        return out

    def _axis_line(self, size: ShapeVar, pos: int, rank: int) -> RelayExpr:
        """False values of shape (1, .., n, .., 1) (n at ``pos``), n being ``size``: the first
        element along every other axis of a tensor that has the size, zeroed."""
        src, axis = self.source[size]
        ndim = self.typer.type_of(src).ndim  # type: ignore[attr-defined]
        ends = [1 if k != axis else -1 for k in range(ndim)]
        line = _op.strided_slice(src, [0] * ndim, ends, axes=list(range(ndim)),
                                 slice_mode="size")
        shape = [1] * rank
        shape[pos] = -1
        return _op.cast(_op.zeros_like(_op.reshape(line, shape)), "bool")

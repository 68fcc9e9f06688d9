"""Loop-IR statements, buffers and PrimFunc.

A Buffer is a named, typed, row-major (or explicitly strided) region behind a ``handle`` Var;
loads and stores index it with one index per dimension and the C emitter flattens them.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from ..ir.module import register_function_kind
from ..runtime.object import Object
from .expr import PrimExpr, Var
from .op import const, convert


@dataclass(eq=False)
class Buffer(Object):
    """A tensor in memory: ``data`` (a handle Var), ``shape``, ``dtype``, optional strides."""

    name: str
    shape: tuple[PrimExpr, ...]
    dtype: str = "float32"
    data: Var = field(default=None)  # type: ignore[assignment]
    strides: tuple[PrimExpr, ...] = ()
    elem_offset: PrimExpr | None = None
    scope: str = "global"

    def __post_init__(self) -> None:
        self.shape = tuple(convert(s) for s in self.shape)
        if self.data is None:
            self.data = Var(self.name, "handle")

    def vload(self, indices: Sequence[Any]) -> PrimExpr:
        """A load of this buffer at ``indices``."""
        from .expr import BufferLoad

        return BufferLoad(self, tuple(convert(i) for i in indices), self.dtype)

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {list(self.shape)}, {self.dtype})"


def decl_buffer(shape: Sequence[Any], dtype: str = "float32", name: str = "buffer") -> Buffer:
    """A new buffer of ``shape`` and ``dtype``."""
    return Buffer(name, tuple(convert(s) for s in shape), dtype)


class Stmt(Object):
    """Base of all loop-IR statements."""

    __slots__ = ()

    def __str__(self) -> str:
        from .printer import stmt_str

        return stmt_str(self)

    __repr__ = __str__


class ForKind(IntEnum):
    SERIAL = 0
    PARALLEL = 1
    VECTORIZED = 2
    UNROLLED = 3


@dataclass(eq=False, repr=False)
class For(Stmt):
    """``for (loop_var = min; loop_var < min + extent; ++loop_var) body``.

    ``annotations`` carries schedule pragmas (``{"pragma_unroll": None}``) into the printed IR.
    """

    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: ForKind
    body: Stmt
    annotations: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Relay-era passes write For(v, 0, 8, ...) with Python ints.
        self.min, self.extent = convert(self.min), convert(self.extent)


@dataclass(eq=False, repr=False)
class BufferStore(Stmt):
    """``buffer[indices] = value``."""

    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]


@dataclass(eq=False, repr=False)
class Allocate(Stmt):
    """Storage for ``buffer`` while ``body`` runs (stack, or workspace when large/dynamic)."""

    buffer: Buffer
    body: Stmt


@dataclass(eq=False, repr=False)
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(eq=False, repr=False)
class LetStmt(Stmt):
    var: Var
    value: PrimExpr
    body: Stmt


@dataclass(eq=False, repr=False)
class SeqStmt(Stmt):
    seq: tuple[Stmt, ...]


@dataclass(eq=False, repr=False)
class Evaluate(Stmt):
    """Evaluate an expression for its effect (a call); a nonzero call_packed result fails."""

    value: PrimExpr


@dataclass(eq=False, repr=False)
class AssertStmt(Stmt):
    """Fail with ``message`` (via TVMPackedFuncSetLastError) unless ``condition`` holds; an
    empty message keeps the error that the call in ``condition`` set itself."""

    condition: PrimExpr
    message: PrimExpr
    body: Stmt


def seq(*stmts: Stmt | None) -> Stmt:
    """A SeqStmt of the non-empty statements, flattening nested sequences."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(tuple(flat))


@register_function_kind  # an IRModule may hold it (what ember.lower returns)
@dataclass(eq=False)
class PrimFunc(Object):
    """A lowered function: ``params`` (handle Vars for buffers, scalar Vars), their buffers.

    attrs: ``global_symbol`` (the packed function's name) and ``from_relay`` (a comment
    saying what the function was made from, printed at the top of the C function).
    """

    params: tuple[Var, ...]
    buffer_map: dict[Var, Buffer]
    body: Stmt
    ret_type: Any = None
    attrs: dict[str, Any] = field(default_factory=dict)

    def with_attr(self, key: str, value: Any) -> PrimFunc:
        """A copy with ``attrs[key] = value``."""
        return PrimFunc(self.params, self.buffer_map, self.body, self.ret_type,
                        {**self.attrs, key: value})

    def with_body(self, body: Stmt) -> PrimFunc:
        """A copy with ``body`` (what a tir pass returns)."""
        return PrimFunc(self.params, self.buffer_map, body, self.ret_type, dict(self.attrs))

    @property
    def name(self) -> str:
        return str(self.attrs.get("global_symbol", "main"))

    def __str__(self) -> str:
        from .printer import func_str

        return func_str(self)

    def script(self) -> str:
        return str(self)

    __repr__ = __str__


def const_int(v: int) -> PrimExpr:
    return const(v, "int32")

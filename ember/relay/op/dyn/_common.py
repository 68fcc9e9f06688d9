"""What the ``dyn.*`` ops share: the ``where`` label, checks of the tensors that carry
shapes, and the numpy side of their value checks."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ....ir.types import TensorType
from ....runtime.errors import ArgumentError
from .._attrs_base import OpAttrs, attrs_class
from .._shape import fail, fmt_type


@attrs_class("DynAttrs")
class DynAttrs(OpAttrs):
    """The attrs of dyn.broadcast_to and dyn.tile: ``where`` the op came from (an ONNX
    node, "" for none), named by the errors its values raise at run time."""

    where: str = ""
    _op: ClassVar[str] = "dyn"

    def __post_init__(self) -> None:
        self._set("where", str(self.where))


def label(op: str, attrs: Any) -> str:
    """``dyn.reshape`` or ``dyn.reshape (Reshape node '/Reshape')``."""
    where = getattr(attrs, "where", "")
    return f"{op} ({where})" if where else op


def is_int(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def vector_length(op: str, ty: TensorType, what: str) -> int:
    """The static length of ``ty``, a 1-D integer tensor carrying sizes or indices."""
    if ty.ndim != 1 or not is_int(ty.dtype):
        raise fail(op, f"{what} must be a 1-D integer tensor, got {fmt_type(ty)}")
    n = ty.shape[0]
    if not isinstance(n, int):
        raise fail(op, f"{what} must have a static length (it fixes the output's rank), "
                       f"got {fmt_type(ty)}")
    return n


def int_scalar(op: str, ty: TensorType, what: str) -> None:
    """``ty`` must be an integer scalar (or a one-element vector, read as one)."""
    if not is_int(ty.dtype) or not (ty.ndim == 0 or ty.shape == (1,)):
        raise fail(op, f"{what} must be an integer scalar, got {fmt_type(ty)}")


def ints(values: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


def require(ok: bool, where: str, message: str) -> None:
    """The numpy references' side of the checks the shape functions make."""
    if not ok:
        raise ArgumentError(f"{where}: {message}")


def sizes_ok(where: str, sizes: Sequence[int], what: str) -> None:
    require(all(s >= 0 for s in sizes), where, f"{what} {list(sizes)} has a negative size")

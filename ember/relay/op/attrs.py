"""Per-op attribute records of the tensor, reduce and transform ops.

Each record is a frozen dataclass with typed, defaulted fields. ``__post_init__`` normalises
what users pass the way Relay's Python API accepts it (lists become tuples, an int axis becomes
a 1-tuple, dtypes are canonical strings) and rejects bad values with ``OpAttributeInvalid``
naming the op, the attribute and the value. The nn records live in ``nn/_attrs.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ._attrs_base import OpAttrs, attrs_class


@attrs_class("CastAttrs")
class CastAttrs(OpAttrs):
    """cast: the target dtype."""

    dtype: str = "float32"
    _op: ClassVar[str] = "cast"

    def __post_init__(self) -> None:
        self._dtype("dtype")


@attrs_class("ClipAttrs")
class ClipAttrs(OpAttrs):
    """clip: the bounds, applied in the input dtype."""

    a_min: float = float("-inf")
    a_max: float = float("inf")
    _op: ClassVar[str] = "clip"

    def __post_init__(self) -> None:
        self._set("a_min", float(self.a_min))
        self._set("a_max", float(self.a_max))
        if self.a_min > self.a_max:
            raise self._invalid("a_min", f"<= a_max ({self.a_max})")


@attrs_class("InitOpAttrs")
class InitOpAttrs(OpAttrs):
    """zeros/ones/full: output shape and dtype ("" in full: the fill value's dtype)."""

    shape: tuple[int, ...] = ()
    dtype: str = ""
    _op: ClassVar[str] = "zeros/ones/full"

    def __post_init__(self) -> None:
        self._ints("shape")
        self._positive("shape", allow_zero=True)
        self._dtype("dtype", allow_empty=True)


@dataclass(frozen=True, slots=True)
class _AxesAttrs(OpAttrs):
    """The fields and checks every reduction shares (not an op's record)."""

    axis: tuple[int, ...] | None = None
    keepdims: bool = False
    exclude: bool = False

    def __post_init__(self) -> None:
        self._ints("axis", optional=True)
        self._bool("keepdims", "exclude")


@attrs_class("ReduceAttrs")
class ReduceAttrs(_AxesAttrs):
    """sum/mean/max/min/prod: axes to reduce (None: all), keepdims, exclude."""

    _op: ClassVar[str] = "reduce"


@attrs_class("ArgReduceAttrs")
class ArgReduceAttrs(_AxesAttrs):
    """argmax/argmin: as ReduceAttrs, plus which index wins a tie."""

    select_last_index: bool = False
    _op: ClassVar[str] = "argmax/argmin"

    def __post_init__(self) -> None:
        _AxesAttrs.__post_init__(self)  # (no zero-argument super() in a slotted dataclass)
        self._bool("select_last_index")


@attrs_class("VarianceAttrs")
class VarianceAttrs(_AxesAttrs):
    """variance: as ReduceAttrs, plus ``unbiased`` (divide by N-1)."""

    unbiased: bool = False
    _op: ClassVar[str] = "variance"

    def __post_init__(self) -> None:
        _AxesAttrs.__post_init__(self)
        self._bool("unbiased")


@attrs_class("ReshapeAttrs")
class ReshapeAttrs(OpAttrs):
    """reshape: the new shape, with the special values 0, -1, -2, -3, -4."""

    newshape: tuple[int, ...] = ()
    _op: ClassVar[str] = "reshape"

    def __post_init__(self) -> None:
        self._ints("newshape")
        if any(v < -4 for v in self.newshape):
            raise self._invalid("newshape", "sizes >= 0 or one of the special values -1..-4")


@attrs_class("ReshapeLikeAttrs")
class ReshapeLikeAttrs(OpAttrs):
    """reshape_like: which dims of data [lhs_begin, lhs_end) take the dims of shape_like."""

    lhs_begin: int = 0
    lhs_end: int | None = None
    rhs_begin: int = 0
    rhs_end: int | None = None
    _op: ClassVar[str] = "reshape_like"

    def __post_init__(self) -> None:
        for name in ("lhs_begin", "rhs_begin"):
            self._int(name)
        for name in ("lhs_end", "rhs_end"):
            self._int(name, optional=True)


@attrs_class("TransposeAttrs")
class TransposeAttrs(OpAttrs):
    """transpose: the permutation (None: reverse the axes)."""

    axes: tuple[int, ...] | None = None
    _op: ClassVar[str] = "transpose"

    def __post_init__(self) -> None:
        self._ints("axes", optional=True)


@attrs_class("SqueezeAttrs")
class SqueezeAttrs(OpAttrs):
    """squeeze: axes of size 1 to drop (None: every axis of size 1)."""

    axis: tuple[int, ...] | None = None
    _op: ClassVar[str] = "squeeze"

    def __post_init__(self) -> None:
        self._ints("axis", optional=True)


# numpy holds at most 64 dimensions; a larger count could only build a huge shape list
MAX_NEWAXIS = 64


def check_num_newaxis(attrs: OpAttrs) -> None:
    """``attrs.num_newaxis`` is an int in [0, MAX_NEWAXIS] (expand_dims, dyn.expand_dims)."""
    attrs._int("num_newaxis")
    if not 0 <= attrs.num_newaxis <= MAX_NEWAXIS:  # type: ignore[attr-defined]
        raise attrs._invalid("num_newaxis", f"an int >= 0 and <= {MAX_NEWAXIS}")


@attrs_class("ExpandDimsAttrs")
class ExpandDimsAttrs(OpAttrs):
    """expand_dims: where to insert ``num_newaxis`` axes of size 1."""

    axis: int = 0
    num_newaxis: int = 1
    _op: ClassVar[str] = "expand_dims"

    def __post_init__(self) -> None:
        self._int("axis")
        check_num_newaxis(self)


@attrs_class("ConcatenateAttrs")
class ConcatenateAttrs(OpAttrs):
    """concatenate: the axis to join along."""

    axis: int = 0
    _op: ClassVar[str] = "concatenate"

    def __post_init__(self) -> None:
        self._int("axis")


@attrs_class("StackAttrs")
class StackAttrs(OpAttrs):
    """stack: the position of the new axis."""

    axis: int = 0
    _op: ClassVar[str] = "stack"

    def __post_init__(self) -> None:
        self._int("axis")


@attrs_class("SplitAttrs")
class SplitAttrs(OpAttrs):
    """split: a number of equal sections, or the indices to split at."""

    indices_or_sections: int | tuple[int, ...] = 1
    axis: int = 0
    _op: ClassVar[str] = "split"

    def __post_init__(self) -> None:
        if isinstance(self.indices_or_sections, (list, tuple, np.ndarray)):
            self._ints("indices_or_sections")
            if list(self.indices_or_sections) != sorted(self.indices_or_sections):
                raise self._invalid("indices_or_sections", "increasing split indices")
        else:
            self._int("indices_or_sections")
            self._positive("indices_or_sections")
        self._int("axis")


@attrs_class("TakeAttrs")
class TakeAttrs(OpAttrs):
    """take: axis (None: index the flattened data), batch dims and out-of-range mode."""

    axis: int | None = None
    batch_dims: int = 0
    mode: str = "clip"
    _op: ClassVar[str] = "take"

    def __post_init__(self) -> None:
        self._int("axis", optional=True)
        self._int("batch_dims")
        self._choice("mode", ("clip", "wrap", "fast"))


@attrs_class("StridedSliceAttrs")
class StridedSliceAttrs(OpAttrs):
    """strided_slice: begin/end/strides per axis (``axes`` picks the axes they refer to).

    slice_mode "end": end is exclusive; "size": end is a size (-1: to the end), strides ignored.
    """

    begin: tuple[int, ...] = ()
    end: tuple[int, ...] = ()
    strides: tuple[int, ...] = (1,)
    axes: tuple[int, ...] | None = None
    slice_mode: str = "end"
    _op: ClassVar[str] = "strided_slice"

    def __post_init__(self) -> None:
        for name in ("begin", "end", "strides"):
            self._ints(name)
        self._ints("axes", optional=True)
        self._choice("slice_mode", ("end", "size"))
        if 0 in self.strides:
            raise self._invalid("strides", "non-zero")
        if self.axes is not None and not len(self.axes) == len(self.begin) == len(self.end):
            raise self._invalid("axes", f"as long as begin and end ({len(self.begin)})")


@attrs_class("BroadcastToAttrs")
class BroadcastToAttrs(OpAttrs):
    """broadcast_to: the target shape."""

    shape: tuple[int, ...] = ()
    _op: ClassVar[str] = "broadcast_to"

    def __post_init__(self) -> None:
        self._ints("shape")
        self._positive("shape", allow_zero=True)


@attrs_class("TileAttrs")
class TileAttrs(OpAttrs):
    """tile: repetitions per axis (numpy.tile rules when the lengths differ)."""

    reps: tuple[int, ...] = ()
    _op: ClassVar[str] = "tile"

    def __post_init__(self) -> None:
        self._ints("reps")
        self._positive("reps")


@attrs_class("RepeatAttrs")
class RepeatAttrs(OpAttrs):
    """repeat: each element ``repeats`` times along ``axis``."""

    repeats: int = 1
    axis: int = 0
    _op: ClassVar[str] = "repeat"

    def __post_init__(self) -> None:
        self._int("repeats")
        self._positive("repeats")
        self._int("axis")


@attrs_class("ReverseAttrs")
class ReverseAttrs(OpAttrs):
    """reverse: the axis to flip."""

    axis: int = 0
    _op: ClassVar[str] = "reverse"

    def __post_init__(self) -> None:
        self._int("axis")


@attrs_class("ArangeAttrs")
class ArangeAttrs(OpAttrs):
    """arange: output dtype, plus start/stop/step when they are constants (for the type).

    As in Relay, the interval is passed both as arguments and, when known, as attributes:
    a type relation sees only types, so the values are what make the length static.
    """

    start: float | None = None
    stop: float | None = None
    step: float | None = None
    dtype: str = "float32"
    _op: ClassVar[str] = "arange"

    def __post_init__(self) -> None:
        for name in ("start", "stop", "step"):
            if getattr(self, name) is not None:
                self._set(name, float(getattr(self, name)))
        if self.step == 0:
            raise self._invalid("step", "non-zero")
        self._dtype("dtype")


@attrs_class("OneHotAttrs")
class OneHotAttrs(OpAttrs):
    """one_hot: depth of the new axis, where it goes, and the output dtype."""

    depth: int = 1
    axis: int = -1
    dtype: str = "float32"
    _op: ClassVar[str] = "one_hot"

    def __post_init__(self) -> None:
        self._int("depth")
        self._positive("depth")
        self._int("axis")
        self._dtype("dtype")


@attrs_class("LayoutTransformAttrs")
class LayoutTransformAttrs(OpAttrs):
    """layout_transform: source and destination layouts such as NCHW, NHWC, NCHW8c."""

    src_layout: str = "NCHW"
    dst_layout: str = "NCHW"
    _op: ClassVar[str] = "layout_transform"

    def __post_init__(self) -> None:
        from ._layout import Layout

        for name in ("src_layout", "dst_layout"):
            try:
                Layout.parse(getattr(self, name))
            except ValueError as err:
                raise self._invalid(name, f"a valid layout ({err})") from None


@attrs_class("ShapeOfAttrs")
class ShapeOfAttrs(OpAttrs):
    """shape_of: the dtype of the returned shape vector."""

    dtype: str = "int32"
    _op: ClassVar[str] = "shape_of"

    def __post_init__(self) -> None:
        self._dtype("dtype")

"""Data layouts such as ``NCHW``, ``NHWC`` or ``NCHW8c`` and conversions between them.

An upper-case letter is a primal axis; a number followed by a lower-case letter is a block of
that primal axis (``NCHW8c``: channels split into C/8 outer blocks of 8). Converting between
two layouts with the same primal axes is a reshape/transpose, which both the type relation
(on dims) and the reference (on arrays) of ``layout_transform`` use.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...ir.types import Any, Dim
from ._shape import dim_mul, known

_TOKEN = re.compile(r"(\d*)([A-Za-z])")
_NCHWC = re.compile(r"^NCHW([1-9]\d*)c$")


def nchwc_lanes(layout: str) -> int:
    """The block L of the channel-blocked ``NCHW<L>c`` (what AlterOpLayout plans); 0 for any
    other layout."""
    m = _NCHWC.match(layout) if isinstance(layout, str) else None
    return int(m.group(1)) if m else 0


@dataclass(frozen=True)
class Layout:
    """Parsed layout: per axis its letter and, for a sub-axis, its block factor."""

    name: str
    axes: tuple[tuple[str, int], ...]  # (letter, factor); factor 0 for primal axes

    @staticmethod
    def parse(name: str) -> Layout:
        if not isinstance(name, str) or not name:
            raise ValueError("a layout is a non-empty string such as 'NCHW'")
        axes, pos = [], 0
        for m in _TOKEN.finditer(name):
            if m.start() != pos:
                break
            pos = m.end()
            factor, letter = m.group(1), m.group(2)
            if letter.isupper() == bool(factor):
                raise ValueError(f"{name!r}: a block size goes with a lower-case sub-axis, "
                                 "as in NCHW8c")
            axes.append((letter, int(factor) if factor else 0))
        letters = [a for a, _ in axes]
        if pos != len(name) or len(set(letters)) != len(letters):
            raise ValueError(f"{name!r} is not a layout (letters, each once, e.g. NCHW8c)")
        for letter, factor in axes:
            if factor and letter.upper() not in letters:
                raise ValueError(f"{name!r}: sub-axis {letter} has no primal axis {letter.upper()}")
            if factor == 0 and letter.islower():
                raise ValueError(f"{name!r}: sub-axis {letter} needs a block size")
        return Layout(name, tuple(axes))

    @property
    def primal(self) -> str:
        return "".join(a for a, f in self.axes if not f)

    def index(self, letter: str) -> int:
        return [a for a, _ in self.axes].index(letter)

    def has_sub(self, letter: str) -> bool:
        return letter.lower() in [a for a, _ in self.axes]

    def factor(self, letter: str) -> int:
        """The block size of primal axis ``letter`` (1 when it is not split)."""
        return next((f for a, f in self.axes if a == letter.lower() and f), 1)


def primal_extents(layout: Layout, shape: tuple[Dim, ...]) -> dict[str, Dim]:
    """The full size of each primal axis (outer blocks times block size)."""
    return {a: dim_mul(shape[layout.index(a)], layout.factor(a)) for a in layout.primal}


def transform_shape(src: Layout, dst: Layout, shape: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """The shape in ``dst`` of a tensor of ``shape`` in ``src``; ValueError if not divisible."""
    full = primal_extents(src, shape)
    out: list[Dim] = []
    for letter, factor in dst.axes:
        if factor:
            out.append(factor)
            continue
        size, block = full[letter], dst.factor(letter)
        if known(size) and size % block:  # type: ignore[operator]
            raise ValueError(f"axis {letter} of size {size} does not split into blocks of {block}")
        out.append(size // block if known(size) else Any())  # type: ignore[operator]
    return tuple(out)


def to_primal(layout: Layout, arr: np.ndarray) -> np.ndarray:
    """The array with each split axis merged back, axes in the order of ``layout.primal``."""
    order, sizes = [], []
    for letter in layout.primal:
        order.append(layout.index(letter))
        sizes.append(arr.shape[order[-1]] * layout.factor(letter))
        if layout.has_sub(letter):
            order.append(layout.index(letter.lower()))
    return arr.transpose(order).reshape(sizes)


def from_primal(layout: Layout, arr: np.ndarray, primal: str) -> np.ndarray:
    """Inverse of ``to_primal``: ``arr`` has axes in the order of ``primal``."""
    split_shape, split_names = [], []
    for letter, size in zip(primal, arr.shape):
        block, sub = layout.factor(letter), layout.has_sub(letter)
        split_shape += [size // block, block] if sub else [size]
        split_names += [letter, letter.lower()] if sub else [letter]
    order = [split_names.index(a) for a, _ in layout.axes]
    return arr.reshape(split_shape).transpose(order)

"""reshape's -1 over symbolic sizes: the same ``?`` (or ShapeVar) kept on both sides cancels,
so the inferred size is static. A transformer's head split ``(b, s, 32) -> (0, 0, 2, -1)``
has a static head size of 16: its kernels then vectorise the head axis and know their work."""
from __future__ import annotations

from _op_helpers import infer

from ember.ir.types import Any, ShapeVar, TensorType


def test_an_unknown_size_kept_by_a_copy_cancels() -> None:
    b, s = Any(), Any()
    out = infer("reshape", TensorType((b, s, 32)), newshape=(0, 0, 2, -1))
    assert out.shape[0] is b and out.shape[1] is s and tuple(out.shape[2:]) == (2, 16)


def test_a_shape_var_and_an_unknown_size_cancel_alike() -> None:
    n, s = ShapeVar("n"), Any()
    assert tuple(infer("reshape", TensorType((n, s, 6)), newshape=(0, 0, -1, 3)).shape[2:]) == \
        (2, 3)


def test_two_different_unknown_sizes_do_not_cancel() -> None:
    out = infer("reshape", TensorType((Any(), 6)), newshape=(3, -1))  # the ? is not kept
    assert isinstance(out.shape[1], Any)
    out = infer("reshape", TensorType((Any(), Any(), 4)), newshape=(0, -1))
    assert isinstance(out.shape[1], Any)  # the second ? is not on the output's side

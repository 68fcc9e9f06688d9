"""The range of a float32 tensor (its smallest and largest value) through the C kernel of
``ember/include/ember/kernels/minmax.h``; :func:`reference` is the numpy oracle."""
from __future__ import annotations

import numpy as np

from ...te import tensor as te
from ...tir import op as tir
from .sizes import dims, prod, succeeds

MINMAX_HEADER = "ember/kernels/minmax.h"


def reference(x: np.ndarray) -> np.ndarray:
    """(min(x), max(x)) as float32 (2,): NaN if any value is."""
    return np.array([np.min(x), np.max(x)], np.float32)


def minmax(x: te.Tensor) -> te.Tensor:
    """The ``ember_minmax`` stage: float32 (2,)."""
    n = prod(dims(x.shape))

    def body(ins, outs):
        call = tir.call_extern("int32", "ember_minmax", ins[0].data, outs[0].data, n,
                               header=MINMAX_HEADER)
        return succeeds(call, "nn.contrib_minmax: the input is empty (a run-time size of 0): it has no range")

    return te.extern((2,), [x], body, name="T_minmax", dtype="float32", tag="minmax_kernel")

"""Checks the zoo families' tests share: onnxruntime on a twin, and closeness of two outputs
(rtol 1e-4, atol 1e-5 of the larger of 1 and the reference's peak)."""
from __future__ import annotations

from typing import Any

import numpy as np


def onnxruntime_output(model: Any, x: np.ndarray) -> np.ndarray:
    """The model's one output on input ``data`` = ``x``, by onnxruntime's CPU provider."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    (out,) = sess.run(None, {"data": x})
    return out


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)

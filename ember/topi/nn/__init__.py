"""ember.topi.nn: neural-network operators (compute + schedule templates)."""
from __future__ import annotations

from .conv2d import conv2d, conv2d_nchw, conv2d_nhwc  # noqa: F401
from .dense import batch_matmul, dense, matmul  # noqa: F401
from .pad import pad  # noqa: F401

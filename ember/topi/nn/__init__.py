"""ember.topi.nn: neural-network operators (compute + schedule templates)."""
from __future__ import annotations

from .dense import batch_matmul, dense, matmul  # noqa: F401

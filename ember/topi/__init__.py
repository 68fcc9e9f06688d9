"""ember.topi: per-operator compute rules and schedule templates at the tensor-expression level.

Parameters are plain Python values (no Relay attrs). ``auto_schedule(outs)`` picks the template
for a fused group: the anchor's (dense, conv2d, pools, ...) or injective/reduction by pattern.
"""
from __future__ import annotations

from . import (
                        generic,  # noqa: F401
                        nn,  # noqa: F401
)
from .broadcast import *
from .broadcast import broadcast_shape  # noqa: F401
from .reduction import all, any, argmax, argmin, max, mean, min, prod, std, sum, variance  # noqa: F401
from .schedule import auto_schedule, register_anchor, schedule_injective, schedule_reduce  # noqa: F401
from .transform import *

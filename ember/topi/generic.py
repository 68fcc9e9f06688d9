"""TVM-style schedule entry points (``topi.generic.schedule_*``), all backed by auto_schedule."""
from __future__ import annotations

from typing import Any

from ..te.schedule import Schedule
from .schedule import auto_schedule, schedule_injective, schedule_reduce  # noqa: F401


def _auto(outs: Any) -> Schedule:
    return auto_schedule(outs)


schedule_elemwise = schedule_broadcast = schedule_injective
schedule_dense = schedule_batch_matmul = schedule_matmul = _auto
schedule_conv2d_nchw = schedule_conv2d_nhwc = schedule_depthwise_conv2d_nchw = _auto
schedule_depthwise_conv2d_nhwc = schedule_group_conv2d_nchw = schedule_conv2d_transpose_nchw = _auto
schedule_pool = schedule_adaptive_pool = schedule_softmax = _auto

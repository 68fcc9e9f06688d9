"""Small models the micro tests share (``tvm.micro.testing.utils``)."""
from __future__ import annotations

from typing import Any


def get_conv2d_relay_module() -> Any:
    """An int8 NCHW conv2d (data 1x3x64x64, weight 8x3x5x5, padding 2, int32 out), typed."""
    from ... import relay
    from ...ir import IRModule

    data = relay.var("data", relay.TensorType((1, 3, 64, 64), "int8"))
    weight = relay.var("weight", relay.TensorType((8, 3, 5, 5), "int8"))
    y = relay.nn.conv2d(data, weight, padding=(2, 2), channels=8, kernel_size=(5, 5),
                        data_layout="NCHW", kernel_layout="OIHW", out_dtype="int32")
    return relay.transform.InferType()(IRModule.from_expr(relay.Function((data, weight), y)))


__all__ = ["get_conv2d_relay_module"]

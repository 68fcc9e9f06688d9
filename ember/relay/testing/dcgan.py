"""The DCGAN generator (Radford et al. 2015): a code vector to a 64x64 image.

dense(code) -> relu -> reshape to ngf*8 x 4 x 4, then four 4x4/2 transposed convolutions
(8, 16, 32, 64 pixels; batch norm without scale + relu after the first three) and a tanh.
Input ``data`` (batch_size, random_len); output (batch_size, *oshape) in [-1, 1].
``oshape`` is (C, 64, 64) for NCHW or (64, 64, C) for NHWC.
"""
from __future__ import annotations

from ... import relay
from ...ir.expr import Function, RelayExpr
from ...ir.module import IRModule
from ...runtime.ndarray import NDArray
from . import layers
from .init import create_workload

_KERNEL = (4, 4)
_STRIDE = (2, 2)


def deconv2d(data: RelayExpr, channels: int, size: int, layout: str, name: str) -> RelayExpr:
    """A 4x4/2 transposed conv doubling the image to ``size`` x ``size`` with ``channels``.

    Padding (k - 1) // 2 and the output padding that lands exactly on ``size``."""
    pad = tuple((k - 1) // 2 for k in _KERNEL)
    adj = tuple((size + 2 * p - k) % s for p, k, s in zip(pad, _KERNEL, _STRIDE))
    kernel_layout = "IOHW" if layout == "NCHW" else "HWOI"
    return layers.conv2d_transpose(data, kernel_size=_KERNEL, strides=_STRIDE, channels=channels,
                                   padding=pad, output_padding=adj, data_layout=layout,
                                   kernel_layout=kernel_layout, name=name)


def deconv2d_bn_relu(data: RelayExpr, channels: int, size: int, layout: str,
                     prefix: str) -> RelayExpr:
    """deconv2d, batch norm (no scale), relu; weights ``prefix_deconv_weight`` and
    ``prefix_batch_norm_*``."""
    net = deconv2d(data, channels, size, layout, f"{prefix}_deconv")
    net = layers.batch_norm_infer(net, epsilon=1e-5 + 1e-12, scale=False,
                                  axis=layout.index("C"), name=f"{prefix}_batch_norm")
    return relay.nn.relu(net)


def get_net(batch_size: int, random_len: int = 100, oshape: tuple[int, ...] = (3, 64, 64),
            ngf: int = 128, code: RelayExpr | None = None, layout: str = "NCHW",
            dtype: str = "float32") -> Function:
    """The generator Function of ``data`` (or of ``code``'s free variables) and its weights."""
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"dcgan: layout must be 'NCHW' or 'NHWC', got {layout!r}")
    channels = oshape[layout.index("C") - 1]
    if tuple(oshape[layout.index(a) - 1] for a in "HW") != (64, 64):
        raise ValueError(f"dcgan: only 64x64 images are supported, got oshape {oshape} "
                         f"({layout[1:]})")
    if code is None:
        code = relay.var("data", shape=(batch_size, random_len), dtype=dtype)
    net: RelayExpr = relay.nn.relu(relay.nn.dense(code, relay.var("dense_weight"),
                                                  units=4 * 4 * ngf * 8))
    net = relay.reshape(net, (-1, ngf * 8, 4, 4) if layout == "NCHW" else (-1, 4, 4, ngf * 8))
    for i, (width, size) in enumerate(((ngf * 4, 8), (ngf * 2, 16), (ngf, 32)), start=2):
        net = deconv2d_bn_relu(net, width, size, layout, f"g{i}")
    net = relay.tanh(deconv2d(net, channels, 64, layout, "g5_deconv"))
    return relay.Function(relay.analysis.free_vars(net), net)


def get_workload(batch_size: int, oshape: tuple[int, ...] = (3, 64, 64), ngf: int = 128,
                 random_len: int = 100, layout: str = "NCHW",
                 dtype: str = "float32") -> tuple[IRModule, dict[str, NDArray]]:
    """``(mod, params)`` of the DCGAN generator with He-scaled Xavier weights (seed 0)."""
    net = get_net(batch_size, random_len, tuple(oshape), ngf, layout=layout, dtype=dtype)
    return create_workload(net)

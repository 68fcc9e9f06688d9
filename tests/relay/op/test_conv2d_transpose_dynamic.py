"""nn.conv2d_transpose with a symbolic batch, height and width (the VM): a kernel that equals
its stride (a 2x2/2 upsampling: each output pixel one tap, a dot product over channels-last
copies) and any other kernel (the masked gather) both equal the numpy reference at sizes of 1
and sizes that are no multiple of any tile."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.contrib import cc
from ember.relay.op.nn.conv import conv2d_transpose_nchw

pytestmark = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _model(kernel: int, stride: int, channels: int = 5, out: int = 3):
    text = f"""#[version = "0.0.5"]
def @main(%x: Tensor[(?, {channels}, ?, ?), float32], %w: Tensor[({channels}, {out}, {kernel}, {kernel}), float32]) {{
  nn.conv2d_transpose(%x, %w, channels={out}, kernel_size=[{kernel}, {kernel}], strides=[{stride}, {stride}])
}}
"""
    rng = np.random.default_rng(kernel)
    w = rng.standard_normal((channels, out, kernel, kernel)).astype("float32")
    return ember.compile(text, executor="vm", params={"w": w}), w


@pytest.mark.parametrize("kernel, stride", [(2, 2), (3, 2)])
def test_symbolic_transposed_conv_equals_numpy(kernel, stride):
    model, w = _model(kernel, stride)
    rng = np.random.default_rng(0)
    for shape in [(1, 5, 1, 1), (2, 5, 7, 3), (1, 5, 13, 17)]:
        x = rng.standard_normal(shape).astype("float32")
        want = conv2d_transpose_nchw(x, w, (stride, stride), (0, 0, 0, 0), (0, 0), (1, 1), 1)
        np.testing.assert_allclose(model(x), want, rtol=1e-5, atol=1e-5)

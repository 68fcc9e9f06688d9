"""An HRNet-style pose network as torch.onnx writes it (opset 11; built by
``relay.testing.exported_onnx_more.hrnet_small``): branches of 18 and 36 channels (padded to
whole blocks for their convs), fuse layers of 1x1 convs, nearest upsampling, strided convs,
sums and relu. The fuse layers stay in the padded blocks (``AlterOpLayout``: no conv on the
plain NCHW loops, no transform to NCHW before a resize). Against onnxruntime."""
from __future__ import annotations

import re

import numpy as np
import pytest
from _onnx_util import check_without_shapes, run_ort

import ember
from ember.contrib import cc
from ember.relay.testing.exported_onnx_more import hrnet_small

pytestmark = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def test_hrnet_matches_onnxruntime_with_its_fuse_layers_blocked():
    model = hrnet_small(modules=(1, 1, 1), blocks=1, joints=5)
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 32)).astype("float32")
    compiled = ember.compile(model, threads=1, input_shapes={"input": x.shape})
    lib = compiled.factory.lib
    source = "".join(m.get_source() for m in [lib, *lib.imported_modules])
    kernels = set(re.findall(r'func_name_hint="([^"]+)"', source))
    # on the plain NCHW loops only the head (a 1x1 conv to 5 channels whose result leaves)
    assert len({k for k in kernels if k.startswith("fused_nn_conv2d")}) <= 1, kernels
    # no branch goes back to NCHW (and drops its padded lanes) to be resized
    assert not {k for k in kernels if k.startswith("fused_layout_transform") and "resize" in k}
    got = compiled(x)
    want = run_ort(model, {"input": x})[0]
    assert got.shape == (1, 5, 16, 8)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.slow
def test_hrnet_symbolic_size_matches_onnxruntime():
    check_without_shapes(hrnet_small(modules=(1, 1, 1), blocks=1, joints=5), ((1, 3, 64, 32), (2, 3, 32, 64)))

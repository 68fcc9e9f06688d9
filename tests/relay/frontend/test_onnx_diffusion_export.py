"""A diffusion UNet's blocks as torch.onnx writes diffusers' (opset 14; built by
``relay.testing.exported_onnx.diffusion_unet``): GroupNorm as Reshape(N, G, -1) ->
InstanceNormalization -> Reshape back to the input's Shape -> Mul -> Add, SiLU as
x * Sigmoid(x), a timestep embedding added per channel, self-attention over the H x W tokens,
a nearest 2x Resize and a skip Concat; batch, height and width symbolic.

Between the convs (NCHW16c) each GroupNorm goes back to NCHW and forth: the copies run on the
blocked-copy kernel in both builds (FuseOps point 6 keeps the scale, shift and SiLU out of
the copy to NCHW16c; at run-time sizes a copy back to NCHW that is its function's result, or
a reshape of it, is the kernel: ``layout_nchwc.copied_back_result``). Compiled with no shapes
and with a shape, at several shapes (even heights and widths: the stride-2 conv and the 2x
upsampling must line up for the skip), against onnxruntime (float32 rtol/atol 1e-4: conv
sums)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from _onnx_util import SUMS, compare, run_ort

import ember
from ember.contrib import cc
from ember.relay.testing.exported_onnx import diffusion_unet

pytestmark = pytest.mark.skipif(cc.get_cc() is None, reason="no C compiler found")


def _model():
    return diffusion_unet(channels=(32, 64), groups=8, embed=32)


def _source(compiled) -> str:
    lib = compiled.factory.lib
    return "".join(m.get_source() for m in [lib, *lib.imported_modules])


def _feeds(rng: np.random.Generator, n: int, h: int, w: int) -> dict[str, np.ndarray]:
    return {"sample": rng.standard_normal((n, 4, h, w)).astype("float32"),
            "temb": rng.standard_normal((n, 32)).astype("float32")}


def _copies_back_generic(source: str) -> list[str]:
    """The layout-transform kernels (alone or with a reshape) that do not call the kernel."""
    bodies = re.findall(r"int32_t (\w*fused_layout_transform(?:_reshape)?(?:_\d+)?)_unpacked"
                        r"\([^)]*\) \{\n(.*?)\n\}", source, re.S)
    assert bodies
    return [name for name, body in bodies if "ember_layout_nchwc(" not in body]


def test_diffusion_unet_without_shapes_matches_onnxruntime_at_several_shapes():
    model = _model()
    dynamic = ember.compile(model, threads=1)
    assert dynamic.executor == "vm"
    assert _copies_back_generic(_source(dynamic)) == []
    rng = np.random.default_rng(0)
    for n, h, w in ((1, 16, 16), (2, 12, 20), (1, 6, 10), (1, 16, 16)):
        feeds = _feeds(rng, n, h, w)
        got = dynamic(feeds["sample"], feeds["temb"])
        assert got.shape == (n, 4, h, w)
        compare(f"diffusion unet {(n, h, w)}", [got], run_ort(model, feeds), SUMS)


def test_diffusion_unet_with_a_shape_matches_onnxruntime():
    model = _model()
    feeds = _feeds(np.random.default_rng(1), 1, 12, 20)
    static = ember.compile(model, threads=1,
                           input_shapes={k: v.shape for k, v in feeds.items()})
    assert _copies_back_generic(_source(static)) == []
    got = static(feeds["sample"], feeds["temb"])
    compare("diffusion unet static", [got], run_ort(model, feeds), SUMS)

"""A PaddleOCR-style text detector as paddle2onnx writes it (opset 11; built by
``relay.testing.exported_onnx.paddle_text_detector``), with symbolic batch,
height and width (``p2o.DynamicDimension.*``): BatchNormalization kept, hardswish as
x * HardSigmoid(x, 1/6, 0.5), squeeze-excite blocks with HardSigmoid(0.2, 0.5), an FPN whose
top-down path and head upsample with Resize-11 (nearest, asymmetric, floor; roi '', constant
scales 2x) into a Concat, and a head of two ConvTransposes (the last, to one channel, on the
few-output-channel kernel that writes the interleaved output itself, at run-time sizes).

Compiled with no shapes (the VM), the constant-scale Resizes stay ``image.resize2d`` (size 0:
scaled at run time), not ``dyn.image.resize2d``, so they fuse into the Concat as in the static
build; one build runs at several shapes (heights and widths that are multiples of the
network's stride 16 only, so the FPN's sums line up, but no multiple of a vector width, and
a batch of 2) and matches onnxruntime (float32 rtol/atol 1e-4: conv sums)."""
from __future__ import annotations

import numpy as np
import pytest
from _onnx_util import SUMS, compare, run_ort

import ember
from ember import relay
from ember.contrib import cc
from ember.relay.testing.exported_onnx import paddle_text_detector
from ember.relay.transform.dynamic_to_static import dynamic_ops


def paddle_detector():
    """x (N, 3, H, W) -> maps (N, 1, 2H, 2W); H and W multiples of 16 (the deepest stride)."""
    return paddle_text_detector(channels=(8, 16, 24, 32), head=32)


def _source(compiled) -> str:
    lib = compiled.factory.lib
    return "".join(m.get_source() for m in [lib, *lib.imported_modules])


def test_paddle_detector_resizes_are_static_ops_of_run_time_size():
    mod, _ = relay.frontend.from_onnx(paddle_detector())
    assert dynamic_ops(mod) == [], dynamic_ops(mod)
    assert "image.resize2d" in mod.astext()


def test_paddle_detector_without_shapes_matches_onnxruntime_at_several_shapes():
    if cc.get_cc() is None:
        pytest.skip("no C compiler found")
    model = paddle_detector()
    dynamic = ember.compile(model, threads=1)
    assert dynamic.executor == "vm"
    # the last ConvTranspose as the static build runs it (the few-output-channel kernel
    # writing the interleaved output, where the SIMD level's blocks allow it)
    static = ember.compile(model, threads=1, input_shapes={"x": (1, 3, 48, 80)})
    assert ("transpose_fewoc" in _source(dynamic)) == ("transpose_fewoc" in _source(static))
    rng = np.random.default_rng(1)
    # alternating shapes: each run after another shape reuses (and grows) the plan's memory
    for shape in ((1, 3, 48, 80), (2, 3, 32, 112), (1, 3, 80, 16), (1, 3, 48, 80)):
        x = rng.random(shape, dtype=np.float32)
        got = dynamic(x)
        assert got.shape == (shape[0], 1, 2 * shape[2], 2 * shape[3])
        compare(f"paddle detector {shape}", [got], run_ort(model, {"x": x}), SUMS)

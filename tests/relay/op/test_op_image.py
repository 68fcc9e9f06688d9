"""image.resize2d and nn.depth_to_space / nn.space_to_depth: references against independent
formulas, type relations and errors, compiled kernels against the references."""
from __future__ import annotations

import numpy as np
import pytest
from _lowering_util import Case, check_cases, sweep
from _op_helpers import check, infer
from hypothesis import strategies as st

from ember import relay
from ember.ir.types import Any, TensorType
from ember.runtime.errors import OpAttributeInvalid, TypeInferenceError

MODES = ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel",
         "tf_half_pixel_for_nn", "half_pixel_symmetric"]


def _x(shape):
    return np.random.default_rng(0).random(shape).astype("float32")


def test_resize_nearest_integer_scale_repeats():
    x = _x((1, 2, 3, 4))
    out = check("image.resize2d", x, size=(6, 12), method="nearest_neighbor",
                coordinate_transformation_mode="asymmetric", rounding_method="floor")
    np.testing.assert_array_equal(out, x.repeat(2, 2).repeat(3, 3))


def test_resize_linear_align_corners_is_np_interp():
    x = _x((1, 1, 4, 5))
    out = check("image.resize2d", x, size=(7, 9), method="linear",
                coordinate_transformation_mode="align_corners")
    rows = np.linspace(0, 3, 7)
    cols = np.linspace(0, 4, 9)
    step = np.array([np.interp(rows, np.arange(4), x[0, 0, :, j]) for j in range(5)]).T
    want = np.array([np.interp(cols, np.arange(5), step[i]) for i in range(7)])
    np.testing.assert_allclose(out[0, 0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method", ["nearest_neighbor", "linear", "cubic"])
def test_resize_same_size_is_identity(method):
    x = _x((2, 3, 5, 4))
    np.testing.assert_allclose(check("image.resize2d", x, size=(5, 4), method=method), x,
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("rounding", ["round", "round_prefer_floor", "round_prefer_ceil"])
@pytest.mark.parametrize("scales", [None, (1.01, 3.5)])
def test_resize_nearest_align_corners_ties_compile_as_referenced(rounding, scales):
    """Column 3 of 7 over 2 pixels sits exactly at 0.5: the compiled kernel must round the
    same tie as the reference (hypothesis found a case where it did not)."""
    x = np.array([[[[1.0, 2.0]], [[3.0, 4.0]]]], "float32")
    attrs = {"size": (1, 7), "method": "nearest_neighbor", "scales": scales,
             "coordinate_transformation_mode": "align_corners", "rounding_method": rounding}
    check_cases([Case("image.resize2d", [x], attrs, (0, 0))])


def test_depth_to_space_matches_loops_and_inverts():
    x = _x((2, 12, 3, 2))
    for mode in ("DCR", "CRD"):
        out = check("nn.depth_to_space", x, block_size=2, mode=mode)
        for n, c, h, w in np.ndindex(*out.shape):
            blk = (h % 2) * 2 + (w % 2)
            src = blk * 3 + c if mode == "DCR" else c * 4 + blk
            assert out[n, c, h, w] == x[n, src, h // 2, w // 2]
    y = check("nn.depth_to_space", x, block_size=2)
    np.testing.assert_array_equal(check("nn.space_to_depth", y, block_size=2), x)


def test_types_and_errors():
    assert infer("image.resize2d", TensorType((Any(), 3, 4, 4)), size=(8, 2)) == TensorType(
        (Any(), 3, 8, 2))
    assert infer("nn.depth_to_space", TensorType((1, 8, Any(), 2)), block_size=2) == TensorType(
        (1, 2, Any(), 4))
    with pytest.raises(TypeInferenceError, match="data must be NCHW"):
        infer("image.resize2d", TensorType((3, 4, 4)), size=(8, 2))
    with pytest.raises(TypeInferenceError, match="6 channels do not divide by"):
        infer("nn.depth_to_space", TensorType((1, 6, 2, 2)), block_size=2)
    with pytest.raises(TypeInferenceError, match="height 3 does not divide"):
        infer("nn.space_to_depth", TensorType((1, 6, 3, 2)), block_size=2)
    with pytest.raises(OpAttributeInvalid, match="coordinate_transformation_mode"):
        relay.image.resize2d(relay.var("x", shape=(1, 1, 2, 2)), size=(3, 3),
                             coordinate_transformation_mode="tf_crop_and_resize")


def _body(data: st.DataObject) -> None:
    h, w = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6))
    x = _x((1, 2, h, w))
    size = (data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9)))
    method = data.draw(st.sampled_from(["nearest_neighbor", "linear", "cubic"]))
    mode = data.draw(st.sampled_from(MODES))
    scales = data.draw(st.sampled_from([None, (size[0] / h * 1.01, size[1] / w)]))
    b = data.draw(st.integers(1, 3))
    check_cases([
        Case("image.resize2d", [x], {"size": size, "method": method, "scales": scales,
                                     "coordinate_transformation_mode": mode,
                                     "cubic_exclude": data.draw(st.booleans())}, (1e-4, 1e-4)),
        Case("nn.depth_to_space", [_x((1, 3 * b * b, 2, 3))],
             {"block_size": b, "mode": data.draw(st.sampled_from(["DCR", "CRD"]))}),
        Case("nn.space_to_depth", [_x((2, 2, 2 * b, 3 * b))], {"block_size": b}),
    ])


test_compiled_matches_reference, test_compiled_matches_reference_wide = sweep(_body)


# ---------------------------------------------------------------- size 0: scaled at run time
def _scaled_ref(a, scales, **attrs):
    """image.resize2d of ``a`` to floor(size * scale) (float32), the static op's reference."""
    size = tuple(int(np.floor(np.float32(n) * np.float32(s))) for n, s in zip(a.shape[2:], scales))
    return relay.op.image._resize_ref(a, relay.op.image.Resize2DAttrs(size, scales, **attrs))


def test_resize_size_zero_scales_the_input_size():
    assert infer("image.resize2d", TensorType((1, 3, 5, 7)), size=(0, 0),
                 scales=(2.0, 0.5)) == TensorType((1, 3, 10, 3))
    assert infer("image.resize2d", TensorType((2, 3, Any(), 7)), size=(0, 9),
                 scales=(1.5, 1.3)) == TensorType((2, 3, Any(), 9))
    with pytest.raises(OpAttributeInvalid, match="needs scales"):
        infer("image.resize2d", TensorType((1, 3, 5, 7)), size=(0, 4))
    with pytest.raises(TypeInferenceError, match="empty"):
        infer("image.resize2d", TensorType((1, 3, 1, 7)), size=(0, 0), scales=(0.5, 1.0))
    x = _x((1, 2, 3, 4))
    np.testing.assert_array_equal(
        check("image.resize2d", x, size=(0, 0), scales=(2.0, 3.0), method="nearest_neighbor",
              coordinate_transformation_mode="asymmetric", rounding_method="floor"),
        x.repeat(2, 2).repeat(3, 3))


@pytest.mark.parametrize("method,mode,scales", [
    ("nearest_neighbor", "asymmetric", (2.0, 2.0)),
    ("linear", "half_pixel", (1.5, 0.7)),
    ("linear", "align_corners", (3.0, 1.0)),
    ("nearest_neighbor", "half_pixel", (0.5, 2.5)),
])
def test_resize_size_zero_at_run_time_sizes_matches_the_reference(method, mode, scales):
    """One VM build of a ``?`` height and width, run at sizes that are no multiple of a vector
    width and at 1 (where the scale allows), against the reference at that size; blocked
    (NCHW16c) like AlterOpLayout leaves an FPN's upsampling."""
    from _vm_util import vm_runner

    attrs = dict(method=method, coordinate_transformation_mode=mode,
                 rounding_method="floor" if method == "nearest_neighbor" else "round")
    for layout, lanes in (("NCHW", ()), ("NCHW16c", (16,))):
        x = relay.var("x", shape=(relay.Any(), 2, relay.Any(), relay.Any(), *lanes))
        run = vm_runner(relay.Function([x], relay.image.resize2d(
            x, size=(0, 0), scales=scales, layout=layout, **attrs)))
        for shape in ((1, 2, 5, 7), (2, 2, 13, 4), (1, 2, 2, 1)):
            if min(np.floor(np.float32(n) * np.float32(s)) for n, s in zip(shape[2:], scales)) < 1:
                continue
            a = np.random.default_rng(1).random((*shape, *lanes)).astype("float32")
            plain = a if not lanes else a.transpose(0, 1, 4, 2, 3).reshape(
                shape[0], 2 * lanes[0], *shape[2:])
            want = _scaled_ref(plain, scales, **attrs)
            got = run(a)
            if lanes:
                got = got.transpose(0, 1, 4, 2, 3).reshape(want.shape)
            assert got.shape == want.shape, (layout, shape)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

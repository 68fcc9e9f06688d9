"""The plain NCHW conv kernel for few output channels (ember/kernels/conv_nchw_small.h,
topi/nn/conv2d_nchw_small.py) against a float64 numpy reference (rtol 1e-4, atol 1e-4 times
the number of products per output, float32 sums of that many terms):

- the header alone, through a ctypes harness, at every SIMD level this machine runs (AVX2+FMA,
  SSE2, the portable C99 struct path) and AVX-512 (compiled; run only on an AVX-512 host), over
  hypothesis geometries: 1 to 9 output channels (one and more tiles of 4), 1x1 and odd maps,
  rows shorter and longer than a vector, paddings larger than the kernel, strides larger than
  the kernel, dilation, asymmetric padding, several batch items, and the parallel split with
  its tasks run last to first, a guard after the output;
- the op through relay.build (the synthetic model's 3 -> 3 3x3 conv) at forced SIMD levels,
  and which convs take the kernel.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from topi_util import HARNESS_LEVELS, harness_library, host_has

import ember
from ember import relay
from ember.relay.op.nn.conv import conv2d_nchw

HERE = Path(__file__).parent
F32 = ctypes.POINTER(ctypes.c_float)


@pytest.fixture(scope="module", params=list(HARNESS_LEVELS))
def harness(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    level = request.param
    lib = harness_library(HERE / "data" / "conv_nchw_small_harness.c", level,
                          tmp_path_factory.mktemp(level))
    lib.harness_simd_name.restype = ctypes.c_char_p
    lib.harness_conv_nchw_small.argtypes = [F32, F32, F32, ctypes.POINTER(ctypes.c_int32)]
    assert lib.harness_simd_name().decode() == level
    return lib


def _run(lib: ctypes.CDLL, x: np.ndarray, w: np.ndarray, stride: tuple[int, int],
         pad: tuple[int, int, int, int], dil: tuple[int, int], parallel: bool,
         workspace: bool = True) -> np.ndarray:
    n, ic, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh = (h + pad[0] + pad[2] - (kh - 1) * dil[0] - 1) // stride[0] + 1
    ow = (wd + pad[1] + pad[3] - (kw - 1) * dil[1] - 1) // stride[1] + 1
    size = n * oc * oh * ow
    guarded = np.full(size + 64, 7.0, np.float32)
    sizes = np.array([n, ic, h, wd, oc, oh, ow, kh, kw, *stride, *dil, pad[0], pad[1],
                      int(parallel), int(parallel), int(not workspace)], np.int32)
    ptr = lambda a: a.ctypes.data_as(F32)  # noqa: E731
    rc = lib.harness_conv_nchw_small(ptr(x), ptr(w), ptr(guarded),
                                     sizes.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)))
    assert rc == 0
    assert (guarded[size:] == 7.0).all(), "the kernel wrote past its output"
    return guarded[:size].reshape(n, oc, oh, ow)


def _check(lib: ctypes.CDLL, n: int, ic: int, oc: int, h: int, wd: int, k: tuple[int, int],
           stride: tuple[int, int], pad: tuple[int, int, int, int], dil: tuple[int, int],
           parallel: bool, seed: int, workspace: bool = True) -> None:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, ic, h, wd)).astype(np.float32)
    w = rng.uniform(-1, 1, (oc, ic, *k)).astype(np.float32)
    got = _run(lib, x, w, stride, pad, dil, parallel, workspace)
    want = conv2d_nchw(x.astype(np.float64), w.astype(np.float64), stride, pad, dil, 1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * ic * k[0] * k[1])


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 2), ic=st.integers(1, 5), oc=st.integers(1, 9), h=st.integers(1, 13),
       wd=st.sampled_from([1, 2, 3, 5, 12, 15, 16, 17, 31, 33, 40]), kh=st.integers(1, 3),
       kw=st.integers(1, 5), sh=st.integers(1, 4), sw=st.integers(1, 4), dh=st.integers(1, 2),
       dw=st.integers(1, 3), pads=st.tuples(*[st.integers(0, 4)] * 4), parallel=st.booleans(),
       workspace=st.sampled_from([True, True, True, False]), seed=st.integers(0, 2**16))
def test_matches_numpy(harness: ctypes.CDLL, n: int, ic: int, oc: int, h: int, wd: int, kh: int,
                       kw: int, sh: int, sw: int, dh: int, dw: int,
                       pads: tuple[int, int, int, int], parallel: bool, workspace: bool,
                       seed: int) -> None:
    """Without a workspace, the plain loop nest."""
    # the window must fit the padded input (the op's type relation checks this)
    if h + pads[0] + pads[2] < (kh - 1) * dh + 1 or wd + pads[1] + pads[3] < (kw - 1) * dw + 1:
        return
    _check(harness, n, ic, oc, h, wd, (kh, kw), (sh, sw), pads, (dh, dw), parallel, seed,
           workspace)


@pytest.mark.parametrize("case", [
    # n ic oc h w k stride pad dil
    (1, 3, 3, 24, 12, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # the synthetic model's conv
    (1, 1, 1, 1, 1, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),  # 1x1 map, 1x1 kernel
    (1, 2, 3, 1, 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # 1x1 map, all taps but one padding
    (2, 3, 5, 9, 70, (3, 5), (2, 3), (2, 0, 1, 4), (1, 1)),  # stride above kernel, bands
    (1, 2, 2, 6, 6, (2, 2), (5, 5), (0, 0, 0, 0), (1, 1)),  # stride larger than the kernel
    (1, 1, 3, 5, 7, (3, 3), (1, 1), (4, 4, 4, 4), (2, 2)),  # padding past the dilated kernel
    (1, 4, 7, 300, 200, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # buffered in bands, parallel
])
def test_edge_geometries(harness: ctypes.CDLL, case: tuple) -> None:
    n, ic, oc, h, wd, k, stride, pad, dil = case
    for parallel in (False, True):
        _check(harness, n, ic, oc, h, wd, k, stride, pad, dil, parallel, 3)


# ------------------------------------------------------------------------------ relay builds
def _build_run(func: relay.Function, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, str]:
    """The function built at opt_level 3 for the host, run: its output and its C source."""
    from ember.contrib import graph_executor

    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(ember.IRModule.from_expr(func), "llvm")
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input(**inputs)
    m.run()
    return m.get_output(0).numpy(), lib.get_lib().get_source()


@pytest.mark.parametrize("march", [pytest.param("x86-64-v2", id="sse2"),
                                   pytest.param("x86-64-v3", id="avx2"),
                                   pytest.param(None, id="host")])
def test_conv_and_its_epilogue_through_relay_build(march: str | None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The synthetic model's conv (3 -> 3, 3x3, pad 1 on 24x12) with a bias and a relu fused
    after it, and a strided, dilated conv to 5 channels with asymmetric padding: the kernel's
    calls, numpy's values."""
    if march == "x86-64-v3" and not host_has("avx2"):
        pytest.skip("host has no AVX2")
    if march is not None:
        monkeypatch.setenv("EMBER_MARCH", march)
    rng = np.random.default_rng(0)
    xv = rng.uniform(-1, 1, (1, 3, 24, 12)).astype(np.float32)
    w3 = rng.uniform(-1, 1, (3, 3, 3, 3)).astype(np.float32)
    w5 = rng.uniform(-1, 1, (5, 3, 3, 2)).astype(np.float32)
    b3 = rng.uniform(-1, 1, 3).astype(np.float32)
    x = relay.var("x", shape=(1, 3, 24, 12))
    a = relay.nn.relu(relay.nn.bias_add(
        relay.nn.conv2d(x, relay.const(w3), padding=(1, 1), kernel_size=(3, 3)),
        relay.const(b3)))
    b = relay.nn.conv2d(x, relay.const(w5), strides=(3, 1), padding=(0, 1, 2, 0),
                        dilation=(1, 2), kernel_size=(3, 2))
    got, source = _build_run(relay.Function([x], a), {"x": xv})
    assert source.count("ember_conv2d_nchw_small(") >= 1
    x64 = xv.astype(np.float64)
    want = np.maximum(conv2d_nchw(x64, w3.astype(np.float64), (1, 1), (1, 1, 1, 1), (1, 1), 1)
                      + b3.reshape(1, 3, 1, 1), 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * 27)
    got, source = _build_run(relay.Function([x], b), {"x": xv})
    assert "ember_conv2d_nchw_small(" in source
    want = conv2d_nchw(x64, w5.astype(np.float64), (3, 1), (0, 1, 2, 0), (1, 2), 1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * 18)


def test_which_convs_take_the_kernel() -> None:
    """Float32 ungrouped convs to at most 7 channels with a window larger than 1x1 and at least
    8 output columns; not 8 channels, 1x1 windows, narrower outputs, grouped convs, float64."""
    from ember import te
    from ember.topi.nn.conv2d_nchw_small import nchw_small_applies

    x = te.placeholder((1, 4, 9, 9), name="x")

    def takes(oc: int, k: int = 3, pad: int = 1, groups: int = 1, stride: int = 1) -> bool:
        w = te.placeholder((oc, 4 // groups, k, k), name="w")
        return nchw_small_applies(x, w, stride, pad, 1, groups, "float32")

    assert takes(7) and takes(1, k=2, pad=0)  # 8 columns
    assert not takes(8)
    assert not takes(3, k=1, pad=0)
    assert not takes(3, pad=0)  # 7 columns
    assert not takes(3, stride=2)
    assert not takes(2, groups=2)
    x64 = te.placeholder((1, 4, 9, 9), dtype="float64", name="x")
    w64 = te.placeholder((3, 4, 3, 3), dtype="float64", name="w")
    assert not nchw_small_applies(x64, w64, 1, 1, 1, 1, "float64")


def test_run_time_sizes() -> None:
    """A VM build with ``?`` batch, height and width calls the kernel with its sizes as
    arguments (as a static build of each shape does): numpy's values at a 1x1 map, sizes that
    make the output narrower than a vector, two batch items, and a window that does not fit."""
    from dynamic_util import build_dynamic, kernel_source

    model = """#[version = "0.0.5"]
def @main(%x: Tensor[({n}, 2, {h}, {w}), float32], %w: Tensor[(3, 2, 3, 2), float32]) {{
  nn.conv2d(%x, %w, strides=[2, 1], padding=[1, 0, 1, 1], channels=3, kernel_size=[3, 2])
}}
"""
    rng = np.random.default_rng(4)
    params = {"w": rng.uniform(-1, 1, (3, 2, 3, 2)).astype(np.float32)}
    assert "ember_conv2d_nchw_small(" in kernel_source(model, params)
    run = build_dynamic(model, params)
    for n, h, w in [(1, 1, 1), (1, 9, 30), (2, 4, 5)]:
        x = rng.uniform(-1, 1, (n, 2, h, w)).astype(np.float32)
        got = run(x)
        want = conv2d_nchw(x.astype(np.float64), params["w"].astype(np.float64), (2, 1),
                           (1, 0, 1, 1), (1, 1), 1)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * 12)
    with pytest.raises(Exception, match="window"):
        run(np.zeros((1, 2, 1, 0), np.float32))

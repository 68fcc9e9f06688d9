"""layout_transform NCHW <-> NCHW[L]c through the blocked-copy kernel
(ember/kernels/layout_nchwc.h) against numpy: at every SIMD level this machine runs (the AVX
path transposes 8x8 blocks in registers, the others copy tiles element by element), over
blocks 8 and 16 (register blocks), 4 and 3 (element copy), maps whose size is not a multiple
of 8 or of the 64-position tile, 1x1 maps, batch 2, and a work split over 1-3 tasks; channel
counts that are not a multiple of the block (1, 3, 9, 17: a padded last block, zeros in its
other lanes); the same for channels-last (NHWC, a transformer's tokens) <-> NCHW[L]c. Then the
lowering: which transforms take a kernel (a function input or a reshape of one) and which stay
generic."""
from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_conv2d_nchwc import CC, INCLUDE, LEVEL_FLAGS, STRICT, _host_runs
from topi_util import run_kernel

from ember import topi
from ember.te import tensor as te

HARNESS = Path(__file__).with_name("layout_nchwc_harness.c")
F32 = ctypes.POINTER(ctypes.c_float)
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")

# (n, channels, h, w, block)
SHAPES = [(1, 64, 56, 56, 8), (2, 16, 3, 5, 8), (1, 32, 1, 1, 16), (1, 48, 9, 13, 16),
          (1, 8, 7, 7, 8), (2, 12, 5, 17, 4), (1, 9, 4, 3, 3), (1, 16, 11, 11, 8),
          # a padded last block: to NCHW[L]c zeros fill its lanes past c, from it they are dropped
          (1, 3, 9, 70, 8), (2, 1, 8, 8, 8), (2, 9, 5, 13, 8), (1, 17, 3, 67, 16),
          (1, 3, 1, 1, 16), (2, 9, 4, 5, 4), (1, 17, 2, 9, 3), (3, 13, 6, 11, 8)]


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return {"dir": tmp_path_factory.mktemp("layout_harness")}


def harness_lib(libs: dict, level: str, harness: Path = HARNESS) -> ctypes.CDLL:
    """``harness`` compiled at SIMD ``level`` into ``libs["dir"]`` once (skips a level this
    machine cannot run)."""
    if level not in libs:
        if not _host_runs(level):
            pytest.skip(f"this machine cannot run {level} code")
        so = libs["dir"] / f"{harness.stem}_{level}.so"
        cmd = [CC, *STRICT, *LEVEL_FLAGS[level], "-fPIC", "-shared", f"-I{INCLUDE}",
               str(harness), "-o", str(so)]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[:4000]
        libs[level] = ctypes.CDLL(str(so))
    return libs[level]


def _blocked(x: np.ndarray, block: int) -> np.ndarray:
    n, c, h, w = x.shape
    padded = np.zeros((n, -(-c // block) * block, h, w), x.dtype)
    padded[:, :c] = x
    return np.ascontiguousarray(
        padded.reshape(n, -1, block, h, w).transpose(0, 1, 3, 4, 2))


@pytest.mark.parametrize("level", list(LEVEL_FLAGS))
def test_kernel_matches_numpy_at_every_level(libs, level):
    lib = harness_lib(libs, level)
    rng = np.random.default_rng(0)
    for k, (n, c, h, w, block) in enumerate(SHAPES):
        x = rng.uniform(-1, 1, (n, c, h, w)).astype("float32")
        want = _blocked(x, block)
        for tasks in (1, 3):
            out = np.full(want.shape, np.nan, "float32")
            assert lib.harness_layout(x.ctypes.data_as(F32), out.ctypes.data_as(F32), n, c,
                                      h * w, block, 1, tasks) == 0
            np.testing.assert_array_equal(out, want, err_msg=f"{level} to NCHW{block}c {k}")
            back = np.full(x.shape, np.nan, "float32")
            assert lib.harness_layout(want.ctypes.data_as(F32), back.ctypes.data_as(F32), n, c,
                                      h * w, block, 0, tasks) == 0
            np.testing.assert_array_equal(back, x, err_msg=f"{level} from NCHW{block}c {k}")


def _channels_last(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("level", list(LEVEL_FLAGS))
def test_channels_last_kernel_matches_numpy_at_every_level(libs, level):
    lib = harness_lib(libs, level)
    rng = np.random.default_rng(5)
    for k, (n, c, h, w, block) in enumerate([*SHAPES, (1, 640, 16, 16, 8), (3, 8, 1, 65, 8)]):
        x = rng.uniform(-1, 1, (n, c, h, w)).astype("float32")
        last, blocked = _channels_last(x), _blocked(x, block)
        for tasks in (1, 3):
            out = np.full(blocked.shape, np.nan, "float32")
            assert lib.harness_layout_nhwc(last.ctypes.data_as(F32), out.ctypes.data_as(F32),
                                           n, c, h * w, block, 1, tasks) == 0
            np.testing.assert_array_equal(out, blocked, err_msg=f"{level} NHWC to {block}c {k}")
            back = np.full(last.shape, np.nan, "float32")
            assert lib.harness_layout_nhwc(blocked.ctypes.data_as(F32), back.ctypes.data_as(F32),
                                           n, c, h * w, block, 0, tasks) == 0
            np.testing.assert_array_equal(back, last, err_msg=f"{level} {block}c to NHWC {k}")


def _kind(t: te.Tensor) -> str:
    return "kernel" if t.op.tag in ("layout_nchwc", "layout_nhwc") else "generic"


def test_lowering_takes_the_kernel_for_nchw_and_blocked_inputs():
    x = te.placeholder((2, 16, 5, 7), name="x")
    y = topi.layout_transform(x, "NCHW", "NCHW8c")
    assert _kind(y) == "kernel"
    v = np.random.default_rng(1).uniform(-1, 1, (2, 16, 5, 7)).astype("float32")
    (got,) = run_kernel(y, [x], [v])
    np.testing.assert_array_equal(got, _blocked(v, 8))
    b = te.placeholder((1, 3, 4, 4, 16), name="b")
    z = topi.layout_transform(b, "NCHW16c", "NCHW")
    assert _kind(z) == "kernel"
    bv = np.random.default_rng(2).uniform(-1, 1, (1, 3, 4, 4, 16)).astype("float32")
    (got,) = run_kernel(z, [b], [bv])
    np.testing.assert_array_equal(got, bv.transpose(0, 1, 4, 2, 3).reshape(1, 48, 4, 4))


@pytest.mark.parametrize("channels,block", [(3, 8), (20, 16), (1, 4)])
def test_lowering_takes_the_kernel_for_a_padded_last_block(channels, block):
    x = te.placeholder((2, channels, 5, 9), name="x")
    y = topi.layout_transform(x, "NCHW", f"NCHW{block}c")
    assert _kind(y) == "kernel"
    assert [int(d) for d in y.shape] == [2, -(-channels // block), 5, 9, block]
    v = np.random.default_rng(3).uniform(-1, 1, (2, channels, 5, 9)).astype("float32")
    (got,) = run_kernel(y, [x], [v])
    np.testing.assert_array_equal(got, _blocked(v, block))


@pytest.mark.parametrize("channels,block", [(58, 16), (116, 16), (3, 8), (12, 4)])
def test_a_zero_channel_pad_into_whole_blocks_is_the_kernel(channels, block):
    # AlterOpLayout's padded_blocks: nn.pad of the channels to whole blocks, then the copy; the
    # kernel zero-fills the last block's lanes itself
    x = te.placeholder((2, channels, 5, 9), name="x")
    padded = -(-channels // block) * block
    y = topi.layout_transform(topi.nn.pad(x, [0, 0, 0, 0], [0, padded - channels, 0, 0]),
                              "NCHW", f"NCHW{block}c")
    assert _kind(y) == "kernel"
    v = np.random.default_rng(4).uniform(-1, 1, (2, channels, 5, 9)).astype("float32")
    (got,) = run_kernel(y, [x], [v])
    np.testing.assert_array_equal(got, _blocked(v, block))


def test_other_channel_pads_stay_generic():
    x = te.placeholder((1, 10, 3, 5), name="x")
    wide = topi.nn.pad(x, [0, 0, 0, 0], [0, 14, 0, 0])  # a whole zero block more
    assert _kind(topi.layout_transform(wide, "NCHW", "NCHW8c")) == "generic"
    ones = topi.nn.pad(x, [0, 0, 0, 0], [0, 6, 0, 0], 1.0)  # not zeros
    assert _kind(topi.layout_transform(ones, "NCHW", "NCHW8c")) == "generic"
    front = topi.nn.pad(x, [0, 6, 0, 0], [0, 0, 0, 0])  # before the channels
    assert _kind(topi.layout_transform(front, "NCHW", "NCHW8c")) == "generic"
    image = topi.nn.pad(x, [0, 0, 1, 0], [0, 6, 0, 0])  # and the image
    assert _kind(topi.layout_transform(image, "NCHW", "NCHW8c")) == "generic"
    (got,) = run_kernel(topi.layout_transform(ones, "NCHW", "NCHW8c"), [x],
                        [np.zeros((1, 10, 3, 5), "float32")])
    assert (got[:, 1, :, :, 2:] == 1).all()


def test_other_transforms_stay_generic():
    x = te.placeholder((1, 20, 3, 5), name="x")
    assert _kind(topi.layout_transform(x, "NCHW", "NHWC")) == "generic"
    assert _kind(topi.layout_transform(x + 1.0, "NCHW", "NCHW4c")) == "generic"  # a producer
    assert _kind(topi.layout_transform(te.placeholder((1, 16, 3, 5), "int32"), "NCHW",
                                       "NCHW8c")) == "generic"
    b = te.placeholder((1, 2, 3, 5, 8), name="b")
    assert _kind(topi.layout_transform(b, "NCHW8c", "NCHW16c")) == "generic"


def test_channel_slice_of_a_blocked_copy_is_one_kernel_call():
    # NCHW8c -> NCHW then the first 21 channels (AlterOpLayout's padded conv output): the
    # copy drops the padded lanes itself; any other slice stays a loop over the copy
    b = te.placeholder((2, 3, 4, 5, 8), name="b")
    full = topi.layout_transform(b, "NCHW8c", "NCHW")
    sliced = topi.layout_nchwc.channel_prefix(full, [0, 0, 0, 0], [1, 1, 1, 1], [2, 21, 4, 5])
    assert sliced is not None and _kind(sliced) == "kernel"
    bv = np.random.default_rng(4).uniform(-1, 1, (2, 3, 4, 5, 8)).astype("float32")
    (got,) = run_kernel(sliced, [b], [bv])
    np.testing.assert_array_equal(got, bv.transpose(0, 1, 4, 2, 3).reshape(2, 24, 4, 5)[:, :21])
    for starts, steps, shape in (([0, 1, 0, 0], [1] * 4, [2, 20, 4, 5]),  # not a prefix
                                 ([0] * 4, [1, 2, 1, 1], [2, 11, 4, 5]),  # strided
                                 ([0] * 4, [1] * 4, [2, 21, 4, 4])):  # another axis too
        assert topi.layout_nchwc.channel_prefix(full, starts, steps, shape) is None
    assert topi.layout_nchwc.channel_prefix(b + 1.0, [0] * 5, [1] * 5, [2, 3, 4, 5, 8]) is None
    # a copy to channels-last is 4-D too, but no NCHW: its "channel" axis is the width
    nhwc = topi.layout_transform(b, "NCHW8c", "NHWC")
    assert _kind(nhwc) == "kernel"
    assert topi.layout_nchwc.channel_prefix(nhwc, [0] * 4, [1] * 4, [2, 4, 4, 5]) is None


def test_lowering_takes_the_channels_last_kernel_also_through_a_reshape():
    rng = np.random.default_rng(6)
    b = te.placeholder((2, 3, 5, 7, 8), name="b")
    tokens = topi.layout_transform(topi.reshape(b, (2, 3, 35, 8)), "NCW8c", "NWC")
    assert _kind(tokens) == "kernel"
    bv = rng.uniform(-1, 1, (2, 3, 5, 7, 8)).astype("float32")
    (got,) = run_kernel(tokens, [b], [bv])
    np.testing.assert_array_equal(got, bv.transpose(0, 2, 3, 1, 4).reshape(2, 35, 24))
    t = te.placeholder((2, 35, 24), name="t")
    image = topi.layout_transform(topi.reshape(t, (2, 5, 7, 24)), "NHWC", "NCHW8c")
    assert _kind(image) == "kernel"
    tv = rng.uniform(-1, 1, (2, 35, 24)).astype("float32")
    (got,) = run_kernel(image, [t], [tv])
    np.testing.assert_array_equal(got, _blocked(tv.reshape(2, 5, 7, 24).transpose(0, 3, 1, 2), 8))
    x = te.placeholder((1, 16, 3, 5), name="x")
    assert _kind(topi.layout_transform(topi.reshape(x, (1, 16, 15, 1)), "NCHW", "NCHW8c")) == \
        "kernel"


def test_channels_last_transforms_that_stay_generic():
    t = te.placeholder((1, 3, 5, 12), name="t")
    padded = topi.layout_transform(t, "NHWC", "NCHW8c")  # a padded last block: the kernel
    assert _kind(padded) == "kernel"
    tv = np.random.default_rng(7).uniform(-1, 1, (1, 3, 5, 12)).astype("float32")
    (got,) = run_kernel(padded, [t], [tv])
    np.testing.assert_array_equal(got, _blocked(tv.transpose(0, 3, 1, 2), 8))
    assert _kind(topi.layout_transform(topi.reshape(t + 1.0, (1, 15, 12)), "NWC",
                                       "NCW4c")) == "generic"  # a producer under the reshape
    b = te.placeholder((1, 2, 3, 5, 8), name="b")
    assert _kind(topi.layout_transform(b, "NCHW8c", "NWHC")) == "generic"  # not N{HW}C
    assert _kind(topi.layout_transform(b, "NCHW8c", "NHWC")) == "kernel"


def test_reshape_of_a_blocked_copy_is_one_kernel_call():
    # vgg16's flatten: the last pool's NCHW16c back to NCHW, then (1, C * H * W); and a
    # reshape of a copy into the blocked layout. A reshape of anything else stays a loop.
    rng = np.random.default_rng(8)
    b = te.placeholder((2, 3, 4, 5, 8), name="b")
    flat = topi.reshape(topi.layout_transform(b, "NCHW8c", "NCHW"), (2, 480))
    assert _kind(flat) == "kernel" and [int(d) for d in flat.shape] == [2, 480]
    bv = rng.uniform(-1, 1, (2, 3, 4, 5, 8)).astype("float32")
    (got,) = run_kernel(flat, [b], [bv])
    np.testing.assert_array_equal(got, bv.transpose(0, 1, 4, 2, 3).reshape(2, 480))
    # the first 21 channels of the copy (a padded conv's), then flattened
    prefix = topi.layout_nchwc.channel_prefix(topi.layout_transform(b, "NCHW8c", "NCHW"),
                                              [0] * 4, [1] * 4, [2, 21, 4, 5])
    flat21 = topi.reshape(prefix, (2, 21 * 20))
    assert _kind(flat21) == "kernel"
    (got,) = run_kernel(flat21, [b], [bv])
    np.testing.assert_array_equal(
        got, bv.transpose(0, 1, 4, 2, 3).reshape(2, 24, 4, 5)[:, :21].reshape(2, 420))
    x = te.placeholder((2, 16, 3, 5), name="x")
    rows = topi.reshape(topi.layout_transform(x, "NCHW", "NCHW8c"), (2, 2, 15, 8))
    assert _kind(rows) == "kernel"
    xv = rng.uniform(-1, 1, (2, 16, 3, 5)).astype("float32")
    (got,) = run_kernel(rows, [x], [xv])
    np.testing.assert_array_equal(got, _blocked(xv, 8).reshape(2, 2, 15, 8))
    assert _kind(topi.reshape(b + 1.0, (2, 480))) == "generic"


def test_channels_last_copy_takes_a_prefix_and_a_reshape():
    # a detector head's level: a padded conv's blocked map (21 real channels of 24) copied
    # channels-last, its real channels kept, viewed as (N, H * W * 3, 7): one kernel call
    rng = np.random.default_rng(9)
    b = te.placeholder((2, 3, 4, 5, 8), name="b")
    bv = rng.uniform(-1, 1, (2, 3, 4, 5, 8)).astype("float32")
    nhwc = bv.transpose(0, 2, 3, 1, 4).reshape(2, 4, 5, 24)
    whole = topi.reshape(topi.layout_transform(b, "NCHW8c", "NHWC"), (2, 480))
    assert _kind(whole) == "kernel"
    (got,) = run_kernel(whole, [b], [bv])
    np.testing.assert_array_equal(got, nhwc.reshape(2, 480))
    prefix = topi.layout_nchwc.channel_prefix(topi.layout_transform(b, "NCHW8c", "NHWC"),
                                              [0] * 4, [1] * 4, [2, 4, 5, 21])
    heads = topi.reshape(prefix, (2, 60, 7))
    assert _kind(prefix) == "kernel" and _kind(heads) == "kernel"
    (got,) = run_kernel(heads, [b], [bv])
    np.testing.assert_array_equal(got, nhwc[..., :21].reshape(2, 60, 7))
    # a slice that is not the first channels, or that cuts the image, stays a loop
    copy = topi.layout_transform(b, "NCHW8c", "NHWC")
    assert topi.layout_nchwc.channel_prefix(copy, [0, 0, 0, 3], [1] * 4, [2, 4, 5, 18]) is None
    assert topi.layout_nchwc.channel_prefix(copy, [0] * 4, [1] * 4, [2, 2, 5, 24]) is None



@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("batch, channels", [(2, 21), (2, 16), (2, 8), (1, 8)])
def test_channel_prefix_of_fewer_blocks(layout, batch, channels):
    # the first channels of a blocked copy back, ending before the source's last block:
    # at a batch of two the kernel (which counts a batch's blocks from the channels it
    # copies) would read the second batch from the first one's next block, so it is left
    # to the generic loop there; at a batch of one it copies only the blocks it keeps
    b = te.placeholder((batch, 3, 4, 5, 8), name="b")
    bv = np.random.default_rng(10).uniform(-1, 1, (batch, 3, 4, 5, 8)).astype("float32")
    plain = bv.transpose(0, 1, 4, 2, 3).reshape(batch, 24, 4, 5)[:, :channels]
    shape = [batch, channels, 4, 5] if layout == "NCHW" else [batch, 4, 5, channels]
    copy = topi.layout_transform(b, "NCHW8c", layout)
    prefix = topi.layout_nchwc.channel_prefix(copy, [0] * 4, [1] * 4, shape)
    kernel = batch == 1 or channels > 16
    assert (prefix is not None) == kernel
    if prefix is None:
        prefix = te.compute(shape, lambda *i: copy(*i), name="T_strided_slice")
    (got,) = run_kernel(prefix, [b], [bv])
    want = plain if layout == "NCHW" else plain.transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(got, want)


def test_run_time_sizes_take_the_kernel_and_the_channel_prefix():
    """A conv of ? height and width from 16 to 4 channels, which AlterOpLayout pads to a
    block of 16 (as it does at a static size: ``channel_pad.pad_output``) and slices back:
    the copy back and its slice are one kernel call with the sizes passed at run time (a
    generic loop gathered one float per 64-byte pixel before), the result that of the static
    builds."""
    import ember
    from ember import relay

    rng = np.random.default_rng(6)
    x = relay.var("x", shape=(1, 16, relay.Any(), relay.Any()))
    w = relay.const(rng.uniform(-1, 1, (4, 16, 3, 3)).astype("float32"))
    func = relay.Function([x], relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1))))
    mod = ember.IRModule.from_expr(func)
    with ember.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm")
    source = "".join(m.get_source() for m in [exe.lib, *exe.lib.imported_modules]
                     if hasattr(m, "get_source"))
    # the copy back takes 4 of the block's 16 lanes, at the run-time size, in one call
    assert ", 1, 4, (any_dim * any_dim_1), 16, 0, " in source
    assert "T_strided_slice[" not in source and "T_layout_trans[" not in source
    model = ember.compile(mod, executor="vm")
    for h, wd in ((9, 13), (1, 1), (20, 7)):
        v = rng.uniform(-1, 1, (1, 16, h, wd)).astype("float32")
        xs = relay.var("x", shape=(1, 16, h, wd))
        static = relay.Function([xs], relay.nn.relu(relay.nn.conv2d(xs, w, padding=(1, 1))))
        want = ember.compile(ember.IRModule.from_expr(static))(v)
        np.testing.assert_allclose(model(v), want, rtol=1e-5, atol=1e-5)


def test_a_run_time_copy_back_that_readers_transpose_stays_inlined():
    """segformer's dynamic twin: NCHW16c -> NCHW at a run-time batch, then a reshape and a
    transpose to tokens (which SimplifyExpr folds into one NHWC copy at static sizes). The copy
    back is the generic loop its readers inline (the kernel's NCHW copy, transposed again by a
    loop reading 256 floats apart, made the twin 2.2x its static build)."""
    import ember
    from ember import relay

    x = relay.var("x", shape=(relay.Any(), 4, 16, 16, 16))
    y = relay.layout_transform(x, "NCHW16c", "NCHW")
    y = relay.transpose(relay.reshape(y, (0, 64, 256)), (0, 2, 1))
    mod = ember.IRModule.from_expr(relay.Function([x], relay.nn.relu(y)))
    with ember.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm")
    source = "".join(m.get_source() for m in [exe.lib, *exe.lib.imported_modules]
                     if hasattr(m, "get_source"))
    assert "ember_layout_nchwc(" not in source
    model = ember.compile(mod, executor="vm")
    v = np.random.default_rng(8).uniform(-1, 1, (2, 4, 16, 16, 16)).astype("float32")
    want = np.maximum(v.transpose(0, 1, 4, 2, 3).reshape(2, 64, 256).transpose(0, 2, 1), 0)
    np.testing.assert_array_equal(model(v), want)


def test_built_slice_of_the_first_channels_at_a_batch_of_two():
    # a blocked conv (48 channels, several blocks) sliced to its first 5 channels at a batch
    # of two: the copy back and slice read the second batch from the right blocks (they read
    # the first batch's second block before)
    import ember
    from ember import relay

    x, w = relay.var("x", shape=(2, 8, 6, 6)), relay.var("w", shape=(48, 8, 3, 3))
    y = relay.strided_slice(relay.nn.conv2d(x, w, padding=(1, 1)), begin=[0], end=[5], axes=[1])
    mod = ember.IRModule.from_expr(relay.Function([x, w], y))
    rng = np.random.default_rng(11)
    xv = rng.standard_normal((2, 8, 6, 6)).astype("float32")
    wv = rng.standard_normal((48, 8, 3, 3)).astype("float32")
    got = ember.compile(mod, params={"w": wv}, threads=1)(xv)
    want = relay.create_executor("debug", mod=mod).evaluate()(xv, wv).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

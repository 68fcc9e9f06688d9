"""AlterOpLayout under symbolic (``?``) batch, height and width: the plan is the static one.

A transposed conv of a ``?`` image becomes its blocked phase convs and an interleave that sizes
its output from theirs at run time (``out_size`` 0, ``trim``), so the convs after an
upsampling stay blocked; the dynamic build matches numpy at several shapes.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.contrib import graph_executor
from ember.ir.expr import Call
from ember.ir.visitor import post_order
from ember.relay.op.nn.conv import conv2d_nchw, conv2d_transpose_nchw
from ember.relay.transform import AlterOpLayout, InferType
from ember.runtime.errors import TypeInferenceError
from ember.testing import find_c_compiler
from ember.topi.nn.conv2d_transpose import PROBE, phase_plan, symbolic_phase_plan

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")
TARGET = "llvm -mcpu=haswell"

# (channels, out channels, kernel, stride, padding, output padding, groups, dilation)
CASES = [
    (16, 16, 2, 2, 0, 0, 1, 1),  # DBNet's head / UNet's up path: 1x1 phase convs
    (12, 8, 3, 2, 1, 1, 1, 1),  # input channels not a multiple of the lanes, output padding
    (16, 16, 3, 1, 1, 0, 1, 1),  # stride 1: one conv, no interleave
    (8, 8, 1, 4, 0, 2, 1, 1),  # stride 4 above the kernel
    (16, 16, 3, 2, 1, 1, 16, 1),  # depthwise: one conv per phase
    (16, 16, 3, 2, 2, 1, 1, 2),  # dilated
]
ALL = tuple(range(len(CASES)))


def _weights(i: int, case: tuple) -> tuple[np.ndarray, np.ndarray]:
    c, oc, k, _, _, _, g, _ = case
    rng = np.random.default_rng(i)
    return (rng.uniform(-1, 1, (c, oc // g, k, k)).astype("float32"),
            rng.uniform(-1, 1, (16, 16, 3, 3)).astype("float32"))


def _model(n, h, w, cases=ALL) -> ember.IRModule:
    """Each of ``cases`` as convT -> relu -> 3x3 conv (the conv after an upsampling)."""
    xs, ys = [], []
    for i in cases:
        c, oc, k, s, p, op, g, d = CASES[i]
        wt, w2 = _weights(i, CASES[i])
        x = relay.var(f"x{i}", shape=(n, c, h, w))
        y = relay.nn.relu(relay.nn.conv2d_transpose(
            x, relay.const(wt), strides=(s, s), padding=(p, p), output_padding=(op, op),
            groups=g, channels=oc, kernel_size=(k, k), dilation=(d, d)))
        y = relay.nn.conv2d(y, relay.const(w2[:, :oc]), padding=(1, 1), channels=16,
                            kernel_size=(3, 3))
        xs.append(x)
        ys.append(y)
    return ember.IRModule.from_expr(relay.Function(xs, relay.Tuple(ys)))


def _want(i: int, x: np.ndarray) -> np.ndarray:
    c, oc, k, s, p, op, g, d = CASES[i]
    wt, w2 = _weights(i, CASES[i])
    y = np.maximum(conv2d_transpose_nchw(x.astype("float64"), wt.astype("float64"), (s, s),
                                         (p,) * 4, (op, op), (d, d), g), 0)
    return conv2d_nchw(y, w2[:, :oc].astype("float64"), (1, 1), (1,) * 4, (1, 1), 1)


def _plan(mod: ember.IRModule) -> ember.IRModule:
    with ember.transform.PassContext(opt_level=3), ember.target.Target(TARGET):
        return AlterOpLayout()(InferType()(mod))


def _ops(mod: ember.IRModule) -> list[str]:
    return [n.op.name for n in post_order(mod["main"].body) if isinstance(n, Call)]


def test_symbolic_plan_is_the_static_plan():
    # the phase kernel (conv2d_phase.py) takes static sizes only: a ``?`` size runs its
    # transposed conv as the blocked phase conv and the interleave
    static = []
    for name in _ops(_plan(_model(1, 5, 6))):
        static += ["nn.contrib_conv2d_NCHWc_fused", "nn.contrib_conv2d_transpose_interleave"] \
            if name == "nn.contrib_conv2d_transpose_phased" else [name]
    assert "nn.conv2d_transpose" not in static and "nn.conv2d" not in static
    for dims in [(relay.Any(), 5, 6), (1, relay.Any(), relay.Any()),
                 (relay.Any(), relay.Any(), 6)]:
        assert _ops(_plan(_model(*dims))) == static, dims


def test_symbolic_interleave_sizes_from_the_data():
    mod = _plan(_model(1, relay.Any(), relay.Any()))
    inter = [n for n in post_order(mod["main"].body) if isinstance(n, Call)
             and n.op.name == "nn.contrib_conv2d_transpose_interleave"]
    assert inter and all(tuple(n.attrs.out_size) == (0, 0) for n in inter)
    # the trim of the probe's plan gives every size's output
    for (_, _, k, s, p, op, _, d) in CASES:
        kk = (k - 1) * d + 1
        sym = symbolic_phase_plan(relay.Any(), 7, (kk, kk), (s, s), (p,) * 4, (op, op))
        for size in (1, 3, 10):
            real = phase_plan(size, 7, (kk, kk), (s, s), (p,) * 4, (op, op))
            if real is None:
                continue
            assert real.padding == sym.padding and real.offset == sym.offset
            assert real.rows[0] * s - sym.trim[0] == real.out[0]
    assert sym.rows[0] > PROBE - 2


def test_interleave_from_data_types_and_errors():
    x = relay.var("x", shape=(1, 8, relay.Any(), 3))
    call = relay.nn.contrib_conv2d_transpose_interleave(x, strides=(2, 2), offset=(1, 0),
                                                        out_size=(0, 0), trim=(1, 2))
    ty = InferType()(ember.IRModule.from_expr(relay.Function([x], call)))["main"].checked_type.ret_type
    assert not isinstance(ty.shape[2], int) and ty.shape[3] == 4
    data = np.random.default_rng(0).standard_normal((1, 8, 3, 3)).astype("float32")
    y = relay.var("y", shape=(1, 8, 3, 3))
    mod = ember.IRModule.from_expr(relay.Function([y], relay.nn.contrib_conv2d_transpose_interleave(
        y, strides=(2, 2), offset=(1, 0), out_size=(0, 4), trim=(1, 0))))
    got = relay.create_executor("debug", mod=mod).evaluate()(data).numpy()
    assert got.shape == (1, 2, 5, 4)
    # an empty output is refused, naming the rows
    z = relay.var("z", shape=(1, 8, 1, 3))
    bad = relay.nn.contrib_conv2d_transpose_interleave(z, strides=(2, 2), offset=(0, 0),
                                                       out_size=(0, 4), trim=(2, 0))
    with pytest.raises(TypeInferenceError, match="1 phase rows.*empty"):
        InferType()(ember.IRModule.from_expr(relay.Function([z], bad)))


def _check_dynamic(shapes, cases=ALL) -> None:
    mod = _model(relay.Any(), relay.Any(), relay.Any(), cases)
    with ember.transform.PassContext(opt_level=3):
        run = relay.create_executor("vm", mod=mod, target="llvm").evaluate()
    rng = np.random.default_rng(1)
    for n, h, w in shapes:
        xs = [rng.uniform(-1, 1, (n, CASES[i][0], h, w)).astype("float32") for i in cases]
        outs = run(*xs)
        for j, (i, x) in enumerate(zip(cases, xs)):
            np.testing.assert_allclose(outs[j].numpy(), _want(i, x), rtol=1e-4, atol=1e-4,
                                       err_msg=f"case {CASES[i]} at {(n, h, w)}")


@needs_cc
def test_dynamic_build_matches_numpy():
    """The strides 2 and 4 and an output padding (one build) at three shapes."""
    _check_dynamic([(1, 1, 1), (2, 5, 7), (1, 4, 3)], cases=(1, 3))


@needs_cc
@pytest.mark.slow
def test_dynamic_build_matches_numpy_at_more_shapes():
    _check_dynamic([(1, 1, 1), (2, 5, 7), (3, 13, 2), (1, 17, 31)])


@needs_cc
@pytest.mark.slow
def test_static_build_still_matches_numpy():
    mod = _model(1, 3, 5)
    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm")
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    xs = [np.random.default_rng(2).uniform(-1, 1, (1, c[0], 3, 5)).astype("float32")
          for c in CASES]
    for i, x in enumerate(xs):
        m.set_input(i, x)
    m.run()
    for i, x in enumerate(xs):
        np.testing.assert_allclose(m.get_output(i).numpy(), _want(i, x), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- global pools of a ? image
def _global_pools(hw) -> ember.IRModule:
    x = relay.var("x", shape=(relay.Any(), 2, *hw, 8))
    return ember.IRModule.from_expr(relay.Function([x], relay.Tuple([
        relay.nn.global_avg_pool2d(x, layout="NCHW8c"),
        relay.nn.global_max_pool2d(x, layout="NCHW8c")])))


def test_blocked_global_pool_of_a_symbolic_image_calls_the_pool_kernel():
    from ember.relay.op.nn.pooling import _global_compute
    from ember.te import tensor as te

    x = te.placeholder((1, 2, ember.tir.Var("h", "int32"), ember.tir.Var("w", "int32"), 8),
                       name="x")
    attrs = relay.nn.global_avg_pool2d(relay.var("y", shape=(1, 2, 3, 3, 8)),
                                       layout="NCHW8c").attrs
    out = _global_compute("nn.global_avg_pool2d", "avg")(attrs, [x], None)[0]
    assert out.op.tag == "pool_nchwc"


@needs_cc
def test_blocked_global_pools_of_a_symbolic_image_match_numpy():
    run = relay.create_executor("vm", mod=_global_pools((relay.Any(), relay.Any())),
                                target="llvm").evaluate()
    for shape in ([1, 2, 5, 7, 8], [3, 2, 1, 1, 8], [2, 2, 13, 3, 8]):
        d = np.random.default_rng(0).standard_normal(shape).astype("float32")
        avg, big = run(d)
        np.testing.assert_allclose(avg.numpy(), d.mean(axis=(2, 3), keepdims=True), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_array_equal(big.numpy(), d.max(axis=(2, 3), keepdims=True))


# ------------------------------------------------ a conv whose channels do not split, ? image
def _batch_head():
    x = relay.var("x", shape=(relay.Any(), 8, 5, 6))
    wt = relay.const(np.ones((2, 8, 1, 1), "float32"))
    return relay.Function([x], relay.nn.conv2d(x, wt, channels=2, kernel_size=(1, 1)))


def _head(h, w):
    """UNet's head: a 1x1 conv of 8 channels to 2 classes (no whole block of output)."""
    x = relay.var("x", shape=(1, 8, h, w))
    wt = np.random.default_rng(5).uniform(-1, 1, (2, 8, 1, 1)).astype("float32")
    y = relay.nn.conv2d(relay.nn.relu(x), relay.const(wt), channels=2, kernel_size=(1, 1))
    return ember.IRModule.from_expr(relay.Function([x], y)), wt


def test_symbolic_image_plans_a_conv_whose_channels_do_not_split_as_a_static_one():
    # the plain NCHW template takes run-time sizes: a ? image or batch is planned as a static
    # size is (UNet's 8->2 head stays plain; it was padded to a block when the plain conv
    # of a ? size took a generic loop nest)
    static = _ops(_plan(_head(5, 6)[0]))
    assert "nn.conv2d" in static and "strided_slice" not in static, static
    assert _ops(_plan(_head(relay.Any(), relay.Any())[0])) == static
    batch = _ops(_plan(ember.IRModule.from_expr(_batch_head())))
    assert "nn.conv2d" in batch and "strided_slice" not in batch, batch


@needs_cc
def test_head_of_a_symbolic_image_matches_numpy():
    mod, wt = _head(relay.Any(), relay.Any())
    with ember.transform.PassContext(opt_level=3):
        run = relay.create_executor("vm", mod=mod, target="llvm").evaluate()
    for h, w in ((1, 1), (5, 3), (17, 9)):
        x = np.random.default_rng(h).standard_normal((1, 8, h, w)).astype("float32")
        want = conv2d_nchw(np.maximum(x, 0).astype("float64"), wt.astype("float64"), (1, 1),
                           (0,) * 4, (1, 1), 1)
        np.testing.assert_allclose(run(x).numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs,match", [
    ({"out_size": (0, 4), "trim": (-1, 0)}, "trim"),
    ({"out_size": (0, 4), "trim": (1,)}, "trim"),
    ({"out_size": (-2, 4)}, "out_size"),
])
def test_interleave_bad_trim_or_size_names_the_attribute(attrs, match):
    from ember.runtime.errors import OpAttributeInvalid

    with pytest.raises(OpAttributeInvalid, match=match):
        relay.nn.contrib_conv2d_transpose_interleave(
            relay.var("x", shape=(1, 4, 2, 2)), strides=(2, 2), offset=(0, 0), **attrs)

"""Strided, unpadded 1x1 convs in NCHW[L]c: gathered to a stride-1 conv (conv2d_nchwc.subsampled)
and run flattened; numerics against numpy, and the cases that must keep the strided kernel."""
from __future__ import annotations

import numpy as np

import ember
from ember import relay
from ember.relay.op.nn.conv_nchwc import contrib_conv2d_nchwc_fused
from ember.te import tensor as te
from ember.topi.nn import conv2d_nchwc as K

# (batch, in channels, out channels, h, w, strides, padding, residual, activation)
CASES = [
    (1, 16, 16, 7, 9, (2, 2), (0, 0, 0, 0), False, "none"),  # odd sizes: the last row and column
    (2, 8, 24, 6, 5, (3, 1), (0, 0, 0, 0), True, "relu"),  # asymmetric, stride > kernel
    (1, 8, 8, 1, 1, (2, 2), (0, 0, 0, 0), False, "relu"),  # a 1x1 map
    (1, 8, 16, 8, 8, (2, 2), (1, 1, 1, 1), True, "none"),  # padded: stays strided
]


def _reference(x, w, b, res, strides, padding, act):
    """NCHW numpy: pad, subsample, contract over input channels."""
    pt, pl, pb, pr = padding
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))[:, :, ::strides[0], ::strides[1]]
    y = np.einsum("nchw,oc->nohw", xp.astype("float64"), w[:, :, 0, 0]) + b[None, :, None, None]
    y = y + res if res is not None else y
    return np.maximum(y, 0) if act == "relu" else y


def test_strided_unit_convs_match_numpy():
    rng = np.random.default_rng(7)
    outs, expect, feeds, params = [], [], {}, []
    for i, (n, ic, oc, h, w, strides, padding, with_res, act) in enumerate(CASES):
        x = rng.standard_normal((n, ic, h, w)).astype("float32")
        wt = (rng.standard_normal((oc, ic, 1, 1)) * 0.3).astype("float32")
        b = rng.standard_normal(oc).astype("float32")
        oh = (h + padding[0] + padding[2] - 1) // strides[0] + 1
        ow = (w + padding[1] + padding[3] - 1) // strides[1] + 1
        res = rng.standard_normal((n, oc, oh, ow)).astype("float32") if with_res else None
        expect.append(_reference(x, wt, b, res, strides, padding, act))
        xv = relay.var(f"x{i}", shape=(n, ic // 8, h, w, 8))
        feeds[f"x{i}"] = K.to_blocked(x, 8)
        params.append(xv)
        rv = None
        if res is not None:
            rv = relay.var(f"r{i}", shape=(n, oc // 8, oh, ow, 8))
            feeds[f"r{i}"] = K.to_blocked(res, 8)
            params.append(rv)
        outs.append(contrib_conv2d_nchwc_fused(
            xv, relay.const(K.pack_weight(wt, 8, 8)), relay.const(b), rv, strides=strides,
            padding=padding, lanes=8, in_block=8, activation=act))
    mod = ember.IRModule.from_expr(relay.Function(params, relay.Tuple(outs)))
    with ember.transform.PassContext(opt_level=3):  # one build for every case
        lib = relay.build(mod, "llvm")
    from ember.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input(**feeds)
    m.run()
    for i, want in enumerate(expect):
        got = K.from_blocked(m.get_output(i).numpy())
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"case {CASES[i]}")


def _geo(strides, padding=(0, 0, 0, 0), kernel=1, h=8):
    oh = (h + padding[0] + padding[2] - kernel) // strides[0] + 1
    return K.ConvGeometry(1, 16, h, h, 16, oh, oh, kernel, kernel, strides, padding, (1, 1), 1,
                          8, 8)


def test_only_strided_unpadded_static_unit_convs_are_gathered():
    x = te.placeholder((1, 2, 8, 8, 8))
    picked, geo = K.subsampled(x, _geo((2, 2)))
    assert picked is not x and tuple(int(d) for d in picked.shape) == (1, 2, 4, 4, 8)
    assert (geo.h, geo.w, geo.strides) == (4, 4, (1, 1)) and geo.macs == _geo((2, 2)).macs
    assert K.flattened(geo).ow == 16  # then run as one long row
    for kept in (_geo((1, 1)), _geo((2, 2), (1, 1, 1, 1)), _geo((2, 2), kernel=3)):
        assert K.subsampled(x, kept) == (x, kept)
    dynamic = _geo((2, 2))
    n = ember.tir.Var("n", "int64")
    dynamic = K.ConvGeometry(n, 16, 8, 8, 16, 4, 4, 1, 1, (2, 2), (0,) * 4, (1, 1), 1, 8, 8)
    assert K.subsampled(x, dynamic) == (x, dynamic)  # a run-time batch keeps the strided kernel

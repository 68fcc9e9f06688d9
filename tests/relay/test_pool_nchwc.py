"""Pools in NCHW[L]c through ember's C kernel (pool_nchwc.h) against Relay's numpy reference
(the debug interpreter), over padding, dilation, ceil_mode, count_include_pad, lanes 4/8/16.
Exact for max; rtol 1e-5 / atol 1e-6 for averages."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import relay
from ember.testing import find_c_compiler

pytestmark = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found")

CASES = [  # (h, w, kernel, stride, padding, dilation, ceil_mode, count_include_pad, lanes)
    (9, 11, 3, 2, (1, 1, 1, 1), 1, False, False, 8),
    (7, 7, 3, 2, (1, 0, 2, 1), 2, True, True, 8),
    (5, 4, 2, 3, (0, 0, 0, 0), 1, True, False, 4),
    (4, 4, 3, 1, (1, 1, 1, 1), 1, False, True, 16),
    (1, 1, 3, 1, (1, 1, 1, 1), 1, False, False, 8),  # every window mostly padding
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_blocked_pools_match_the_reference(kind, case):
    h, w, k, s, pad, d, ceil, inc, lanes = case
    x = np.random.default_rng(0).standard_normal((2, 2, h, w, lanes)).astype("float32")
    xv = relay.var("x", shape=x.shape)
    kwargs = {"pool_size": (k, k), "strides": (s, s), "padding": pad, "dilation": (d, d),
              "ceil_mode": ceil, "layout": f"NCHW{lanes}c"}
    if kind == "avg":
        y = relay.nn.avg_pool2d(xv, count_include_pad=inc, **kwargs)
    else:
        y = relay.nn.max_pool2d(xv, **kwargs)
    mod = ember.IRModule.from_expr(relay.Function([xv], y))
    ref = relay.create_executor("debug", mod=mod).evaluate()(x).numpy()
    got = relay.create_executor("graph", mod=mod, target="llvm").evaluate()(x).numpy()
    lowered = relay.build(mod, "llvm").get_lib().get_source()
    assert f"ember_pool2d_nchwc_x{lanes}(" in lowered
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)

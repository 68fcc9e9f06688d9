"""Lowered 2-d pools vs the numpy references: max/avg with padding, dilation, ceil_mode and
count_include_pad (hypothesis cases), global and adaptive pools, blocked layouts, int dtypes."""
from __future__ import annotations

import numpy as np
from _lowering_util import SUMS, Case, check_cases, rand, sweep
from hypothesis import strategies as st
from strategies import pool2d_case


def _seed(data: st.DataObject) -> np.random.Generator:
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))


def _max_and_avg_pool(data: st.DataObject) -> None:
    rng = _seed(data)
    cases = []
    for op, avg in (("nn.max_pool2d", False), ("nn.avg_pool2d", True)):
        for dtype in ("float32", "int32"):
            c = data.draw(pool2d_case(avg=avg), label=f"{op} {dtype}")
            cases.append(Case(op, [rand(rng, c["data"], dtype, -50, 50)], c["attrs"], SUMS))
    check_cases(cases)


test_max_and_avg_pool, test_max_and_avg_pool_wide = sweep(_max_and_avg_pool)


def _global_and_adaptive_pool(data: st.DataObject) -> None:
    rng = _seed(data)
    layout = data.draw(st.sampled_from(["NCHW", "NHWC", "NCHW4c"]))
    n, c, h, w = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)),
                  data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9)))
    shape = {"NCHW": (n, c, h, w), "NHWC": (n, h, w, c), "NCHW4c": (n, c, h, w, 4)}[layout]
    dtype = data.draw(st.sampled_from(["float32", "int32"]))
    x = rand(rng, shape, dtype, -50, 50)
    out = (data.draw(st.integers(1, 2 * h)), data.draw(st.integers(1, 2 * w)))
    cases = [Case(f"nn.global_{k}_pool2d", [x], {"layout": layout}, SUMS) for k in ("max", "avg")]
    cases += [Case(f"nn.adaptive_{k}_pool2d", [x], {"layout": layout, "output_size": out}, SUMS)
              for k in ("max", "avg")]
    check_cases(cases)


test_global_and_adaptive_pool, test_global_and_adaptive_pool_wide = sweep(_global_and_adaptive_pool)


def test_avg_pool_divisor_with_a_dilated_window_overhanging_both_ends():
    # Taps at -1, 1, 3 of a 3-wide input: only tap 1 is inside (count 1, or 2 with the pad).
    x = np.arange(1, 10, dtype="float32").reshape(1, 1, 3, 3)
    attrs = {"pool_size": (3, 3), "dilation": (2, 2), "padding": (1, 1, 1, 1)}
    check_cases([Case("nn.avg_pool2d", [x], {**attrs, "count_include_pad": inc})
                 for inc in (False, True)])


def test_pool_in_a_blocked_layout():
    x = rand(np.random.default_rng(2), (1, 2, 7, 5, 4))
    attrs = {"pool_size": (3, 2), "strides": (2, 2), "padding": (1, 0, 1, 1), "layout": "NCHW4c",
             "ceil_mode": True}
    check_cases([Case("nn.max_pool2d", [x], attrs), Case("nn.avg_pool2d", [x], attrs, SUMS)])

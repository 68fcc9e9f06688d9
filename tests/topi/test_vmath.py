"""float32 exp, sigmoid, tanh and erf as compiled kernels compute them (ember/kernels/vmath.h:
branch-free, so the loop vectorizes) against the exact functions, in ulps of the float32
result."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from ember import relay

MAX_ULP = 2.5  # onnxruntime's vectorized Erf is of this order; libm's erff is 1 ulp


def unary_kernel(op):  # type: ignore[no-untyped-def]
    def compiled(n: int):  # type: ignore[no-untyped-def]
        x = relay.var("x", shape=(n,))
        return ember.compile(ember.IRModule.from_expr(relay.Function([x], op(x))),
                             executor="graph")
    return compiled


@pytest.fixture(scope="module")
def erf_kernel():  # type: ignore[no-untyped-def]
    return unary_kernel(relay.erf)


def ulps(got: np.ndarray, x: np.ndarray, exact=math.erf) -> np.ndarray:  # type: ignore[no-untyped-def]
    want = np.array([exact(v) for v in x.astype(np.float64)])
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


def _exp(v: float) -> float:
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _sigmoid(v: float) -> float:
    return 1.0 / (1.0 + _exp(-v))


@pytest.mark.parametrize("name", ["exp", "sigmoid", "tanh"])
def test_exp_sigmoid_tanh_within_ulps(name: str) -> None:
    op, exact = {"exp": (relay.exp, _exp), "sigmoid": (relay.sigmoid, _sigmoid),
                 "tanh": (relay.tanh, math.tanh)}[name]
    rng = np.random.default_rng(2)
    # the whole range: where results become denormal (below -87.3) or overflow (above 88.7)
    x = np.concatenate([rng.uniform(-87, 88, 60000), np.linspace(-0.7, 0.7, 10001),
                        np.logspace(-30, 1, 2001), -np.logspace(-30, 1, 2001),
                        np.linspace(88.5, 88.8, 1001), np.linspace(-104, -87, 2001)]
                       ).astype(np.float32)
    got = unary_kernel(op)(x.size)(x)
    want = np.array([exact(v) for v in x.astype(np.float64)])
    with np.errstate(over="ignore"):
        finite = np.isfinite(want.astype(np.float32))
    normal = np.abs(want) >= np.finfo(np.float32).tiny
    with np.errstate(over="ignore"):
        err = ulps(got, x, exact)
    keep = normal & finite
    worst = int(np.argmax(np.where(keep, err, 0)))
    assert err[worst] <= 2.0, f"{name}({x[worst]!r}) = {got[worst]!r}: {err[worst]:.2f} ulp"
    # denormal results within two denormal steps (sigmoid's 1 / (1 + e^-x) gives 0 there,
    # as it does with libm's expf); overflow to inf as libm
    sub = ~normal
    close = np.abs(got[sub] - want[sub]) <= 2 * np.finfo(np.float32).smallest_subnormal
    assert np.all(close | ((name == "sigmoid") & (got[sub] == 0)))
    assert np.all(got[~finite] == np.inf)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 200.0, -200.0], np.float32)
    out = unary_kernel(op)(special.size)(special)
    assert np.isnan(out[0])
    want_special = [exact(float(v)) for v in special[1:]]
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out[1:], np.array(want_special, np.float32))


def test_erf_within_ulps_over_every_range(erf_kernel) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    # dense around the branch points and the clamp, log-spaced tiny values, uniform [-6, 6]
    parts = [np.linspace(lo, hi, 20001) for lo, hi in ((0.8, 0.95), (3.9, 4.1), (0.49, 0.51))]
    parts += [np.logspace(-30, 0, 4001), rng.uniform(-6, 6, 40000)]
    x = np.concatenate([*parts, *(-p for p in parts)]).astype(np.float32)
    got = erf_kernel(x.size)(x)
    err = ulps(got, x)
    worst = int(np.argmax(err))
    assert err[worst] <= MAX_ULP, f"erf({x[worst]!r}) = {got[worst]!r}: {err[worst]:.2f} ulp"


def test_erf_special_values(erf_kernel) -> None:  # type: ignore[no-untyped-def]
    tiny = np.float32(np.finfo(np.float32).smallest_subnormal)
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, tiny, -tiny, 4.0,
                  -4.0, 0.875, -0.875], np.float32)
    got = erf_kernel(x.size)(x)
    np.testing.assert_array_equal(got[:4], [0.0, -0.0, 1.0, -1.0])
    assert np.signbit(got[1]) and np.isnan(got[4])
    np.testing.assert_array_equal(got[5:7], [1.0, -1.0])
    assert got[7] == tiny * np.float32(2 / math.sqrt(math.pi)) or abs(got[7]) <= 2 * tiny
    assert ulps(got[9:], x[9:]).max() <= MAX_ULP


def test_gelu_matches_the_exact_formula(erf_kernel) -> None:  # type: ignore[no-untyped-def]
    """GELU as exporters write it (x * 0.5 * (1 + erf(x / sqrt 2))) through the default
    pipeline, against float64."""
    x = relay.var("x", shape=(4, 257))
    gelu = relay.multiply(relay.multiply(x, relay.const(0.5)), relay.add(
        relay.const(1.0), relay.erf(relay.divide(x, relay.const(math.sqrt(2.0))))))
    model = ember.compile(ember.IRModule.from_expr(relay.Function([x], gelu)))
    data = np.random.default_rng(1).standard_normal((4, 257)).astype(np.float32) * 3
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in
                     data.astype(np.float64).ravel()]).reshape(data.shape)
    np.testing.assert_allclose(model(data), want, rtol=2e-6, atol=1e-7)


def test_nn_gelu_blocked_edge_values() -> None:
    """nn.gelu standalone over a blocked (N, C/16, 1, W, 16) value, as wav2vec2's GELU after its
    GroupNorm runs (its loop is 512 bits wide on AVX-512: EMBER_VMATH_WIDE), at the edge
    values, against float64 math.erf: rtol 2e-6, atol 1e-7 (1 + erf(x) cancels for x < -2,
    as in the formula every framework evaluates)."""
    shape = (1, 2, 1, 37, 16)
    x = relay.var("x", shape=shape)
    model = ember.compile(ember.IRModule.from_expr(relay.Function([x], relay.nn.gelu(x))),
                          executor="graph")
    tiny = np.finfo(np.float32).smallest_subnormal
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, tiny, -tiny,
                      1e-30, -1e-30, 0.875, -0.875, 4.0, -4.0, 5.7, -5.7, 9.0, -9.0, 20.0],
                     np.float32)
    data = np.random.default_rng(2).standard_normal(shape).astype(np.float32) * 3
    data.reshape(-1)[:edges.size] = edges
    got = np.asarray(model(data)).reshape(-1)
    flat = data.reshape(-1).astype(np.float64)
    # NaN stays NaN; -inf gives NaN (-inf * (1 + erf(-inf)) = -inf * 0, IEEE arithmetic of
    # the formula); the largest floats give x and -0
    assert np.isnan(got[4]) and np.isnan(got[3]) and got[2] == np.inf
    assert got[5] == np.float32(3.4e38) and got[6] == 0.0
    finite = np.isfinite(flat) & (np.abs(flat) < 1e30)
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in flat[finite]])
    np.testing.assert_allclose(got[finite], want, rtol=2e-6, atol=1e-7)


def test_vmath_kernels_are_marked_wide() -> None:
    """The C of a kernel calling vmath.h carries EMBER_VMATH_WIDE (its task function and
    its unpacked function); one without (relu) does not."""
    from ember.relay.backend import Executor

    x = relay.var("x", shape=(1, 4, 1, 1000, 16))
    for body, wide in ((relay.nn.gelu(x), True), (relay.nn.relu(x), False)):
        mod = ember.IRModule.from_expr(relay.Function([x], body))
        with ember.transform.PassContext(opt_level=3):
            lib = relay.build(mod, "llvm", executor=Executor("graph")).get_lib()
        src = "\n".join(m.get_source() for m in [lib, *lib.imported_modules]
                        if hasattr(m, "get_source"))
        lines = [ln for ln in src.splitlines() if "EMBER_VMATH_WIDE" in ln
                 and not ln.startswith("#")]
        assert bool(lines) == wide, lines


def _log(v: float) -> float:
    if v != v or v < 0:
        return math.nan
    return -math.inf if v == 0 else math.log(v)


@pytest.mark.parametrize("name", ["log", "log2", "log10"])
def test_log_within_ulps_and_special_values(name: str) -> None:
    """float32 log, log2 and log10 (ember_logf and its multiples) over the whole positive
    range, denormals and the values next to 1 (where the result is small and its ulp fine),
    within MAX_ULP; IEEE's special values."""
    op, scale = {"log": (relay.log, 1.0), "log2": (relay.log2, 1 / math.log(2)),
                 "log10": (relay.log10, 1 / math.log(10))}[name]

    def exact(v: float) -> float:
        return _log(v) * scale
    rng = np.random.default_rng(5)
    tiny = np.finfo(np.float32).tiny
    x = np.concatenate([np.exp(rng.uniform(-87, 88.7, 60000)), rng.uniform(0.5, 2, 20000),
                        1 + np.linspace(-1e-3, 1e-3, 4001), rng.uniform(0, tiny, 2000),
                        np.array([tiny, np.finfo(np.float32).max, 1.0, 2.0, 0.5])]
                       ).astype(np.float32)
    x = x[x > 0]
    got = unary_kernel(op)(x.size)(x)
    err = ulps(got, x, exact)
    worst = int(np.argmax(err))
    assert err[worst] <= MAX_ULP, f"log({x[worst]!r}) = {got[worst]!r}: {err[worst]:.2f} ulp"
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, 1.0,
                        np.finfo(np.float32).smallest_subnormal], np.float32)
    out = unary_kernel(op)(special.size)(special)
    np.testing.assert_array_equal(out, np.array([exact(float(v)) for v in special], np.float32))

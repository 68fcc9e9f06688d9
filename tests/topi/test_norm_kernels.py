"""The softmax / log_softmax / layer_norm / rms_norm C kernels (ember/kernels/softmax.h, norm.h)
against numpy (float64 reference; softmax rtol 1e-5, atol 1e-6 (log_softmax: 1e-6 (1 +
max|x|), a float32 difference of values of x's size); layer_norm rtol 1e-4, atol 1e-4 plus
1e-6 times max|x| / std times max|gamma| (float32 centring of nearly equal values); rms_norm
rtol 1e-5, atol 1e-6 times max|gamma|).

- the headers alone, through a ctypes harness, at every SIMD level this machine runs (AVX2+FMA,
  SSE2, the portable C99 struct path) and AVX-512 (compiled; run only on an AVX-512 host),
  over hypothesis shapes (outer, n, inner): axis sizes 1, odd, not a multiple of the lanes,
  large; the parallel split; -inf masks, all -inf rows, NaN, +inf and very large inputs;
- the ops through relay.build at forced SIMD levels (EMBER_MARCH) and any axis;
- the topi functions' refusals.
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
from ember.relay.op.nn.epilogue_activation import activation_ref
from ember.topi.nn import gemm_kernel as gk
from ember.runtime.errors import OpError

HERE = Path(__file__).parent
F32 = ctypes.POINTER(ctypes.c_float)


@pytest.fixture(scope="module", params=list(HARNESS_LEVELS))
def harness(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> _Lib:
    level = request.param
    lib = harness_library(HERE / "data" / "norm_harness.c", level, tmp_path_factory.mktemp(level))
    return _Lib(lib, level)


class _Lib:
    def __init__(self, lib: ctypes.CDLL, level: str) -> None:
        self.lib, self.level = lib, level
        lib.harness_simd_name.restype = ctypes.c_char_p
        i64, i32 = ctypes.c_int64, ctypes.c_int32
        lib.harness_softmax.argtypes = [F32, F32, i64, i64, i64, i32, i32]
        lib.harness_set_reverse.argtypes = [ctypes.c_int]
        lib.harness_layer_norm.argtypes = [F32, F32, i64, i64, i64, F32, F32, ctypes.c_float,
                                           i32]
        f32 = ctypes.c_float
        lib.harness_rms_norm.argtypes = [F32, F32, i64, i64, i64, F32, f32, i32]
        lib.harness_layer_norm_act.argtypes = [F32, F32, i64, i64, i64, F32, F32, f32, F32, F32,
                                               i64, i64, i32, f32, f32, i32]

    def softmax(self, x: np.ndarray, axis: int, log: bool, parallel: bool,
                reverse: bool = False) -> np.ndarray:
        """y = softmax(x); with ``reverse`` the parallel tasks run last to first. y lies in a
        larger buffer whose guard elements after it must stay untouched."""
        outer, n, inner = _split(x.shape, axis)
        guarded = np.full(x.size + 64, 7.0, np.float32)
        y = guarded[:x.size].reshape(x.shape)
        self.lib.harness_set_reverse(int(reverse))
        rc = self.lib.harness_softmax(_ptr(x), _ptr(y), outer, n, inner, int(log), int(parallel))
        self.lib.harness_set_reverse(0)
        assert rc == 0
        assert (guarded[x.size:] == 7.0).all(), "the kernel wrote past its output"
        return y

    def layer_norm(self, x: np.ndarray, axis: int, gamma: np.ndarray | None,
                   beta: np.ndarray | None, eps: float, parallel: bool) -> np.ndarray:
        outer, n, inner = _split(x.shape, axis)
        y = np.full_like(x, 7.0)
        rc = self.lib.harness_layer_norm(_ptr(x), _ptr(y), outer, n, inner, _ptr(gamma),
                                         _ptr(beta), eps, int(parallel))
        assert rc == 0
        return y

    def rms_norm(self, x: np.ndarray, axis: int, gamma: np.ndarray | None, eps: float,
                 parallel: bool) -> np.ndarray:
        outer, n, inner = _split(x.shape, axis)
        y = np.full_like(x, 7.0)
        rc = self.lib.harness_rms_norm(_ptr(x), _ptr(y), outer, n, inner, _ptr(gamma), eps,
                                       int(parallel))
        assert rc == 0
        return y

    def layer_norm_act(self, x: np.ndarray, axis: int, gamma: np.ndarray | None,
                       beta: np.ndarray | None, eps: float, row_scale: np.ndarray | None,
                       row_shift: np.ndarray | None, row_div: int, act: str,
                       parallel: bool) -> np.ndarray:
        outer, n, inner = _split(x.shape, axis)
        rows = row_scale if row_scale is not None else row_shift
        count = 1 if rows is None else rows.size
        y = np.full_like(x, 7.0)
        code, p0, p1 = ACTS[act]
        rc = self.lib.harness_layer_norm_act(
            _ptr(x), _ptr(y), outer, n, inner, _ptr(gamma), _ptr(beta), eps, _ptr(row_scale),
            _ptr(row_shift), count, row_div, code, p0, p1, int(parallel))
        assert rc == 0
        return y


def _ptr(a: np.ndarray | None) -> ctypes._Pointer | None:
    return None if a is None else a.ctypes.data_as(F32)


def _split(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    return (int(np.prod(shape[:axis])), shape[axis], int(np.prod(shape[axis + 1:])))


def softmax_ref(x: np.ndarray, axis: int, log: bool) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = x.max(axis, keepdims=True)
        s = np.exp(x - m).sum(axis, keepdims=True)
        return x - m - np.log(s) if log else np.exp(x - m) / s


def layer_norm_ref(x: np.ndarray, axis: int, gamma: np.ndarray | None, beta: np.ndarray | None,
                   eps: float) -> np.ndarray:
    x = x.astype(np.float64)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    y = (x - x.mean(axis, keepdims=True)) / np.sqrt(x.var(axis, keepdims=True) + eps)
    if gamma is not None:
        y = y * gamma.reshape(shape)
    return y + beta.reshape(shape) if beta is not None else y


# activation -> (gemm_epilogue.h code, p0, p1) as FuseNormEpilogue sets them
ACTS = {act: (gk.ACTIVATIONS[act], *params) for act, params in {
    "none": (0.0, 0.0), "relu": (0.0, 0.0), "clip": (-0.5, 1.5),
    "gelu_erf": (0.5, 1 / np.sqrt(2)), "gelu_tanh": (0.5, np.sqrt(2 / np.pi)),
    "sigmoid": (0.0, 0.0), "hardswish": (1 / 6, 0.0), "tanh": (0.0, 0.0),
    "leaky_relu": (0.1, 0.0), "silu": (0.0, 0.0), "hardsigmoid": (0.2, 0.5),
    "mish": (0.0, 0.0)}.items()}


def act_ref(y: np.ndarray, act: str) -> np.ndarray:
    _, p0, p1 = ACTS[act]
    if act == "hardswish":  # the kernel's hardswish carries its 1/6 as p0
        return 6 * p0 * activation_ref(y, act)
    return activation_ref(y, act, p0, p1)


def _rand(shape: tuple[int, ...], seed: int, scale: float = 3.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


# sizes around the lane counts (4, 8, 16) and one large
SIZES = st.sampled_from([1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 128, 1000])


# ------------------------------------------------------------------------------ the headers
def test_harness_runs_the_intended_path(harness: _Lib) -> None:
    assert harness.lib.harness_simd_name().decode() == harness.level


@settings(max_examples=40, deadline=None)
@given(outer=st.integers(1, 5), n=SIZES, inner=st.sampled_from([1, 1, 2, 3, 8, 9, 17]),
       log=st.booleans(), parallel=st.booleans(), seed=st.integers(0, 2**16))
def test_softmax_matches_numpy(harness: _Lib, outer: int, n: int, inner: int, log: bool,
                               parallel: bool, seed: int) -> None:
    x = _rand((outer, n, inner), seed)
    got = harness.softmax(x, 1, log, parallel)
    # log_softmax is x - (max + log(sum)): a float32 difference of values of x's magnitude
    atol = 1e-6 * (1 + np.abs(x).max()) if log else 1e-6
    np.testing.assert_allclose(got, softmax_ref(x, 1, log), rtol=1e-5, atol=atol)


@settings(max_examples=40, deadline=None)
@given(outer=st.integers(1, 5), n=SIZES, inner=st.sampled_from([1, 1, 2, 3, 8, 9, 17]),
       affine=st.sampled_from(["none", "gamma", "beta", "both"]),
       eps=st.sampled_from([0.0, 1e-12, 1e-5, 0.1]), parallel=st.booleans(),
       seed=st.integers(0, 2**16))
def test_layer_norm_matches_numpy(harness: _Lib, outer: int, n: int, inner: int, affine: str,
                                  eps: float, parallel: bool, seed: int) -> None:
    x = _rand((outer, n, inner), seed) + 5.0  # an offset: the centring must be exact
    if n == 1 and eps == 0.0:
        eps = 1e-5  # var 0 + eps 0: 0 / 0
    gamma = _rand((n,), seed + 1) if affine in ("gamma", "both") else None
    beta = _rand((n,), seed + 2) if affine in ("beta", "both") else None
    got = harness.layer_norm(x, 1, gamma, beta, eps, parallel)
    # float32 centring loses ~1e-7 |x| absolute: relative to the spread that is |x| / std
    cond = np.abs(x).max(1, keepdims=True) / np.sqrt(x.astype(np.float64).var(1, keepdims=True)
                                                     + eps)
    scale = 1.0 if gamma is None else np.abs(gamma).max()
    atol = 1e-4 + 1e-6 * cond * scale
    want = layer_norm_ref(x, 1, gamma, beta, eps)
    assert (np.abs(got - want) <= atol + 1e-4 * np.abs(want)).all()


@settings(max_examples=30, deadline=None)
@given(outer=st.integers(1, 5), n=SIZES, inner=st.sampled_from([1, 1, 2, 3, 8, 9, 17]),
       gamma=st.booleans(), eps=st.sampled_from([1e-12, 1e-6, 0.1]), parallel=st.booleans(),
       seed=st.integers(0, 2**16))
def test_rms_norm_matches_numpy(harness: _Lib, outer: int, n: int, inner: int, gamma: bool,
                                eps: float, parallel: bool, seed: int) -> None:
    """x / sqrt(mean(x^2) + eps) [* gamma]: nothing centred (an offset stays in), rtol 1e-5,
    atol 1e-6 times max|gamma| (float32 sums of squares)."""
    x = _rand((outer, n, inner), seed) + 2.0
    g = _rand((n,), seed + 1) if gamma else None
    got = harness.rms_norm(x, 1, g, eps, parallel)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(1, keepdims=True) + eps)
    if g is not None:
        want = want * g.reshape(1, n, 1)
    scale = 1.0 if g is None else np.abs(g).max()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * scale)


@settings(max_examples=60, deadline=None)
@given(outer=st.integers(1, 6), n=SIZES, inner=st.sampled_from([1, 1, 2, 3, 8, 9, 16, 17, 33]),
       act=st.sampled_from(list(ACTS)), gamma_beta=st.booleans(),
       rows=st.sampled_from(["none", "scale", "shift", "both"]), row_div=st.sampled_from([1, 2, 3]),
       parallel=st.booleans(), seed=st.integers(0, 2**16))
def test_layer_norm_act_matches_numpy(harness: _Lib, outer: int, n: int, inner: int, act: str,
                                      gamma_beta: bool, rows: str, row_div: int,
                                      parallel: bool, seed: int) -> None:
    """ember_layer_norm_act: the norm, the row affine (row = outer * inner + lane, value
    (row / row_div) % count) and the activation, against numpy; tolerance as the plain
    norm's (atol 1e-4 plus the centring term, rtol 1e-4) times the row scale."""
    x = _rand((outer, n, inner), seed) + 5.0
    eps = 1e-5
    gamma = _rand((n,), seed + 1) if gamma_beta else None
    beta = _rand((n,), seed + 2) if gamma_beta else None
    count = int(np.random.default_rng(seed).integers(1, 8))
    scale = _rand((count,), seed + 3, 1.5) if rows in ("scale", "both") else None
    shift = _rand((count,), seed + 4, 1.5) if rows in ("shift", "both") else None
    got = harness.layer_norm_act(x, 1, gamma, beta, eps, scale, shift, row_div, act, parallel)
    y = layer_norm_ref(x, 1, gamma, beta, eps)
    index = (np.arange(outer * inner).reshape(outer, 1, inner) // row_div) % count
    if scale is not None:
        y = y * scale.astype(np.float64)[index]
    if shift is not None:
        y = y + shift.astype(np.float64)[index]
    want = act_ref(y, act)
    cond = np.abs(x).max(1, keepdims=True) / np.sqrt(x.astype(np.float64).var(1, keepdims=True)
                                                     + eps)
    mag = (1.0 if gamma is None else np.abs(gamma).max()) * (
        1.0 if scale is None else np.abs(scale).max())
    atol = (1e-4 + 1e-6 * cond) * max(mag, 1.0)
    assert (np.abs(got - want) <= atol + 1e-4 * np.abs(want)).all()


def test_layer_norm_eps_dominates_a_constant_row(harness: _Lib) -> None:
    x = np.full((3, 37, 1), 2.5, np.float32)
    got = harness.layer_norm(x, 1, None, np.full(37, 0.25, np.float32), 0.01, False)
    np.testing.assert_array_equal(got, np.full_like(x, 0.25))  # (x - mean) is exactly 0


@pytest.mark.parametrize("inner", [1, 8, 3])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("n", [21, 3, 37])  # a ragged end (overlapping last vector), short row
def test_softmax_extreme_inputs(harness: _Lib, inner: int, log: bool, n: int) -> None:
    rows = np.stack([
        np.where(np.arange(n) == n - 1, np.nan, 0.0),  # a NaN in the last (overlapping) lanes
        np.where(np.arange(n) >= n - 2, -np.inf, 1.0),  # masked entries at the end
        np.where(np.arange(n) % 3 == 0, -np.inf, np.linspace(-2, 2, n)),  # masked entries
        np.full(n, -np.inf),  # everything masked: NaN, as numpy
        np.linspace(-1e30, 1e30, n),  # very large: one-hot
        np.where(np.arange(n) == 4, np.nan, 0.0),  # a NaN: the row is NaN
        np.where(np.arange(n) == 6, np.inf, 0.0),  # +inf: NaN where numpy gives NaN
        np.linspace(80.0, 100.0, n),  # exp would overflow without the max
    ]).astype(np.float32)
    x = np.ascontiguousarray(np.repeat(rows[:, :, None], inner, axis=2))
    want = softmax_ref(x, 1, log)
    got = harness.softmax(x, 1, log, False)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
    if not log:
        assert (got[2, ::3] == 0.0).all()  # masked entries are exactly 0
        assert (got[1, -2:] == 0.0).all()


def _short_rows(outer: int, n: int, seed: int) -> np.ndarray:
    """(outer, n) rows of mixed magnitudes; about one in six holds a special value (a -inf
    mask, all -inf, a NaN, a +inf) at a random place, so rows of either kind fall at every
    position of the kernel's blocks and vectors."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((outer, n)) * rng.choice([0.1, 3.0, 50.0], (outer, 1)))
    for r in np.flatnonzero(rng.random(outer) < 1 / 6):
        kind, k = rng.integers(4), rng.integers(n)
        if kind == 0:
            x[r, k] = -np.inf
        elif kind == 1:
            x[r] = -np.inf
        else:
            x[r, k] = (np.nan, np.inf)[kind - 2]
    return x.astype(np.float32)


@settings(max_examples=40, deadline=None)
@given(outer=st.integers(1, 70), n=st.integers(1, 17), inner=st.sampled_from([1, 1, 2, 3, 5]),
       log=st.booleans(), parallel=st.booleans(), seed=st.integers(0, 2**16))
def test_softmax_short_rows_and_narrow_inner(harness: _Lib, outer: int, n: int, inner: int,
                                             log: bool, parallel: bool, seed: int) -> None:
    """Rows shorter than a vector (one vector per row, its lanes past the row stored into the
    next rows' outputs before those are written) and inner dimensions narrower than a vector
    (a block of positions transposed into lanes), many rows, special values anywhere: as
    numpy's formula (rtol 1e-5, atol 1e-6; log_softmax atol 1e-6 (1 + max|x|)), NaN where it
    gives NaN."""
    x = np.ascontiguousarray(
        _short_rows(outer * inner, n, seed).reshape(outer, inner, n).transpose(0, 2, 1))
    got = harness.softmax(x, 1, log, parallel, reverse=parallel)
    finite = np.abs(x[np.isfinite(x)])
    atol = 1e-6 * (1 + (finite.max() if finite.size else 0)) if log else 1e-6
    np.testing.assert_allclose(got, softmax_ref(x, 1, log), rtol=1e-5, atol=atol,
                               equal_nan=True)


# ------------------------------------------------------------------------------ relay builds
def _build_run(expr: relay.Expr, inputs: dict[str, np.ndarray], params: dict | None = None,
               disabled: tuple[str, ...] = ()) -> np.ndarray:
    from ember.contrib import graph_executor

    func = relay.Function(relay.analysis.free_vars(expr), expr)
    with ember.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
        lib = relay.build(ember.IRModule.from_expr(func), "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input(**inputs)
    m.run()
    return m.get_output(0).numpy()


MARCHES = [pytest.param("x86-64-v2", id="sse2"), pytest.param("x86-64-v3", id="avx2")]


@pytest.mark.parametrize("march", MARCHES)
def test_ops_through_relay_build_at_each_level(march: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if march == "x86-64-v3" and not host_has("avx2"):
        pytest.skip("host has no AVX2")
    monkeypatch.setenv("EMBER_MARCH", march)
    shape = (3, 19, 40)
    x = relay.var("x", shape=shape)
    g, b = relay.var("g", shape=(19,)), relay.var("b", shape=(19,))
    outs = relay.Tuple([relay.nn.softmax(x, axis=-1), relay.nn.log_softmax(x, axis=1),
                        relay.nn.layer_norm(x, g, b, axis=1, epsilon=1e-3),
                        relay.nn.rms_norm(x, g, axis=1, epsilon=1e-3)])
    xv, gv, bv = _rand(shape, 1), _rand((19,), 2), _rand((19,), 3)
    func = relay.Function([x, g, b], outs)
    from ember.contrib import graph_executor

    with ember.transform.PassContext(opt_level=3):
        lib = relay.build(ember.IRModule.from_expr(func), "llvm")
    m = graph_executor.GraphModule(lib["default"](ember.cpu()))
    m.set_input(x=xv, g=gv, b=bv)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), softmax_ref(xv, 2, False), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(m.get_output(1).numpy(), softmax_ref(xv, 1, True), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(m.get_output(2).numpy(), layer_norm_ref(xv, 1, gv, bv, 1e-3),
                               rtol=1e-4, atol=1e-5)
    x64 = xv.astype(np.float64)
    rms = x64 / np.sqrt((x64 * x64).mean(1, keepdims=True) + 1e-3) * gv.reshape(1, 19, 1)
    np.testing.assert_allclose(m.get_output(3).numpy(), rms, rtol=1e-5, atol=1e-5)


def test_layer_norm_without_scale_or_centre() -> None:
    x = relay.var("x", shape=(4, 33))
    y = relay.nn.layer_norm(x, relay.const(np.full(33, 9.0, np.float32)),
                            relay.const(np.full(33, 9.0, np.float32)), center=False, scale=False)
    xv = _rand((4, 33), 5)
    got = _build_run(y, {"x": xv}, disabled=("SimplifyInference",))
    np.testing.assert_allclose(got, layer_norm_ref(xv, 1, None, None, 1e-5), rtol=1e-4,
                               atol=1e-5)


def test_float64_softmax_keeps_the_te_path() -> None:
    x = relay.var("x", shape=(2, 9), dtype="float64")
    xv = np.random.default_rng(0).standard_normal((2, 9))
    got = _build_run(relay.nn.softmax(x), {"x": xv})
    np.testing.assert_allclose(got, softmax_ref(xv, 1, False), rtol=1e-12)


# ------------------------------------------------------------------------------ refusals
def test_topi_kernels_refuse_bad_operands() -> None:
    from ember import te
    from ember.topi.nn import norm_kernel

    x = te.placeholder((2, 5), name="x")
    with pytest.raises(OpError, match="axis 2 is out of range"):
        norm_kernel.softmax(x, 2)
    with pytest.raises(OpError, match="float32"):
        norm_kernel.softmax(te.placeholder((2, 5), dtype="float16", name="h"))
    with pytest.raises(OpError, match="gamma must have 5 values"):
        norm_kernel.layer_norm(x, te.placeholder((4,), name="g"), None)
    with pytest.raises(OpError, match="axis -3 is out of range"):
        norm_kernel.layer_norm(x, None, None, axis=-3)

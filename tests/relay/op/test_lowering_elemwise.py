"""Lowered elementwise and broadcasting ops vs their numpy references, over hypothesis-drawn
shapes (odd sizes, size-1 and rank-0 tensors), dtypes and values.

Each hypothesis example draws one case per op and compiles them all in one C file.
"""
from __future__ import annotations

import numpy as np
import pytest
from _lowering_cases import UNARY_RANGES
from _lowering_util import Case, check_cases, rand, sweep
from hypothesis import strategies as st
from strategies import broadcastable_pair, shapes

import ember
from ember import relay
from ember.ir.types import Any as AnyDim
from ember.ir.types import TensorType

FLOATS = st.sampled_from(["float32", "float64"])
INTS = st.sampled_from(["int8", "int32", "int64", "uint8"])

FLOAT_UNARY = ["exp", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin",
               "cos", "tan", "floor", "ceil", "trunc", "round", "negative", "abs", "sign", "copy",
               "isnan", "isinf", "isfinite", "logical_not", "nn.relu", "annotation.stop_fusion"]
INT_UNARY = ["negative", "abs", "sign", "floor", "ceil", "trunc", "round", "copy", "isnan",
             "isinf", "isfinite", "logical_not", "bitwise_not", "nn.relu"]
ARITH = ["add", "subtract", "multiply", "divide", "floor_divide", "mod", "floor_mod", "power",
         "maximum", "minimum"]
COMPARE = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
           "logical_and", "logical_or", "logical_xor"]


def _rng(data: st.DataObject) -> np.random.Generator:
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))


def _specials(rng: np.random.Generator, x: np.ndarray) -> np.ndarray:
    """Sprinkle nan and +-inf into a float array (for the isnan/isinf/isfinite tests)."""
    flat = x.reshape(-1).copy()
    if flat.size:
        picks = rng.integers(0, flat.size, size=min(3, flat.size))
        flat[picks] = rng.choice([np.nan, np.inf, -np.inf], size=picks.size)
    return flat.reshape(x.shape)


def _unary_float(data: st.DataObject) -> None:
    rng = _rng(data)
    cases = []
    for name in FLOAT_UNARY:
        shape, dtype = data.draw(shapes(0, 4), label=name), data.draw(FLOATS)
        lo, hi = UNARY_RANGES.get(name, (-4, 4))
        x = rand(rng, shape, dtype, lo, hi)
        if name in ("isnan", "isinf", "isfinite"):
            x = _specials(rng, x)
        cases.append(Case(name, [x]))
    check_cases(cases)


test_unary_float, test_unary_float_wide = sweep(_unary_float)


def _unary_int(data: st.DataObject) -> None:
    rng = _rng(data)
    cases = [Case(name, [rand(rng, data.draw(shapes(0, 4), label=name), data.draw(INTS),
                              -128, 127)]) for name in INT_UNARY]
    check_cases(cases)


def _binary_values(rng: np.random.Generator, name: str, shape: tuple, dtype: str,
                   rhs: bool) -> np.ndarray:
    if name == "power":
        return rand(rng, shape, dtype, 0.5, 2) if dtype.startswith("float") else rand(
            rng, shape, dtype, 0 if rhs else -3, 3)
    if dtype.startswith("float") and name in ("divide", "floor_divide", "mod", "floor_mod"):
        lo = 0.5 if rhs else -9  # float x / 0 is inf or nan on both sides; keep it finite
        sign = rng.choice([-1, 1], size=shape) if rhs else 1
        return (rand(rng, shape, dtype, lo, 9) * sign).astype(dtype)
    return rand(rng, shape, dtype, -9, 9)  # integer divisors include 0 (the kernel gives 0)


test_unary_int, test_unary_int_wide = sweep(_unary_int)


def _binary(data: st.DataObject) -> None:
    rng = _rng(data)
    cases = []
    for name in ARITH + COMPARE:
        sa, sb = data.draw(broadcastable_pair(), label=name)
        dtype = data.draw(st.sampled_from(["float32", "float64", "int8", "int32", "int64",
                                           "uint8"]))
        a = _binary_values(rng, name, sa, dtype, False)
        b = _binary_values(rng, name, sb, dtype, True)
        cases.append(Case(name, [a, b]))
    check_cases(cases)


test_binary, test_binary_wide = sweep(_binary)


def _bitwise(data: st.DataObject) -> None:
    rng = _rng(data)
    cases = []
    for name in ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"]:
        sa, sb = data.draw(broadcastable_pair(), label=name)
        dtype = data.draw(st.sampled_from(["int8", "int32", "int64", "uint8", "bool"]))
        info = np.iinfo(dtype) if dtype != "bool" else None
        lo, hi = (0, 1) if info is None else (int(info.min), int(info.max))
        args = [rand(rng, sa, dtype, lo, hi)]
        if name != "bitwise_not":
            args.append(rand(rng, sb, dtype, lo, hi))
        cases.append(Case(name, args))
    check_cases(cases)


test_bitwise, test_bitwise_wide = sweep(_bitwise)


def test_bool_arithmetic_is_logical():
    a, b = np.array([True, False, True, False]), np.array([True, True, False, False])
    check_cases([Case(n, [a, b]) for n in ("add", "multiply", "maximum", "minimum", "equal")])


def _where_clip_cast(data: st.DataObject) -> None:
    rng = _rng(data)
    cases = []
    sa, sb = data.draw(broadcastable_pair(3), label="where")
    sc = data.draw(st.sampled_from([sa, sb, ()]))
    dtype = data.draw(st.sampled_from(["float32", "int32", "uint8"]))
    cases.append(Case("where", [rand(rng, sc, data.draw(st.sampled_from(["bool", "int32"])), 0, 1),
                                rand(rng, sa, dtype), rand(rng, sb, dtype)]))
    for dtype in ["float32", "int8", "uint8", "int64"]:
        lo = data.draw(st.sampled_from([-np.inf, -300.0, -2.5, 0.0]))
        hi = data.draw(st.sampled_from([np.inf, 300.0, 2.5, 7.0]))
        cases.append(Case("clip", [rand(rng, data.draw(shapes(0, 3)), dtype, -100, 100)],
                          {"a_min": lo, "a_max": hi}))
    for src, dst in [("float32", "int32"), ("float64", "int8"), ("int32", "float32"),
                     ("float32", "bool"), ("int8", "int64"), ("uint8", "float64")]:
        lo = 0 if dst.startswith("u") else -100
        x = rand(rng, data.draw(shapes(0, 3)), src, lo, 100)
        cases.append(Case("cast", [x], {"dtype": dst}))
        cases.append(Case("cast_like", [x, np.zeros((1,), dst)]))
    check_cases(cases)


test_where_clip_cast, test_where_clip_cast_wide = sweep(_where_clip_cast)


def test_dynamic_broadcast_of_two_unknown_dims():
    """``?`` against ``?``: either side may be 1 at run time; one kernel serves all shapes."""
    from _lowering_util import build, need_cc, prim_func, reference, run

    from ember.relay.backend.te_compiler import TECompiler

    need_cc()
    dyn = TensorType((AnyDim(), AnyDim()), "float32")
    rng = np.random.default_rng(3)
    pairs = [((3, 5), (3, 5)), ((3, 1), (1, 5)), ((1, 5), (4, 5)), ((2, 7), (2, 1)), ((1, 1),
                                                                                       (6, 3))]
    compiler = TECompiler()
    case0 = Case("add", [rand(rng, (3, 5)), rand(rng, (3, 5))], types=[dyn, dyn])
    lowered = compiler.lower(prim_func(case0))
    assert lowered.is_dynamic
    mod = build([lowered], compiler)
    for sa, sb in pairs:
        case = Case("add", [rand(rng, sa), rand(rng, sb)])
        want = reference(case)
        got = run(mod, lowered, case.args, want)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6)


def test_relay_api_unary_roundtrip():
    """A unary op built through the Python API lowers with the same result."""
    x = relay.var("x", shape=(3, 5))
    f = relay.Function([x], relay.sigmoid(x)).with_attr("Primitive", 1)
    from ember.relay.backend.te_compiler import TECompiler

    pytest.importorskip("numpy")
    fn = TECompiler().jit(f)
    a = np.linspace(-3, 3, 15, dtype="float32").reshape(3, 5)
    out = ember.nd.empty((3, 5))
    fn(ember.nd.array(a), out)
    np.testing.assert_allclose(out.numpy(), 1 / (1 + np.exp(-a)), rtol=1e-5)


def test_integer_division_by_zero_and_by_minus_one_never_traps():
    """C traps (SIGFPE) on x / 0 and on the smallest value / -1: the kernels give numpy's
    answers instead (0 for a zero divisor, -x modulo 2**bits for -1, remainders 0)."""
    cases = []
    for dtype in ("int8", "int32", "int64", "uint8"):
        info = np.iinfo(dtype)
        a = np.array([info.min, info.min, info.max, 7, info.min, 0], dtype)
        b = np.array([-1, 0, -1, 0, 1, -1] if info.min else [1, 0, 3, 0, 1, 2], dtype)
        cases += [Case(name, [a, b]) for name in ("divide", "floor_divide", "mod", "floor_mod")]
    with np.errstate(divide="ignore", over="ignore"):
        check_cases(cases)

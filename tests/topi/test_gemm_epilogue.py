"""The vector activations of GEMM epilogues (ember/kernels/gemm_epilogue.h), against double
precision references, at every SIMD level this machine runs (AVX2+FMA, SSE2, portable C99):
the block form (ember_vact_block, what GEMM tiles use) and the one-vector form (ember_vact),
over ordinary values, both sides of each polynomial's switch point, large |x| (the exp
clamps, x^3 overflowing) and NaN."""
from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.contrib import cc

HERE = Path(__file__).parent
INCLUDE = Path(ember.__file__).parent / "include"
LEVELS = {"avx2": ["-march=x86-64-v3"], "sse2": ["-march=x86-64-v2"],
          "portable": ["-march=x86-64", "-mno-sse2"]}
# The codes of gemm_epilogue.h with the parameters the harness passes.
GELU_ERF, GELU_TANH, SIGMOID, HARDSWISH, TANH, LEAKY, SILU, HARDSIG, MISH = range(3, 12)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0


def _reference(act: int, x: float) -> float:
    if act == 1:
        return max(x, 0.0)
    if act == 2:
        return min(max(x, -1.0), 6.0)
    if act == GELU_ERF:
        return 0.5 * x * (1.0 + math.erf(0.70710678 * x))
    if act == GELU_TANH:
        u = 0.7978845608 * (x + 0.044715 * x**3) if abs(x) < 1e100 else math.copysign(1e300, x)
        return 0.5 * x * (1.0 + math.tanh(u))
    if act == SIGMOID:
        return _sigmoid(x)
    if act == HARDSWISH:
        return x * min(max(x + 3.0, 0.0), 6.0) / 6.0
    if act == TANH:
        return math.tanh(x)
    if act == LEAKY:
        return x if x > 0 else 0.5 * x
    if act == SILU:
        return x * _sigmoid(x)
    if act == HARDSIG:
        return min(max(0.2 * x + 0.5, 0.0), 1.0)
    assert act == MISH
    return x * math.tanh(math.log1p(math.exp(x))) if x < 20 else x


# ordinary values, the switch points (0.625 tanh, 0.875 erf, 4 erf, 9.1 tanh), the exp clamps
POINTS = sorted(set(np.concatenate([
    np.linspace(-12.0, 12.0, 241), [0.0, -0.0, 1e-30, -1e-30, 1e-6, -1e-6],
    np.nextafter(np.float32([0.625, 0.875, 4.0, 9.1]), np.float32(0)),
    [0.625, 0.875, 4.0, 9.1, -0.625, -0.875, -4.0, -9.1],
    [87.0, 88.5, 89.0, 100.0, -87.0, -88.5, -89.0, -100.0, 1e30, -1e30]]).astype(np.float32)))
# Acts whose result for NaN is NaN (ReLU, clip and the other min/max forms give a bound).
NAN_PROPAGATES = (GELU_ERF, GELU_TANH, SIGMOID, TANH, SILU, MISH)


def _run(level: str, tmp_path: Path, values: list[str]) -> tuple[str, list[tuple[int, float, float]]]:
    compiler = cc.get_cc()
    if compiler is None:
        pytest.skip("no C compiler found")
    if level == "avx2":
        from ember.target.simd import host_features

        if "avx2" not in host_features():
            pytest.skip("host has no AVX2")
    exe = tmp_path / "epilogue"
    subprocess.run([compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2",
                    "-ffp-contract=fast", *LEVELS[level], "-I", str(INCLUDE),
                    str(HERE / "data" / "epilogue_harness.c"), "-o", str(exe), "-lm"],
                   check=True, capture_output=True)
    out = subprocess.run([str(exe), *values], check=True, capture_output=True, text=True)
    lines = out.stdout.split("\n")
    rows = [(int(a), float.fromhex(b), float.fromhex(c))
            for a, b, c in (line.split() for line in lines[1:] if line)]
    return lines[0], rows


@pytest.mark.parametrize("level", list(LEVELS))
def test_vector_activations_match_double_precision(level: str, tmp_path: Path) -> None:
    values = [repr(float(v)) for v in POINTS] + ["nan", "-nan"]
    name, rows = _run(level, tmp_path, values)
    assert name == level  # the path the macros selected
    xs = [float(v) for v in values]
    assert len(rows) == 11 * len(xs)
    for i, (act, block, one) in enumerate(rows):
        x = xs[i % len(xs)]
        for form, got in (("block", block), ("one vector", one)):
            where = f"act {act} x={x!r} ({form}, {level})"
            if math.isnan(x):
                if act in NAN_PROPAGATES:
                    assert math.isnan(got), where
                continue
            want = _reference(act, x)
            assert abs(got - want) <= 2e-6 * abs(want) + 2e-7, f"{where}: {got!r} vs {want!r}"


def test_erf_gelu_within_float_rounding_near_the_switch_points(tmp_path: Path) -> None:
    # Dense sampling around 0.875 and 4 (where the erf polynomials meet): relative error of
    # the erf part, 1 + erf(x / sqrt 2) recovered from the GELU value.
    xs = np.concatenate([np.linspace(1.1, 1.4, 301), np.linspace(5.4, 5.9, 301)])
    xs = np.concatenate([xs, -xs]).astype(np.float32)
    _, rows = _run("sse2", tmp_path, [repr(float(v)) for v in xs])
    got = np.array([b for a, b, _ in rows if a == GELU_ERF])
    want = np.array([0.5 * float(x) * (1.0 + math.erf(0.70710678 * float(x))) for x in xs])
    assert np.all(np.abs(got - want) <= 4e-7 * np.abs(xs) + 1e-30)


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 88.37, -87.3, 1e30, -1e30, 1e-45, -1e-45, np.inf,
                    -np.inf, np.nan, -np.nan], np.float32)


@pytest.mark.parametrize("level", list(LEVELS))
def test_vmax_vmin_keep_the_compare_semantics_at_each_level(level: str, tmp_path: Path) -> None:
    """ember_vmax(a, b) is a > b ? a : b lane by lane, ember_vmin a < b ? a : b, bit for bit:
    NaN in either lane gives b, and of +0 and -0 the second (the exp/erf/tanh clamps rely on
    the bound being the first operand, so a NaN input stays NaN)."""
    compiler = cc.get_cc()
    if compiler is None:
        pytest.skip("no C compiler found")
    exe = tmp_path / "vminmax"
    subprocess.run([compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2",
                    *LEVELS[level], "-I", str(INCLUDE), str(HERE / "data" / "vminmax_harness.c"),
                    "-o", str(exe)], check=True, capture_output=True)
    if level == "avx2":
        from ember.target.simd import host_features

        if "avx2" not in host_features():
            pytest.skip("host has no AVX2")
    lines = subprocess.run([str(exe)], check=True, capture_output=True,
                           text=True).stdout.split("\n")
    assert lines[0] == level
    a, b = np.repeat(SPECIAL, SPECIAL.size), np.tile(SPECIAL, SPECIAL.size)
    got = np.array([[int(v, 16) for v in line.split()] for line in lines[1:] if line],
                   np.uint32)
    for column, want in ((0, np.where(a > b, a, b)), (1, np.where(a < b, a, b))):
        bad = np.flatnonzero(got[:, column] != want.view(np.uint32))
        assert bad.size == 0, (f"{level} {'max' if column == 0 else 'min'}({a[bad[0]]!r}, "
                               f"{b[bad[0]]!r}) bits {got[bad[0], column]:08x}, want "
                               f"{want.view(np.uint32)[bad[0]]:08x}")


@pytest.mark.parametrize("march, instruction", [("x86-64-v3", "vmaxps"), ("x86-64-v2", "maxps"),
                                                ("x86-64-v4", "vmaxps")])
def test_vmax_compiles_to_one_max_instruction(march: str, instruction: str,
                                              tmp_path: Path) -> None:
    """On x86 the clamps are one max/min instruction each, not a compare and a blend."""
    compiler = cc.get_cc()
    if compiler is None:
        pytest.skip("no C compiler found")
    src = tmp_path / "clamp.c"
    src.write_text('#include "ember/kernels/gemm_simd.h"\n'
                   "ember_vf clamp(ember_vf x, ember_vf lo, ember_vf hi) {\n"
                   "  return ember_vmin(hi, ember_vmax(lo, x));\n}\n")
    out = subprocess.run([compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2",
                          f"-march={march}", "-I", str(INCLUDE), "-S", "-o", "-", str(src)],
                         check=True, capture_output=True, text=True).stdout
    body = [line.split()[0] for line in out.split("\n")
            if line.startswith("\t") and not line.startswith("\t.")]
    assert instruction in body and instruction.replace("max", "min") in body, body
    assert not [i for i in body if "blend" in i or i.startswith(("vcmp", "cmp"))], body
